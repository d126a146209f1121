"""`wovepaper ingest ...`: harvest, enrich, analyse, all, status."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Coroutine
from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Any

import asyncpg
import typer

from settings import Settings

if TYPE_CHECKING:
    from ingest.progress import Summary

from cli.common import background_priority, database_url_or_exit, ingest_app, settings_or_exit

_DAY_FORMATS = ["%Y-%m-%d"]
# The exit status of a run stopped by Ctrl-C or SIGTERM (as a shell reports an interrupted command).
STOPPED = 130


def _ingest_process(settings: Settings) -> None:
    """What every ingest command sets up first: its priority below the API's, and logs that redact secrets."""
    import logging

    from ingest.clients.redact import RedactingFilter, Redactor

    background_priority(settings)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The clients redact their own errors and httpx's request lines; this catches whatever else a line may quote.
    model_key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    redacting = RedactingFilter(Redactor([settings.s2_api_key, settings.openalex_api_key, model_key]))
    for handler in logging.getLogger().handlers:
        handler.addFilter(redacting)


def _day(value: datetime | None) -> date | None:
    return value.date() if value is not None else None


async def _stage(what: str, run: Coroutine[Any, Any, Summary]) -> int:
    """One stage's run: its summary line and exit code; a stage another run holds is not run, and that is no
    failure (exit 0)."""
    from ingest.locks import StageBusy
    from ingest.runner import exit_code

    # SIGTERM (a container stopped, a Job deleted) stops a run as Ctrl-C does: the run is cancelled, and what it
    # committed is still told to the cache (ingest/cache.py to_the_end) before it exits.
    loop, task = asyncio.get_running_loop(), asyncio.current_task()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # not on this platform, or not the main thread
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        summary = await run
    except StageBusy as exc:
        typer.echo(str(exc))
        return 0
    except asyncio.CancelledError:
        typer.echo(f"{what}: stopped by a signal; committed work is kept and the next run resumes", err=True)
        return STOPPED
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        # A timeout (WOVEPAPER_INGEST_*), a lost connection: every commit so far is kept, the next run resumes.
        typer.echo(f"{what}: stopped: database: {type(exc).__name__}: {exc}; committed work is kept", err=True)
        return 1
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
    typer.echo(summary.line(what))
    return exit_code(summary)


def _waiting(line: str) -> None:
    typer.echo(line, err=True)


def _arxiv(settings: Settings, from_: datetime | None, until: datetime | None, set_spec: str | None, wait: bool) -> Any:
    from ingest.runner import run_arxiv

    return run_arxiv(settings, from_=_day(from_), until=_day(until), set_spec=set_spec, wait=wait, on_wait=_waiting)


def _enrich(settings: Settings, limit: int | None, batch_size: int | None, wait: bool) -> Any:
    from ingest.runner import run_enrich

    return run_enrich(settings, limit=limit, batch_size=batch_size, wait=wait, on_wait=_waiting)


def _analyse(settings: Settings, limit: int | None, since: datetime | None, wait: bool) -> Any:
    from ingest.runner import run_analyse

    return run_analyse(settings, limit=limit, since=_day(since), wait=wait, on_wait=_waiting)


WAIT_HELP = "When another run holds this stage's lock, wait for it instead of stopping at once (exit 0)."


@ingest_app.command("arxiv")
def ingest_arxiv(
    from_: Annotated[datetime | None, typer.Option("--from", formats=_DAY_FORMATS, help="Harvest from.")] = None,
    until: Annotated[datetime | None, typer.Option("--until", formats=_DAY_FORMATS, help="Harvest up to.")] = None,
    set_spec: Annotated[str | None, typer.Option("--set", help="OAI set, e.g. cs:cs:AI.")] = None,
    wait: bool = typer.Option(False, "--wait", help=WAIT_HELP),
) -> None:
    """Harvest arXiv (OAI-PMH); without --from, continue from the checkpoint. One harvest runs at a time."""
    settings = settings_or_exit()
    database_url_or_exit(settings)
    _ingest_process(settings)
    raise typer.Exit(asyncio.run(_stage("arxiv", _arxiv(settings, from_, until, set_spec, wait))))


@ingest_app.command("enrich")
def ingest_enrich(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Enrich at most N papers."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, max=500, help="Papers per transaction (default 100)."
    ),
    wait: bool = typer.Option(False, "--wait", help=WAIT_HELP),
) -> None:
    """Match papers newest first to Semantic Scholar and OpenAlex: researchers, citations, institutions."""
    settings = settings_or_exit()
    database_url_or_exit(settings)
    _ingest_process(settings)
    raise typer.Exit(asyncio.run(_stage("enrich", _enrich(settings, limit, batch_size, wait))))


@ingest_app.command("analyse")
def ingest_analyse(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Analyse at most N papers."),
    since: Annotated[
        datetime | None, typer.Option("--since", formats=_DAY_FORMATS, help="Only papers published since.")
    ] = None,
    wait: bool = typer.Option(False, "--wait", help=WAIT_HELP),
) -> None:
    """Analyse papers newest first with the language model: summary, topics, type, field, novelty, significance.

    Papers not analysed yet, or whose title or abstract changed since; stops cleanly when the day's token
    budget (WOVEPAPER_LLM_DAILY_TOKENS) is spent.
    """
    from settings.language_model import not_configured_message

    settings = settings_or_exit()
    database_url_or_exit(settings)
    if settings.llm is None:
        typer.echo(f"error: {not_configured_message()}", err=True)
        raise typer.Exit(2)
    _ingest_process(settings)
    raise typer.Exit(asyncio.run(_stage("analyse", _analyse(settings, limit, since, wait))))


@ingest_app.command("all")
def ingest_all(wait: bool = typer.Option(False, "--wait", help=WAIT_HELP)) -> None:
    """`ingest arxiv` (from the checkpoint), `ingest enrich`, then `ingest analyse` when a model is configured.

    A second `ingest all` stops at once (exit 0); a stage that another run (`ingest enrich`, say) holds is skipped,
    or waited for with --wait."""
    settings = settings_or_exit()
    database_url_or_exit(settings)
    _ingest_process(settings)
    raise typer.Exit(asyncio.run(_all(settings, wait)))


async def _all(settings: Settings, wait: bool) -> int:
    from ingest.locks import StageBusy
    from ingest.runner import hold_stage

    try:
        async with hold_stage(settings, "all", wait=wait, on_wait=_waiting):
            code = await _stage("arxiv", _arxiv(settings, None, None, None, wait))
            if code == STOPPED:
                return code
            code = max(code, await _stage("enrich", _enrich(settings, None, None, wait)))
            if code == STOPPED:
                return code
            if settings.llm is None:
                typer.echo("analyse: skipped (no language model configured)")
            else:
                code = max(code, await _stage("analyse", _analyse(settings, None, None, wait)))
            return code
    except StageBusy as exc:
        typer.echo(str(exc))
        return 0
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
        typer.echo(f"all: stopped: database: {type(exc).__name__}: {exc}; committed work is kept", err=True)
        return 1


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
