"""What the `wovepaper ingest` commands run: connections, clients and the cache opened from settings."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import date
from functools import partial

import asyncpg

from cdn.purge import HttpPurge
from db.cache.client import create_redis
from db.cache.invalidation import attach_purge
from db.cache.store import CacheStore
from db.cache.strain import strained
from db.queries.figures import refresh_figures
from db.queries.ingest_state import EnrichFailure, IngestStatus, fetch_enrich_failures, fetch_ingest_status
from db.queries.matching import count_unlinked, fetch_unlinked
from db.queries.merges import merge_researchers
from db.queries.writes.corrections import Decided, decide_correction
from db.records import Touched
from ingest.analyse import ANALYSE_BATCH, analyse
from ingest.cache import INGEST_REDIS_TIMEOUT_S, deliver_pending, tell_after_commit
from ingest.clients.arxiv_oai import ArxivOAIClient
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.errors import BudgetExhausted
from ingest.harvest import harvest_arxiv
from ingest.locks import run_name, stage_lock
from ingest.pacing import DutyCycle
from ingest.pipeline import ENRICH_BATCH, enrich
from ingest.progress import MatchingStatus, Summary
from ingest.purge import PurgeAfterReplicas
from llm import ModelClient
from settings import Settings

log = logging.getLogger("ingest")


# A run's connections are the stage's lock (ingest.locks): the server drops one whose host vanished (a node lost,
# a network cut) after 30 s of silence and 3 unanswered probes 10 s apart, and the lock with it, rather than after
# the kernel's two hours. Over a Unix socket there is no host to lose, and PostgreSQL ignores these.
KEEPALIVES: dict[str, str] = {"tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}

# What a stage's lock waiter is told: a line for the operator.
OnWait = Callable[[str], None]


async def connect(settings: Settings, stage: str = "ingest") -> asyncpg.Connection:
    """An ingest connection: every statement, lock wait and idle transaction bounded (WOVEPAPER_INGEST_*), named
    after the run (`ingest.locks.run_name`)."""
    assert settings.database_url
    return await asyncpg.connect(
        settings.database_url,
        # The server's timeout fires first; this one covers a server that stopped answering at all.
        command_timeout=settings.ingest_statement_timeout_ms / 1000 + 30,
        server_settings={
            "application_name": run_name(stage),
            "statement_timeout": str(settings.ingest_statement_timeout_ms),
            "lock_timeout": str(settings.ingest_lock_timeout_ms),
            "idle_in_transaction_session_timeout": str(settings.ingest_idle_timeout_ms),
            **KEEPALIVES,
        },
    )


@asynccontextmanager
async def hold_stage(settings: Settings, stage: str, *, wait: bool, on_wait: OnWait | None) -> AsyncIterator[None]:
    """Hold a stage's lock on a connection of its own for the block (`ingest all`'s, around its stages)."""
    conn = await connect(settings, stage)
    try:
        async with stage_lock(conn, stage, wait=wait, on_wait=on_wait):
            yield
    finally:
        await conn.close()


@asynccontextmanager
async def _resources(
    settings: Settings, stage: str, *, wait: bool = False, on_wait: OnWait | None = None
) -> AsyncIterator[tuple[asyncpg.Connection, CacheStore | None]]:
    """The stage's connection, holding the stage's lock (StageBusy when another run holds it), and the cache."""
    conn = await connect(settings, stage)
    try:
        async with stage_lock(conn, stage, wait=wait, on_wait=on_wait):
            async with _cache(settings) as cache:
                yield conn, cache
    finally:
        await conn.close()


@asynccontextmanager
async def _cache(settings: Settings) -> AsyncIterator[CacheStore | None]:
    cache = None
    if settings.redis is not None:
        timeout_s = max(settings.redis_timeout_s, INGEST_REDIS_TIMEOUT_S)
        redis = create_redis(settings.redis, timeout_s=timeout_s)
        cache = CacheStore(redis, namespace=settings.cache_namespace, ttl_s=settings.cache_ttl_s, timeout_s=timeout_s)
    token = settings.purge_token.get_secret_value() if settings.purge_token is not None else None
    purge: HttpPurge | PurgeAfterReplicas | None = None
    if settings.purge_url and cache is not None:
        purge = HttpPurge(settings.purge_url, token=token)
        if settings.replica_dsns:
            # The CDN asks again once purged: not before the replicas it may be answered from have the write.
            purge = PurgeAfterReplicas(purge, settings.replica_dsns, max_lag_s=settings.replica_max_lag_s)
        attach_purge(cache, purge)
    try:
        yield cache
    finally:
        if cache is not None:
            await deliver_pending(cache)
            await cache.aclose()
        if purge is not None:
            await purge.aclose()


def _pacing(settings: Settings, cache: CacheStore | None) -> DutyCycle:
    """The ingest's share of the time, and its yielding to a strained site (when it shares the site's Redis)."""
    strain = partial(strained, cache, cache.namespace) if cache is not None else None
    return DutyCycle(settings.ingest_share, strained=strain, yield_s=settings.ingest_yield_s)


async def run_arxiv(
    settings: Settings,
    *,
    from_: date | None,
    until: date | None,
    set_spec: str | None,
    wait: bool = False,
    on_wait: OnWait | None = None,
) -> Summary:
    client = ArxivOAIClient(settings.arxiv_oai_url, delay_s=settings.arxiv_delay_s)
    try:
        async with _resources(settings, "arxiv", wait=wait, on_wait=on_wait) as (conn, cache):
            # A second connection writes one page while the first writes the previous one; not when the ingest
            # shares the host (WOVEPAPER_INGEST_SHARE below 1): two pages at once take two of PostgreSQL's cores.
            writer = await connect(settings, "arxiv") if settings.ingest_share == 1 else None
            pacing = _pacing(settings, cache)
            try:
                summary = await harvest_arxiv(
                    conn,
                    client,
                    from_=from_,
                    until=until,
                    set_spec=set_spec,
                    cache=cache,
                    writer=writer,
                    pacing=pacing,
                )
            finally:
                if writer is not None:
                    await writer.close()
            summary.yielded_s = pacing.yielded_s
            return summary
    finally:
        await client.aclose()


async def run_enrich(
    settings: Settings,
    *,
    limit: int | None,
    batch_size: int | None = None,
    wait: bool = False,
    on_wait: OnWait | None = None,
) -> Summary:
    s2c = SemanticScholarClient(settings.s2_api_url, api_key=settings.s2_api_key, rps=settings.s2_rps)
    oac = OpenAlexClient(
        settings.openalex_api_url,
        api_key=settings.openalex_api_key,
        mailto=settings.openalex_mailto,
        rps=settings.openalex_rps,
    )
    try:
        async with _resources(settings, "enrich", wait=wait, on_wait=on_wait) as (conn, cache):
            pacing = _pacing(settings, cache)
            summary = await enrich(
                conn, s2c, oac, limit=limit, batch_size=batch_size or ENRICH_BATCH, cache=cache, pacing=pacing
            )
            summary.yielded_s = pacing.yielded_s
            return summary
    finally:
        await s2c.aclose()
        await oac.aclose()


async def run_analyse(
    settings: Settings, *, limit: int | None, since: date | None, wait: bool = False, on_wait: OnWait | None = None
) -> Summary:
    """`ingest analyse`; the caller has checked that the model is configured (`settings.llm`)."""
    config = settings.llm
    assert config is not None
    # As many connections as a batch has papers: its requests go out side by side (within the rps pacing).
    client = ModelClient.from_config(config, max_connections=ANALYSE_BATCH)
    try:
        async with _resources(settings, "analyse", wait=wait, on_wait=on_wait) as (conn, cache):
            return await analyse(
                conn, client, limit=limit, since=since, daily_tokens=settings.llm_daily_tokens, cache=cache
            )
    finally:
        await client.aclose()


async def run_merge(settings: Settings, *, absorbed_id: int, survivor_id: int) -> bool:
    """A correction by hand: merge one researcher into another (one transaction), then forget what it changed."""
    conn = await connect(settings, "merge")
    try:
        async with _cache(settings) as cache:
            touched = Touched()
            async with conn.transaction():
                merged = await merge_researchers(conn, absorbed_id, survivor_id, touched)
                await refresh_figures(conn, touched)
            await tell_after_commit(cache, conn, touched)
    finally:
        await conn.close()
    return merged


async def run_decision(
    settings: Settings, correction_id: int, *, approve: bool, operator: str, reason: str | None = None
) -> Decided:
    """An operator's decision on a reader's correction (one transaction); then the caches forget, and the CDN purges,
    what applying it changed. NotPending / CannotApply when it cannot be decided so (nothing written)."""
    conn = await connect(settings, "corrections")
    try:
        async with _cache(settings) as cache:
            decided = await decide_correction(conn, correction_id, approve=approve, operator=operator, reason=reason)
            await tell_after_commit(cache, conn, decided.touched)
    finally:
        await conn.close()
    return decided


async def read_status(
    settings: Settings, *, failures: int = 10, unlinked: int = 20
) -> tuple[IngestStatus, list[EnrichFailure], MatchingStatus]:
    """Every source's progress, the enrichment backlog, the latest papers set aside, and the author positions the
    matching left unlinked (counts by reason, and up to `unlinked` of them, ambiguous ties first)."""
    conn = await connect(settings, "status")
    try:
        matching = MatchingStatus(await count_unlinked(conn), await fetch_unlinked(conn, limit=unlinked))
        return await fetch_ingest_status(conn), await fetch_enrich_failures(conn, limit=failures), matching
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
