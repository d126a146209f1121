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


@pytest.fixture(scope="session")
async def partner_key(guide_database: str) -> str:
    """A key as `wovepaper keys create --name partner` makes it."""
    made = new_key()
    conn = await asyncpg.connect(guide_database)
    try:
        await insert_api_key(
            conn, key_hash=made.key_hash, prefix=made.prefix, name="partner", points_per_hour=None, allowed_origins=[]
        )
    finally:
        await conn.close()
    return made.key


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
