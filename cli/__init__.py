"""The `wovepaper` command: each group of commands in a module of its own, registered on one Typer app."""

from __future__ import annotations

import sys

from cli import admin, check, corrections, ingest, serving
from cli.common import app, metrics_dir_problem
from settings import SettingsError

__all__ = ["app", "main", "admin", "check", "corrections", "ingest", "serving"]


def main() -> None:
    problem = metrics_dir_problem()
    if problem:
        print(problem, file=sys.stderr)
        sys.exit(2)
    try:
        app()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
