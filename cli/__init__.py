"""The `wovepaper` command: each group of commands in a module of its own, registered on one Typer app."""

from __future__ import annotations

import sys

from cli import admin, corrections, ingest, serving
from cli.common import app
from settings import SettingsError

__all__ = ["app", "main", "admin", "corrections", "ingest", "serving"]


def main() -> None:
    try:
        app()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)

