"""What the `wovepaper ingest` commands run: connections, clients and the cache opened from settings."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date

import asyncpg

from db.cache.invalidation import attach_purge
from db.cache.purge import HttpPurge
from db.cache.store import CacheStore, create_redis
from db.queries.figures import refresh_figures
from db.queries.ingest_state import EnrichFailure, IngestStatus, fetch_enrich_failures, fetch_ingest_status
from db.queries.merges import merge_researchers
from db.records import Touched
from ingest.analyse import ANALYSE_BATCH, analyse
from ingest.cache import commit_position, invalidate_after_commit
from ingest.clients.arxiv_oai import ArxivOAIClient
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.errors import BudgetExhausted
from ingest.harvest import harvest_arxiv
from ingest.pipeline import ENRICH_BATCH, enrich
from ingest.progress import Summary
from ingest.purge import PurgeAfterReplicas
from llm import ModelClient
from settings import Settings

log = logging.getLogger("ingest")


async def connect(settings: Settings) -> asyncpg.Connection:
    """An ingest connection: every statement, lock wait and idle transaction bounded (WOVEPAPER_INGEST_*)."""
    assert settings.database_url
    return await asyncpg.connect(
        settings.database_url,
        # The server's timeout fires first; this one covers a server that stopped answering at all.
        command_timeout=settings.ingest_statement_timeout_ms / 1000 + 30,
        server_settings={
            "application_name": "wovepaper-ingest",
            "statement_timeout": str(settings.ingest_statement_timeout_ms),
            "lock_timeout": str(settings.ingest_lock_timeout_ms),
            "idle_in_transaction_session_timeout": str(settings.ingest_idle_timeout_ms),
        },
    )


@asynccontextmanager
async def _resources(settings: Settings) -> AsyncIterator[tuple[asyncpg.Connection, CacheStore | None]]:
    conn = await connect(settings)
    cache = None
    if settings.redis_url:
        redis = create_redis(settings.redis_url, timeout_s=settings.redis_timeout_s)
        cache = CacheStore(
            redis, namespace=settings.cache_namespace, ttl_s=settings.cache_ttl_s, timeout_s=settings.redis_timeout_s
        )
    token = settings.purge_token.get_secret_value() if settings.purge_token is not None else None
    purge: HttpPurge | PurgeAfterReplicas | None = None
    if settings.purge_url and cache is not None:
        purge = HttpPurge(settings.purge_url, token=token)
        if settings.replica_dsns:
            # The CDN asks again once purged: not before the replicas it may be answered from have the write.
            purge = PurgeAfterReplicas(purge, settings.replica_dsns, max_lag_s=settings.replica_max_lag_s)
        attach_purge(cache, purge)
    try:
        yield conn, cache
    finally:
        await conn.close()
        if cache is not None:
            await cache.aclose()
        if purge is not None:
            await purge.aclose()


async def run_arxiv(settings: Settings, *, from_: date | None, until: date | None, set_spec: str | None) -> Summary:
    client = ArxivOAIClient(settings.arxiv_oai_url, delay_s=settings.arxiv_delay_s)
    try:
        async with _resources(settings) as (conn, cache):
            # A second connection writes one page while the first writes the previous one.
            writer = await connect(settings)
            try:
                return await harvest_arxiv(
                    conn, client, from_=from_, until=until, set_spec=set_spec, cache=cache, writer=writer
                )
            finally:
                await writer.close()
    finally:
        await client.aclose()


async def run_enrich(settings: Settings, *, limit: int | None, batch_size: int | None = None) -> Summary:
    s2c = SemanticScholarClient(settings.s2_api_url, api_key=settings.s2_api_key, rps=settings.s2_rps)
    oac = OpenAlexClient(
        settings.openalex_api_url,
        api_key=settings.openalex_api_key,
        mailto=settings.openalex_mailto,
        rps=settings.openalex_rps,
    )
    try:
        async with _resources(settings) as (conn, cache):
            return await enrich(conn, s2c, oac, limit=limit, batch_size=batch_size or ENRICH_BATCH, cache=cache)
    finally:
        await s2c.aclose()
        await oac.aclose()


async def run_analyse(settings: Settings, *, limit: int | None, since: date | None) -> Summary:
    """`ingest analyse`; the caller has checked that the model is configured (`settings.llm`)."""
    config = settings.llm
    assert config is not None
    # As many connections as a batch has papers: its requests go out side by side (within the rps pacing).
    client = ModelClient.from_config(config, max_connections=ANALYSE_BATCH)
    try:
        async with _resources(settings) as (conn, cache):
            return await analyse(
                conn, client, limit=limit, since=since, daily_tokens=settings.llm_daily_tokens, cache=cache
            )
    finally:
        await client.aclose()


async def run_merge(settings: Settings, *, absorbed_id: int, survivor_id: int) -> bool:
    """A correction by hand: merge one researcher into another (one transaction), then forget what it changed."""
    async with _resources(settings) as (conn, cache):
        touched = Touched()
        async with conn.transaction():
            merged = await merge_researchers(conn, absorbed_id, survivor_id, touched)
            await refresh_figures(conn, touched)
        await invalidate_after_commit(cache, touched, await commit_position(cache, conn))
    return merged


async def read_status(settings: Settings, *, failures: int = 10) -> tuple[IngestStatus, list[EnrichFailure]]:
    """Every source's progress, the enrichment backlog and the latest papers set aside."""
    conn = await connect(settings)
    try:
        return await fetch_ingest_status(conn), await fetch_enrich_failures(conn, limit=failures)
    finally:
        await conn.close()


def exit_code(summary: Summary) -> int:
    """0 when the run finished or stopped on a spent budget (that is expected); 1 when an upstream failed or a
    record or paper failed (the summary counts them)."""
    if summary.failed:
        return 1
    if summary.stopped is None or BudgetExhausted.__name__ in summary.stopped or "budget" in summary.stopped:
        return 0
    return 1
