"""What the `wovepaper ingest` commands run: connections, clients and the cache opened from settings."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date

import asyncpg

from db.cache.store import CacheStore, create_redis
from db.queries.figures import refresh_figures
from db.queries.merges import merge_researchers
from db.records import Touched
from ingest.clients.arxiv_oai import ArxivOAIClient
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.errors import BudgetExhausted
from ingest.pipeline import enrich, harvest_arxiv, invalidate_after_commit
from ingest.progress import Summary
from settings import Settings

log = logging.getLogger("ingest")


@asynccontextmanager
async def _resources(settings: Settings) -> AsyncIterator[tuple[asyncpg.Connection, CacheStore | None]]:
    assert settings.database_url
    conn = await asyncpg.connect(settings.database_url, server_settings={"application_name": "wovepaper-ingest"})
    cache = None
    if settings.redis_url:
        redis = create_redis(settings.redis_url, timeout_s=settings.redis_timeout_s)
        cache = CacheStore(
            redis, namespace=settings.cache_namespace, ttl_s=settings.cache_ttl_s, timeout_s=settings.redis_timeout_s
        )
    try:
        yield conn, cache
    finally:
        await conn.close()
        if cache is not None:
            await cache.aclose()


async def run_arxiv(settings: Settings, *, from_: date | None, until: date | None, set_spec: str | None) -> Summary:
    client = ArxivOAIClient(settings.arxiv_oai_url, delay_s=settings.arxiv_delay_s)
    try:
        async with _resources(settings) as (conn, cache):
            assert settings.database_url
            # A second connection writes one page while the first writes the previous one.
            writer = await asyncpg.connect(
                settings.database_url, server_settings={"application_name": "wovepaper-ingest"}
            )
            try:
                return await harvest_arxiv(
                    conn, client, from_=from_, until=until, set_spec=set_spec, cache=cache, writer=writer
                )
            finally:
                await writer.close()
    finally:
        await client.aclose()


async def run_enrich(settings: Settings, *, limit: int | None) -> Summary:
    s2c = SemanticScholarClient(settings.s2_api_url, api_key=settings.s2_api_key, rps=settings.s2_rps)
    oac = OpenAlexClient(
        settings.openalex_api_url,
        api_key=settings.openalex_api_key,
        mailto=settings.openalex_mailto,
        rps=settings.openalex_rps,
    )
    try:
        async with _resources(settings) as (conn, cache):
            return await enrich(conn, s2c, oac, limit=limit, cache=cache)
    finally:
        await s2c.aclose()
        await oac.aclose()


async def run_merge(settings: Settings, *, absorbed_id: int, survivor_id: int) -> bool:
    """A correction by hand: merge one researcher into another (one transaction), then forget what it changed."""
    async with _resources(settings) as (conn, cache):
        touched = Touched()
        async with conn.transaction():
            merged = await merge_researchers(conn, absorbed_id, survivor_id, touched)
            await refresh_figures(conn, touched)
        await invalidate_after_commit(cache, touched)
    return merged


def exit_code(summary: Summary) -> int:
    """0 when the run finished or stopped on a spent budget (that is expected); 1 when an upstream failed."""
    if summary.stopped is None or BudgetExhausted.__name__ in summary.stopped or "budget" in summary.stopped:
        return 0
    return 1
