"""Commands that serve, set up or fill a database: serve, up, migrate, demo, embed."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import TYPE_CHECKING, Any

import asyncpg
import typer

from db.migrate import migrate as apply_migrations
from settings import masked_url

if TYPE_CHECKING:
    from settings import Settings
    from settings.redis_target import RedisTarget

from cli.common import app, background_priority, database_url_or_exit, settings_or_exit

# How long the start-up check of Redis's memory policy may wait for Redis.
REDIS_CHECK_TIMEOUT_S = 2.0


def protocol(settings: Settings) -> dict[str, Any]:
    """How uvicorn serves the app: answers from memory without the ASGI exchange (edge/protocol.py), unless
    WOVEPAPER_EDGE_PROTOCOL is off (uvicorn's stock httptools protocol); the client address behind a proxy found
    by the edge (WOVEPAPER_TRUSTED_PROXIES), not by uvicorn; idle connections closed after WOVEPAPER_KEEP_ALIVE_S."""
    http = "edge.protocol:EdgeHttpProtocol" if settings.edge_protocol else "httptools"
    return {"http": http, "proxy_headers": False, "timeout_keep_alive": settings.keep_alive_s}


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="Port to listen on."),
    workers: int | None = typer.Option(None, min=1, help="Worker processes (default: WOVEPAPER_WORKERS, else 1)."),
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
    # A container without its database stops here, with the setting's name, not in a worker's traceback.
    database_url_or_exit(settings)
    workers = workers or settings.workers
    logs.configure(settings.log_format)
    # Once, before any worker starts.
    _warn_about_redis_memory(settings.redis)
    own_metrics_dir = None
    given_metrics_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given_metrics_dir:
        _empty_metrics_dir(given_metrics_dir)
    elif workers > 1:
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
            **protocol(settings),
            timeout_graceful_shutdown=int(max(1, settings.shutdown_grace_s)),
        )
    finally:
        if own_metrics_dir is not None:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)


def _warn_about_redis_memory(target: RedisTarget | str | None) -> None:
    """Logs what `memory_policy_warning` finds wrong with how Redis bounds its memory (db/cache/memory_policy.py)."""
    if not target:
        return
    from db.cache.client import create_redis
    from db.cache.memory_policy import memory_policy_warning

    async def check() -> str | None:
        redis = create_redis(target, timeout_s=REDIS_CHECK_TIMEOUT_S)
        try:
            return await memory_policy_warning(redis)
        finally:
            await redis.aclose()

    warning = asyncio.run(check())
    if warning is not None:
        logging.getLogger("wovepaper.serve").warning(warning)


def _empty_metrics_dir(path: str) -> None:
    """The metrics directory a container mounts (PROMETHEUS_MULTIPROC_DIR) outlives a restarted process: the
    files of the workers before it would be summed with the new ones' (prometheus_client asks for it emptied)."""
    from pathlib import Path

    from cli.common import metrics_dir_problem

    problem = metrics_dir_problem()
    if problem:
        typer.echo(problem, err=True)
        raise typer.Exit(2)
    for stale in Path(path).glob("*.db"):
        stale.unlink(missing_ok=True)


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
    wait: bool = typer.Option(
        False, "--wait", help="When another run holds the embed lock, wait for it instead of stopping at once (exit 0)."
    ),
) -> None:
    """Compute the missing (or stale) paper embeddings that semantic search needs.

    Needs the `semantic` extra and pgvector; resumable: each batch commits, and a rerun picks up the rest. One run
    at a time: a second one stops at once (exit 0), naming the run that holds the lock.
    """
    import time

    import semantic
    from ingest.embed import embed_missing
    from ingest.locks import StageBusy, stage_lock
    from ingest.runner import connect

    settings = settings_or_exit()
    database_url_or_exit(settings)
    background_priority(settings)

    def progress(done: int) -> None:
        typer.echo(f"  {done} embedded", err=True)

    def waiting(line: str) -> None:
        typer.echo(line, err=True)

    async def run() -> int:
        conn = await connect(settings, "embed")
        try:
            async with stage_lock(conn, "embed", wait=wait, on_wait=waiting):
                return await embed_missing(conn, limit, batch_size=batch_size, on_batch=progress)
        finally:
            await conn.close()

    started = time.perf_counter()
    try:
        done = asyncio.run(run())
    except StageBusy as exc:
        typer.echo(str(exc))
        raise typer.Exit(0) from None
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
        # Under Sentinel the primary is found through the Sentinels (REDIS_URL is optional): no Redis is started.
        redis_url = "" if settings.redis_sentinels and not settings.redis_url else settings.redis_url
        with localservers.local_environment(
            Path(settings.local_dir), database_url=settings.database_url, redis_url=redis_url
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
            if env.redis_url:
                os.environ["REDIS_URL"] = env.redis_url
            get_settings.cache_clear()
            typer.echo(f"migrate: {_migrate_or_exit(env.database_url)}")
            if demo and _has_command("demo") and not _has_papers(env.database_url):
                size = ["--papers", str(demo_papers)] if demo_papers else []
                loading_demo = True
                subprocess.run([sys.executable, "-m", "cli", "demo", "--if-empty", *size], check=True)
                loading_demo = False
            _warn_about_redis_memory(env.redis_url)
            typer.echo(f"serving GraphiQL at http://{host}:{port}/graphql (Ctrl-C stops)")
            uvicorn.run(
                "app:create_app",
                factory=True,
                host=host,
                port=port,
                log_level="info",
                **protocol(settings),
            )
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
