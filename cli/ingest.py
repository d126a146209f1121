"""`wovepaper ingest ...`: harvest, enrich, analyse, all, status."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Any

import asyncpg
import typer

from settings import Settings

if TYPE_CHECKING:
    from ingest.progress import Summary

from cli.common import database_url_or_exit, ingest_app, settings_or_exit

_DAY_FORMATS = ["%Y-%m-%d"]


def _ingest_logging(settings: Settings) -> None:
    import logging

    from ingest.clients.redact import RedactingFilter, Redactor

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The clients redact their own errors and httpx's request lines; this catches whatever else a line may quote.
    model_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    redacting = RedactingFilter(Redactor([settings.s2_api_key, settings.openalex_api_key, model_key]))
    for handler in logging.getLogger().handlers:
        handler.addFilter(redacting)


def _day(value: datetime | None) -> date | None:
    return value.date() if value is not None else None


def _ingest_run(what: str, run: Coroutine[Any, Any, Summary]) -> int:
    from ingest.runner import exit_code

    try:
        summary = asyncio.run(run)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        # A timeout (WOVEPAPER_INGEST_*), a lost connection: every commit so far is kept, the next run resumes.
        typer.echo(f"{what}: stopped: database: {type(exc).__name__}: {exc}; committed work is kept", err=True)
        return 1
    typer.echo(summary.line(what))
    return exit_code(summary)


def _ingest_arxiv(settings: Settings, from_: datetime | None, until: datetime | None, set_spec: str | None) -> int:
    from ingest.runner import run_arxiv

    return _ingest_run("arxiv", run_arxiv(settings, from_=_day(from_), until=_day(until), set_spec=set_spec))


def _ingest_enrich(settings: Settings, limit: int | None, batch_size: int | None = None) -> int:
    from ingest.runner import run_enrich

    return _ingest_run("enrich", run_enrich(settings, limit=limit, batch_size=batch_size))


def _ingest_analyse(settings: Settings, limit: int | None, since: datetime | None) -> int:
    from ingest.runner import run_analyse

    return _ingest_run("analyse", run_analyse(settings, limit=limit, since=_day(since)))


@ingest_app.command("arxiv")
def ingest_arxiv(
    from_: Annotated[datetime | None, typer.Option("--from", formats=_DAY_FORMATS, help="Harvest from.")] = None,
    until: Annotated[datetime | None, typer.Option("--until", formats=_DAY_FORMATS, help="Harvest up to.")] = None,
    set_spec: Annotated[str | None, typer.Option("--set", help="OAI set, e.g. cs:cs:AI.")] = None,
) -> None:
    """Harvest arXiv (OAI-PMH); without --from, continue from the checkpoint."""
    settings = settings_or_exit()
    database_url_or_exit(settings)
    _ingest_logging(settings)
    raise typer.Exit(_ingest_arxiv(settings, from_, until, set_spec))


@ingest_app.command("enrich")
def ingest_enrich(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Enrich at most N papers."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, max=500, help="Papers per transaction (default 100)."
    ),
) -> None:
    """Match papers newest first to Semantic Scholar and OpenAlex: researchers, citations, institutions."""
    settings = settings_or_exit()
    database_url_or_exit(settings)
    _ingest_logging(settings)
    raise typer.Exit(_ingest_enrich(settings, limit, batch_size))


@ingest_app.command("analyse")
def ingest_analyse(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Analyse at most N papers."),
    since: Annotated[
        datetime | None, typer.Option("--since", formats=_DAY_FORMATS, help="Only papers published since.")
    ] = None,
) -> None:
    """Analyse papers newest first with the language model: summary, topics, type, field, novelty, significance.

    Papers not analysed yet, or whose title or abstract changed since; stops cleanly when the day's token
    budget (WOVEPAPER_LLM_DAILY_TOKENS) is spent.
    """
    from llm import not_configured_message

    settings = settings_or_exit()
    database_url_or_exit(settings)
    if settings.llm is None:
        typer.echo(f"error: {not_configured_message()}", err=True)
        raise typer.Exit(2)
    _ingest_logging(settings)
    raise typer.Exit(_ingest_analyse(settings, limit, since))


@ingest_app.command("all")
def ingest_all() -> None:
    """`ingest arxiv` (from the checkpoint), `ingest enrich`, then `ingest analyse` when a model is configured."""
    settings = settings_or_exit()
    database_url_or_exit(settings)
    _ingest_logging(settings)
    code = _ingest_arxiv(settings, None, None, None)
    code = max(code, _ingest_enrich(settings, None))
    if settings.llm is None:
        typer.echo("analyse: skipped (no language model configured)")
    else:
        code = max(code, _ingest_analyse(settings, None, None))
    raise typer.Exit(code)


@ingest_app.command("status")
def ingest_status(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object, for scripts and monitoring."),
    failures: int = typer.Option(10, "--failures", min=0, help="List at most N papers set aside."),
    unlinked: int = typer.Option(
        20, "--unlinked", min=0, help="List at most N unlinked author positions (ambiguous ties first)."
    ),
) -> None:
    """What each source has committed (records, pages, last success, lag behind arXiv), the enrichment backlog,
    the papers set aside with their reasons, and the author positions the matching left unlinked (counts by reason:
    ambiguous ties, authors the sources list without an id, authors they do not list)."""
    import json

    from ingest.progress import status_json, status_lines
    from ingest.runner import read_status

    settings = settings_or_exit()
    database_url_or_exit(settings)
    status, set_aside, matching = asyncio.run(read_status(settings, failures=failures, unlinked=unlinked))
    if as_json:
        typer.echo(json.dumps(status_json(status, set_aside, matching), indent=2))
    else:
        for line in status_lines(status, set_aside, matching):
            typer.echo(line)
