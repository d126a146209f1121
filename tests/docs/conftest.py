"""The documentation's examples run against the app serving a small demo database of their own (they create an
API key, so they do not share the session's read-only demo database)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest

from app import create_app
from db.migrate import migrate
from db.queries.api_keys import insert_api_key
from demo import load_demo
from edge.api_keys import new_key
from settings import Settings
from tests.integration.graph_support import serving

GUIDE_PAPERS = 300
GUIDE_SEED = 42
_apps = itertools.count()


@pytest.fixture(scope="session")
async def guide_database(make_database: Any) -> str:
    dsn: str = await make_database("docs-guide")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        await load_demo(conn, papers=GUIDE_PAPERS, seed=GUIDE_SEED)
    finally:
        await conn.close()
    return dsn


async def _key(dsn: str, name: str, points_per_hour: int | None) -> str:
    """A key as `wovepaper keys create --name NAME [--points-per-hour N]` makes it."""
    made = new_key()
    conn = await asyncpg.connect(dsn)
    try:
        await insert_api_key(
            conn,
            key_hash=made.key_hash,
            prefix=made.prefix,
            name=name,
            points_per_hour=points_per_hour,
            allowed_origins=[],
        )
    finally:
        await conn.close()
    return made.key


@pytest.fixture(scope="session")
async def partner_key(guide_database: str) -> str:
    return await _key(guide_database, "partner", None)


@pytest.fixture
async def one_point_key(guide_database: str) -> str:
    """A fresh key with a budget of one point an hour (each test spends its own)."""
    return await _key(guide_database, "tiny", 1)


@pytest.fixture
async def guide_client(guide_database: str, redis_url: str, cache_namespace: str) -> AsyncIterator[httpx.AsyncClient]:
    """The app as `make run` serves it (Redis, default settings), with a Redis namespace of its own per test."""
    settings = Settings(
        DATABASE_URL=guide_database,
        REDIS_URL=redis_url,
        cache_namespace=f"{cache_namespace}-g{next(_apps)}",
        semantic_preload=False,
    )
    async with serving(create_app(settings)) as client:
        yield client
