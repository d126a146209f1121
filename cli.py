"""The `wovepaper` command."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import date, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import asyncpg
import typer

from db.migrate import migrate as apply_migrations
from settings import Settings, SettingsError, load_settings, masked_url

if TYPE_CHECKING:
    from ingest.progress import Summary

T = TypeVar("T")

app = typer.Typer(help="wovepaper: the GraphQL API over arXiv, Semantic Scholar and OpenAlex.", no_args_is_help=True)
ingest_app = typer.Typer(
    help="Harvest arXiv, enrich from Semantic Scholar and OpenAlex, analyse with the language model.",
    no_args_is_help=True,
)
app.add_typer(ingest_app, name="ingest")
keys_app = typer.Typer(help="API keys for partners and the site's server (sent in X-Api-Key).", no_args_is_help=True)
app.add_typer(keys_app, name="keys")


def settings_or_exit() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def database_url_or_exit(settings: Settings) -> str:
    if not settings.database_url:
        typer.echo("error: DATABASE_URL is not set (`make run` sets up a local one)", err=True)
        raise typer.Exit(2)
    return settings.database_url


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int = typer.Option(1, min=1, help="Worker processes."),
) -> None:
    """Serve the API (GraphiQL at /graphql) with uvicorn.

    SIGTERM drains first (`/readyz` answers 503 for WOVEPAPER_SHUTDOWN_DRAIN_S), then in-flight requests get
    WOVEPAPER_SHUTDOWN_GRACE_S to finish. With several workers, /metrics sums them all."""
    import os
    import shutil
    import tempfile

    import uvicorn

    from telemetry import logs

    settings = settings_or_exit()
    logs.configure(settings.log_format)
    own_metrics_dir = None
    if workers > 1 and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Set before any worker imports prometheus_client: each writes its values here, /metrics reads them all.
        own_metrics_dir = tempfile.mkdtemp(prefix="wovepaper-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = own_metrics_dir
    try:
        uvicorn.run(
            "app:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="info",
            log_config=None,
            timeout_keep_alive=5,
            timeout_graceful_shutdown=int(max(1, settings.shutdown_grace_s)),
        )
    finally:
        if own_metrics_dir is not None:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)


@app.command()
def migrate() -> None:
    """Apply pending database migrations (safe to run twice, or from two processes at once)."""
    typer.echo(_migrate_or_exit(database_url_or_exit(settings_or_exit())))


@app.command()
def demo(
    papers: int = typer.Option(20_000, min=100, help="Papers to generate (1000000 builds the benchmark database)."),
    seed: int = typer.Option(42, help="Random seed: the same seed always gives the same rows."),
    if_empty: bool = typer.Option(False, "--if-empty", help="Load only when the database has no papers."),
) -> None:
    """Load the deterministic demo dataset through the ingest's bulk write path (migrates first)."""
    import demo as demo_data

    dsn = database_url_or_exit(settings_or_exit())
    typer.echo(f"migrate: {_migrate_or_exit(dsn)}")
    code = asyncio.run(demo_data.run_demo_command(dsn, papers=papers, seed=seed, if_empty=if_empty, echo=typer.echo))
    raise typer.Exit(code)


@app.command()
def embed(
    limit: int | None = typer.Option(None, "--limit", min=1, help="Embed at most N papers."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, max=1024, help="Papers per model batch and commit."),
) -> None:
    """Compute the missing (or stale) paper embeddings that semantic search needs.

    Needs the `semantic` extra and pgvector; resumable: each batch commits, and a rerun picks up the rest.
    """
    import time

    import semantic
    from ingest.embed import embed_missing

    dsn = database_url_or_exit(settings_or_exit())

    def progress(done: int) -> None:
        typer.echo(f"  {done} embedded", err=True)

    async def run() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return await embed_missing(conn, limit, batch_size=batch_size, on_batch=progress)
        finally:
            await conn.close()

    started = time.perf_counter()
    try:
        done = asyncio.run(run())
    except semantic.EmbeddingsUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(3) from None
    seconds = time.perf_counter() - started
    rate = f" ({done / seconds:.1f} papers/s)" if done else ""
    typer.echo(f"embedded {done} paper(s) in {seconds:.1f}s{rate}")


@app.command()
def up(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="Port to listen on."),
    demo: bool = typer.Option(True, "--demo/--no-demo", help="Load the demo data when the database has no papers."),
    demo_papers: int | None = typer.Option(None, min=100, help="Papers the demo data set gets (default: demo's)."),
) -> None:
    """Run for development (`make run`): local servers when DATABASE_URL / REDIS_URL are unset, migrate, demo, serve.

    Project-local PostgreSQL and Redis live under WOVEPAPER_LOCAL_DIR (default .wovepaper/) and stop on exit.
    """
    import os
    import signal
    import subprocess
    from pathlib import Path

    import uvicorn

    import localservers
    from settings import get_settings

    settings = settings_or_exit()
    # Before any server starts or the demo loads: a taken port should fail in a second, not after minutes.
    _port_free_or_exit(host, port)

    def on_sigterm(signum: int, frame: object) -> None:
        # Python's default for SIGTERM skips `finally`: stop the local servers as Ctrl-C does.
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_sigterm)
    # A shell starts background jobs with SIGINT ignored, and Python keeps it so; uvicorn takes SIGINT back once it
    # serves, so the demo load and the migrations before it must stop on SIGINT too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    loading_demo = False
    try:
        with localservers.local_environment(
            Path(settings.local_dir), database_url=settings.database_url, redis_url=settings.redis_url
        ) as env:
            for started in env.started:
                typer.echo(f"started project-local {started}")
            if env.started:
                # Other commands (ingest, demo, psql) can share these servers while this one runs. A URL the user
                # gave is in their environment already, and may carry a password: it is never printed.
                urls = [
                    ("DATABASE_URL", env.database_url, settings.database_url),
                    ("REDIS_URL", env.redis_url, settings.redis_url),
                ]
                exports = " ".join(f"{name}='{masked_url(url)}'" for name, url, given in urls if given is None)
                typer.echo(f"other shells: export {exports}")
            # The app, the demo loader and any worker read their settings from the environment.
            os.environ["DATABASE_URL"] = env.database_url
            os.environ["REDIS_URL"] = env.redis_url
            get_settings.cache_clear()
            typer.echo(f"migrate: {_migrate_or_exit(env.database_url)}")
            if demo and _has_command("demo") and not _has_papers(env.database_url):
                size = ["--papers", str(demo_papers)] if demo_papers else []
                loading_demo = True
                subprocess.run([sys.executable, "-m", "cli", "demo", "--if-empty", *size], check=True)
                loading_demo = False
            typer.echo(f"serving GraphiQL at http://{host}:{port}/graphql (Ctrl-C stops)")
            uvicorn.run("app:create_app", factory=True, host=host, port=port, log_level="info", timeout_keep_alive=5)
    except localservers.LocalServiceError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except subprocess.CalledProcessError as exc:
        typer.echo(f"error: `wovepaper demo` failed with exit code {exc.returncode}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        if loading_demo:
            # A load into an empty database is one transaction: interrupted, it leaves the database empty.
            typer.echo("the demo load was interrupted: the next run loads it again", err=True)
    typer.echo("stopped")


def _has_command(name: str) -> bool:
    return any((c.name or (c.callback.__name__ if c.callback else "")) == name for c in app.registered_commands)


def _port_free_or_exit(host: str, port: int) -> None:
    import socket

    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        typer.echo(
            f"error: cannot listen on {host}:{port} ({exc.strerror or exc}); stop what runs there or pick another "
            f"port (make run PORT={port + 1})",
            err=True,
        )
        raise typer.Exit(1) from None


def _has_papers(dsn: str) -> bool:
    # Checked here first: starting `wovepaper demo --if-empty` only to learn that would cost a second per run.
    from db.queries.writes.papers import count_papers

    async def run() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return await count_papers(conn)
        finally:
            await conn.close()

    return asyncio.run(run()) > 0


def _migrate_or_exit(dsn: str) -> str:
    async def run() -> list[str]:
        conn = await asyncpg.connect(dsn)
        try:
            return await apply_migrations(conn)
        finally:
            await conn.close()

    try:
        applied = asyncio.run(run())
    except (OSError, asyncpg.PostgresError) as exc:
        typer.echo(f"error: cannot migrate the database at DATABASE_URL: {exc}", err=True)
        raise typer.Exit(1) from None
    return f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else "")


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
) -> None:
    """What each source has committed (records, pages, last success, lag behind arXiv), the enrichment backlog
    and the papers set aside with their reasons."""
    import json

    from ingest.progress import status_json, status_lines
    from ingest.runner import read_status

    settings = settings_or_exit()
    database_url_or_exit(settings)
    status, set_aside = asyncio.run(read_status(settings, failures=failures))
    if as_json:
        typer.echo(json.dumps(status_json(status, set_aside), indent=2))
    else:
        for line in status_lines(status, set_aside):
            typer.echo(line)


@app.command("merge-researchers")
def merge_researchers(
    absorbed: int = typer.Argument(..., min=1, help="Database id of the researcher to merge away."),
    survivor: int = typer.Argument(..., min=1, help="Database id of the researcher that absorbs it."),
) -> None:
    """Merge one researcher profile into another (two profiles of one person): the absorbed id, slug and
    Semantic Scholar id keep resolving to the survivor, and the changes feed lists the merge."""
    from ingest.runner import run_merge

    settings = settings_or_exit()
    database_url_or_exit(settings)
    if not asyncio.run(run_merge(settings, absorbed_id=absorbed, survivor_id=survivor)):
        typer.echo(f"error: no merge: researchers {absorbed} and {survivor} must both exist and differ", err=True)
        raise typer.Exit(1)
    typer.echo(f"merged researcher {absorbed} into {survivor}")


async def _with_connection(dsn: str, work: Callable[[asyncpg.Connection], Awaitable[T]]) -> T:
    conn = await asyncpg.connect(dsn)
    try:
        return await work(conn)
    finally:
        await conn.close()


@keys_app.command("create")
def keys_create(
    name: str = typer.Option(..., "--name", help="Who the key is for (shown in `keys list`)."),
    points_per_hour: int | None = typer.Option(
        None, "--points-per-hour", min=1, help="Its budget; default WOVEPAPER_KEY_POINTS_PER_HOUR."
    ),
    origins: Annotated[
        list[str] | None,
        typer.Option("--origins", help="Browser origins it may be used from (repeat or comma-separate); default any."),
    ] = None,
) -> None:
    """Create a key and print it once: only its hash is stored."""
    from db.queries.api_keys import insert_api_key
    from edge.api_keys import new_key

    dsn = database_url_or_exit(settings_or_exit())
    allowed = [o.strip().rstrip("/") for spec in origins or () for o in spec.split(",") if o.strip()]
    made = new_key()
    row = asyncio.run(
        _with_connection(
            dsn,
            lambda conn: insert_api_key(
                conn,
                key_hash=made.key_hash,
                prefix=made.prefix,
                name=name,
                points_per_hour=points_per_hour,
                allowed_origins=allowed,
            ),
        )
    )
    typer.echo(made.key)
    typer.echo(f"created key {row.prefix} (id {row.id}) for {row.name}; it is not shown again", err=True)


@keys_app.command("list")
def keys_list() -> None:
    """Every key: name, prefix, created, last used, points per hour, revoked."""
    from db.queries.api_keys import fetch_api_keys

    settings = settings_or_exit()
    rows = asyncio.run(_with_connection(database_url_or_exit(settings), fetch_api_keys))
    typer.echo("id\tname\tprefix\tcreated\tlast used\tpoints/hour\trevoked\torigins")
    for r in rows:
        limit = str(r.points_per_hour) if r.points_per_hour else f"{settings.key_points_per_hour} (default)"
        typer.echo(
            "\t".join(
                [
                    str(r.id),
                    r.name,
                    r.prefix or "-",
                    f"{r.created_at:%Y-%m-%d %H:%M}",
                    f"{r.last_used_at:%Y-%m-%d %H:%M}" if r.last_used_at else "never",
                    limit,
                    f"{r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "no",
                    ",".join(r.allowed_origins) or "any",
                ]
            )
        )


@keys_app.command("revoke")
def keys_revoke(prefix_or_id: str = typer.Argument(..., help="The key's prefix (wpk_xxxxxxxx) or id.")) -> None:
    """Revoke a key: every server refuses it within 10 seconds."""
    from db.queries.api_keys import revoke_api_key

    dsn = database_url_or_exit(settings_or_exit())
    row = asyncio.run(_with_connection(dsn, lambda conn: revoke_api_key(conn, prefix_or_id=prefix_or_id)))
    if row is None:
        typer.echo(f"error: no key {prefix_or_id!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked key {row.prefix or row.id} ({row.name})")


def main() -> None:
    try:
        app()
    except SettingsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
