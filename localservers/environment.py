"""Both servers for the dev runner: the URLs given, or project-local servers started for the missing ones."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from localservers.postgres import start_local_postgres
from localservers.redis import start_redis


@dataclass
class LocalEnvironment:
    """The URLs to use; `started` names the project-local servers this process brought up."""

    database_url: str
    redis_url: str
    started: list[str]


@contextlib.contextmanager
def local_environment(
    local_dir: Path, *, database_url: str | None, redis_url: str | None, database: str = "wovepaper"
) -> Iterator[LocalEnvironment]:
    """Use the given URLs; for each one that is None, start a project-local server and stop it on exit."""
    stops: list[Callable[[], None]] = []
    started: list[str] = []
    try:
        if database_url is None:
            pg = start_local_postgres(local_dir)
            stops.append(pg.stop)
            _create_database(pg.uri, database)
            database_url = pg.database_uri(database)
            started.append(f"PostgreSQL in {pg.pgdata}")
        if redis_url is None:
            rd = start_redis(local_dir / "redis")
            stops.append(rd.stop)
            redis_url = rd.url
            started.append(f"Redis at {rd.url}")
        yield LocalEnvironment(database_url=database_url, redis_url=redis_url, started=started)
    finally:
        for stop in reversed(stops):
            stop()


def _create_database(admin_uri: str, name: str) -> None:
    import asyncio

    import asyncpg

    from db.admin import create_database

    async def run() -> None:
        conn = await asyncpg.connect(admin_uri)
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                with contextlib.suppress(asyncpg.DuplicateDatabaseError):
                    await create_database(conn, name)
        finally:
            await conn.close()

    asyncio.run(run())
