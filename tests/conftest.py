"""Shared fixtures: a real PostgreSQL database and a real Redis per test session.

DATABASE_URL / REDIS_URL name servers to use; without them the project-local servers start
(see localservers/). Each session creates its own uniquely named database and drops it at the
end; it never touches another database. Redis keys carry a per-session namespace.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest

import localservers
from db.admin import create_database
from db.migrate import migrate

ROOT = Path(__file__).resolve().parent.parent
SESSION_TAG = uuid.uuid4().hex[:10]
# Apps built by tests load the embedding model only when a test searches semantically, not at every start.
os.environ.setdefault("WOVEPAPER_SEMANTIC_PRELOAD", "false")
# The ingest commands the tests run in this process would lower its priority, and every server it starts after.
os.environ["WOVEPAPER_INGEST_NICE"] = "0"
# Servers reach tests only through the fixtures below: no Settings() built in a test picks up a shared server,
# or the shared default cache namespace, from the environment by accident.
ENV_DATABASE_URL = os.environ.pop("DATABASE_URL", None)
ENV_REDIS_URL = os.environ.pop("REDIS_URL", None)
CACHE_NAMESPACE = f"t{SESSION_TAG}"
os.environ["WOVEPAPER_CACHE_NAMESPACE"] = CACHE_NAMESPACE


def _with_database(dsn: str, name: str) -> str:
    """Swap the database name in a DSN, keeping host, socket and options."""
    head, sep, query = dsn.partition("?")
    scheme, _, rest = head.partition("://")
    authority, _, _ = rest.partition("/")
    return f"{scheme}://{authority}/{name}{sep}{query}"


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    if ENV_DATABASE_URL:
        return ENV_DATABASE_URL
    return localservers.start_postgres(ROOT / ".wovepaper" / "test")


@pytest.fixture(scope="session")
async def empty_database(pg_admin_dsn: str) -> AsyncIterator[str]:
    """A fresh, unmigrated database of this session's own; dropped at the end."""
    name = f"wovepaper_test_{SESSION_TAG}"
    admin = await asyncpg.connect(pg_admin_dsn)
    try:
        await create_database(admin, name)
    finally:
        await admin.close()
    yield _with_database(pg_admin_dsn, name)
    admin = await asyncpg.connect(pg_admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(scope="session")
async def database_url(empty_database: str) -> str:
    """This session's database, migrated."""
    conn = await asyncpg.connect(empty_database)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return empty_database


@pytest.fixture(scope="session")
async def make_database(pg_admin_dsn: str) -> AsyncIterator[object]:
    """A factory for extra throwaway databases (migration tests, demo loads); all dropped at the end."""
    created: list[str] = []

    async def factory(suffix: str) -> str:
        name = f"wovepaper_test_{SESSION_TAG}_{suffix}"
        admin = await asyncpg.connect(pg_admin_dsn)
        try:
            await create_database(admin, name)
        finally:
            await admin.close()
        created.append(name)
        return _with_database(pg_admin_dsn, name)

    yield factory
    admin = await asyncpg.connect(pg_admin_dsn)
    try:
        for name in created:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if ENV_REDIS_URL:
        yield ENV_REDIS_URL
        return
    server = localservers.start_redis(tmp_path_factory.mktemp("redis"))
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def evicting_redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Redis of its own that has evicted keys under `maxmemory` (allkeys-lru), as a full cache does: its
    `evicted_keys` is above 0, so the API checks that cached values are still listed by their tag sets. Its memory
    is unbounded again afterwards, so nothing the tests store is evicted by chance."""
    import redis

    server = localservers.start_redis(tmp_path_factory.mktemp("evicting-redis"))
    client = redis.Redis.from_url(server.url)
    try:
        client.config_set("maxmemory", "2mb")
        filler = b"x" * 10_000
        for i in range(1_000):
            client.set(f"filler:{i}", filler)
            if int(client.info("stats")["evicted_keys"]) > 0:
                break
        assert int(client.info("stats")["evicted_keys"]) > 0
        client.flushall()
        client.config_set("maxmemory", "512mb")
    finally:
        client.close()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def cache_namespace() -> str:
    return CACHE_NAMESPACE


DEMO_FIXTURE_PAPERS = 1_500
DEMO_FIXTURE_SEED = 42


@pytest.fixture(scope="session")
async def demo_database_url(make_database) -> str:
    """A database of its own, migrated and loaded with a small deterministic demo (a few seconds). READ ONLY.

    Loaded by `demo.load_demo(papers=1500, seed=42, bulk=False)` through the upserts, figures refreshed.
    Guarantees (checked by tests/integration/test_demo.py):
    - 1,500 papers published 1995-2026, primary category first in `categories`, some cross-listed;
      old-style ids (`hep-th/9901001`) for papers before April 2007, `YYMM.NNNN(N)` after;
      about 35% analysed (analysis fields set), the rest with null analysis fields and analysed=false;
      about 85% with a citation count (source s2 or openalex), the rest null; some with several versions.
    - 2,250 researchers, each with at least one paper here and an S2 id; most with an OpenAlex id, some an
      ORCID; names with diacritics, native scripts (CJK, Cyrillic, Hangul) and suffixes (Jr., III).
    - One heavy researcher: the one with the most papers here (ORDER BY paper_count DESC, id LIMIT 1;
      id 1 in this database), with 180 papers here and more than 5,000 distinct external works, listed by
      both sources with overlaps, some of them their own arXiv papers.
    - About 10% of non-collaboration authorships unmatched (researcher_id null); a few collaboration
      authorships ("ATLAS Collaboration", ...) that are never researchers; many papers fully matched.
    - 500 institutions with valid ROR ids, countries and types, linked to authorships and researchers.
    Tests must not write to it: other tests of the session share it.
    """
    from db.migrate import migrate as apply_migrations
    from demo import load_demo

    dsn = await make_database("demo")
    conn = await asyncpg.connect(dsn)
    try:
        await apply_migrations(conn)
        # Through the upserts: tests/integration/test_demo.py checks the COPY path gives the same rows.
        await load_demo(conn, papers=DEMO_FIXTURE_PAPERS, seed=DEMO_FIXTURE_SEED, bulk=False)
    finally:
        await conn.close()
    return dsn
