"""Redis stopped (SIGTERM) or frozen (SIGSTOP): answers still come from PostgreSQL, correct and quick."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime

import asyncpg
import pytest

import localservers
from db.cache import keys
from db.cache.breaker import BreakerState, CircuitBreaker
from db.cache.client import create_redis
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.pool import create_pool
from db.queries.aggregates import ResearcherStatsRow
from db.records import Touched
from resolvers.aggregates import load_researcher_stats
from tests.integration.agg_data import EXPECTED_ADA, handmade_database

THRESHOLD = 3
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
RESET_AFTER_S = 0.5


@pytest.fixture(scope="module")
async def fault_db(make_database) -> tuple[str, dict[str, int]]:
    return await handmade_database(make_database, "cachefault")


@pytest.fixture(scope="module")
async def pool(fault_db) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(fault_db[0], min_size=1, max_size=8)
    yield p
    await p.close()


@pytest.fixture
def server(tmp_path) -> Iterator[localservers.LocalRedis]:
    srv = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    yield srv
    # Always wake a frozen server, whatever the test did.
    if srv.process.poll() is None:
        os.kill(srv.pid, signal.SIGCONT)
    srv.stop()


@pytest.fixture
async def store(server, cache_namespace) -> AsyncIterator[CacheStore]:
    s = CacheStore(
        create_redis(server.url, timeout_s=0.25),
        namespace=f"{cache_namespace}-f",
        ttl_s=600,
        timeout_s=0.25,
        breaker=CircuitBreaker(failure_rate=0.5, min_calls=THRESHOLD, window_s=30, reset_after_s=RESET_AFTER_S),
    )
    yield s
    await s.aclose()


def researcher_ids(fault_db) -> list[int]:
    ids = fault_db[1]
    return [ids[k] for k in ("A", "B", "C", "D", "E")]


def _figures(row: ResearcherStatsRow | None) -> ResearcherStatsRow | None:
    # computed_at says when PostgreSQL computed it; everything else must be the same.
    return None if row is None else dataclasses.replace(row, computed_at=EPOCH)


async def read_all(pool, store, rids: list[int]) -> list[ResearcherStatsRow | None]:
    return [_figures(await load_researcher_stats(pool, store, rid)) for rid in rids]


async def read_until_open(pool, store, rids: list[int]) -> None:
    """Read while Redis fails until the failure rate opens the breaker (bounded)."""
    for _ in range(6):
        await read_all(pool, store, rids)
        if store.breaker.state is BreakerState.OPEN:
            return
    raise AssertionError("the breaker did not open")


async def test_redis_stopped_answers_from_postgres_and_breaker_opens(pool, fault_db, store, server) -> None:
    rids = researcher_ids(fault_db)
    warm = await read_all(pool, store, rids)  # cached while Redis is up
    await store.settle()  # a store the request stopped waiting for (a loaded machine) still counts in the window
    ok_calls, _ = store.breaker.window()
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(5)
    started = time.monotonic()
    for _ in range(4):
        assert await read_all(pool, store, rids) == warm
    elapsed = time.monotonic() - started
    # It opened once half the calls in its window had failed; the other reads never went to Redis.
    assert store.metrics.errors == ok_calls
    assert store.metrics.short_circuits == 20 - ok_calls
    assert store.metrics.fallbacks == 20
    assert store.breaker.state is BreakerState.OPEN
    assert elapsed < 2.0
    a = warm[0]
    assert a is not None and a.citation_count == EXPECTED_ADA["citation_count"]


async def test_redis_frozen_answers_quickly_without_waiting_on_it(pool, fault_db, store, server) -> None:
    rids = researcher_ids(fault_db)
    warm = await read_all(pool, store, rids)
    await store.settle()  # every warm-up call counted before the window is read
    ok_calls, _ = store.breaker.window()
    os.kill(server.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        # Concurrent requests for different researchers while Redis accepts connections but never answers.
        results = [
            _figures(r) for r in await asyncio.gather(*(load_researcher_stats(pool, store, rid) for rid in rids * 4))
        ]
        elapsed = time.monotonic() - started
        assert results == warm * 4
        # Single flight per key, and every key in one MGET, bounded by the socket timeout.
        assert store.metrics.errors == 1
        assert store.metrics.singleflight_joins == 3 * len(rids)
        for _ in range(3):  # as many failures as successes in the window open the breaker
            await read_all(pool, store, rids)
        assert store.breaker.state is BreakerState.OPEN
        assert store.metrics.errors == ok_calls
        started = time.monotonic()
        errors_before = store.metrics.errors
        assert await read_all(pool, store, rids) == warm
        assert store.metrics.errors == errors_before  # open breaker: Redis was not asked
        assert time.monotonic() - started < 0.5
        assert elapsed < 2.0
    finally:
        os.kill(server.pid, signal.SIGCONT)


async def test_breaker_recloses_when_redis_returns(pool, fault_db, store, server) -> None:
    rids = researcher_ids(fault_db)
    await read_all(pool, store, rids)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        await read_until_open(pool, store, rids)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    await asyncio.sleep(RESET_AFTER_S + 0.05)
    assert store.breaker.state is BreakerState.HALF_OPEN
    hits = store.metrics.hits
    assert await read_all(pool, store, rids)
    assert store.breaker.state is BreakerState.CLOSED
    assert store.metrics.hits == hits + len(rids)  # the entries stored before the freeze are served again


async def test_breaker_recloses_after_restart_and_caches_again(pool, fault_db, store, server, tmp_path) -> None:
    rids = researcher_ids(fault_db)
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    server.process.send_signal(signal.SIGTERM)
    server.process.wait(5)
    await read_until_open(pool, store, rids)
    again = localservers.start_redis(tmp_path / "redis2", port=port)
    try:
        await asyncio.sleep(RESET_AFTER_S + 0.05)
        await read_all(pool, store, rids)  # the probe succeeds: misses, stored
        assert store.breaker.state is BreakerState.CLOSED
        hits = store.metrics.hits
        await read_all(pool, store, rids)
        assert store.metrics.hits == hits + len(rids)
    finally:
        again.stop()


async def test_failed_probe_keeps_breaker_open(pool, fault_db, store, server) -> None:
    rids = researcher_ids(fault_db)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        await read_until_open(pool, store, rids)
        await asyncio.sleep(RESET_AFTER_S + 0.05)
        errors = store.metrics.errors
        await read_all(pool, store, rids)  # one probe goes out and times out, the rest short-circuit
        assert store.metrics.errors == errors + 1
        assert store.breaker.state is BreakerState.OPEN
    finally:
        os.kill(server.pid, signal.SIGCONT)


async def test_invalidation_during_outage_is_delivered_later(pool, fault_db, store, server) -> None:
    a = fault_db[1]["A"]
    await load_researcher_stats(pool, store, a)
    assert store.redis is not None
    key = keys.researcher_stats(store.namespace, a)
    assert await store.redis.exists(key) == 1
    os.kill(server.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        await invalidate(store, Touched(researchers={a}))  # never raises, never hangs
        assert time.monotonic() - started < 1.0
        assert store.pending_invalidation.researchers == {a}
    finally:
        os.kill(server.pid, signal.SIGCONT)
    await asyncio.sleep(RESET_AFTER_S + 0.05)
    await invalidate(store, Touched())  # the next invalidation (of anything) delivers the deferred ids
    assert not store.pending_invalidation
    assert await store.redis.exists(key) == 0


async def test_a_request_pays_one_redis_timeout_however_many_calls_it_makes(fault_db, server) -> None:
    """Frozen Redis, breaker held closed: a page's rate-limit charge, response-cache read, aggregate reads and stores
    would each wait out the timeout (four or more per request); once one has, the rest of the request goes without
    Redis. Counted in the Redis calls that failed."""
    from tests.contract.conftest import operation_text
    from tests.integration.inprocess import served

    page = operation_text("ResearcherPage")
    settings = {
        "rate_limits": "on",
        "near_cache_mb": 0,
        "redis_timeout_s": 0.2,
        # Held closed: every call of every request reaches the frozen server.
        "redis_breaker_min_calls": 50,
        "redis_breaker_window_calls": 50,
    }
    async with served(fault_db[0], server.url, **settings) as (client, state):
        store: CacheStore = state["cache"]
        os.kill(server.pid, signal.SIGSTOP)
        try:
            for rid in researcher_ids(fault_db)[:3]:
                errors = store.metrics.errors
                response = await client.post("/graphql", json={"query": page, "variables": {"id": str(rid)}})
                body = response.json()
                assert response.status_code == 200 and "errors" not in body, body
                assert body["data"]["researcher"]["id"]
                await store.settle()
                assert store.metrics.errors - errors == 1
            assert store.breaker.state is BreakerState.CLOSED
        finally:
            os.kill(server.pid, signal.SIGCONT)


async def test_a_run_ends_by_delivering_the_drops_redis_did_not_take(pool, fault_db, store, server) -> None:
    """The ingest's last invalidations, deferred while Redis was frozen, are sent again at the end of its run until
    Redis takes them (a process that exited with them would leave stale answers until their TTL); a Redis that
    never comes back is given up on within the bound, and said so."""
    from ingest.cache import deliver_pending

    a = fault_db[1]["A"]
    await load_researcher_stats(pool, store, a)
    assert store.redis is not None
    key = keys.researcher_stats(store.namespace, a)
    os.kill(server.pid, signal.SIGSTOP)
    try:
        await invalidate(store, Touched(researchers={a}))
        assert store.pending_invalidation.researchers == {a}
        assert not await deliver_pending(store, within_s=0.3, pause_s=0.1)  # still frozen: given up on
        asyncio.get_running_loop().call_later(0.3, os.kill, server.pid, signal.SIGCONT)
        assert await deliver_pending(store, within_s=10, pause_s=0.1)
    finally:
        os.kill(server.pid, signal.SIGCONT)
    assert not store.pending_invalidation
    assert await store.redis.exists(key) == 0
