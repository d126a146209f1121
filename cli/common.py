"""The `wovepaper` command's Typer apps and what every command needs first: settings and a database URL."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import typer

from settings import Settings, SettingsError, load_settings

if TYPE_CHECKING:
    pass

T = TypeVar("T")

app = typer.Typer(help="wovepaper: the GraphQL API over arXiv, Semantic Scholar and OpenAlex.", no_args_is_help=True)
ingest_app = typer.Typer(
    help="Harvest arXiv, enrich from Semantic Scholar and OpenAlex, analyse with the language model.",
    no_args_is_help=True,
)
app.add_typer(ingest_app, name="ingest")
keys_app = typer.Typer(help="API keys for partners and the site's server (sent in X-Api-Key).", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
corrections_app = typer.Typer(
    help="Corrections readers asked for (claims, papers that are or are not theirs, splits, merges): decide them.",
    no_args_is_help=True,
)
app.add_typer(corrections_app, name="corrections")


def settings_or_exit() -> Settings:
    """The settings, and the embedding model configured from them (semantic/ reads no settings itself)."""
    import semantic

    try:
        settings = load_settings()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    semantic.configure(backend=settings.embedding_backend, model_dir=settings.model_dir)
    return settings


def metrics_dir_problem() -> str | None:
    """Why PROMETHEUS_MULTIPROC_DIR, when set, cannot take prometheus_client's files (every process told of it writes
    there, and would fail on its first metric), as the one line to print; None when it can or is unset."""
    import os
    from pathlib import Path

    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        return None
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        probe = Path(path) / f".writable-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        return f"error: PROMETHEUS_MULTIPROC_DIR={path} is not a writable directory: {exc.strerror or exc}"
    return None


def background_priority(settings: Settings) -> None:
    """A batch command yields the cores to the API and PostgreSQL it may share a host with: its priority is lowered
    to WOVEPAPER_INGEST_NICE (never raised: a command started under `nice` keeps its own). Called first, before any
    thread starts, since Linux keeps a priority a thread and new threads inherit their creator's."""
    import os

    current = os.getpriority(os.PRIO_PROCESS, 0)
    if settings.ingest_nice > current:
        os.setpriority(os.PRIO_PROCESS, 0, settings.ingest_nice)


def database_url_or_exit(settings: Settings) -> str:
    if not settings.database_url:
        typer.echo("error: DATABASE_URL is not set (`make run` sets up a local one)", err=True)
        raise typer.Exit(2)
    return settings.database_url
