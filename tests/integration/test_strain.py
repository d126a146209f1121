"""The site's strain through a real Redis: a late event loop or requests waiting for a connection mark it, the
ingest reads why, and a Redis that cannot answer stops nothing."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator

import pytest

import localservers
from db.cache import keys
from db.cache.client import create_redis
from db.cache.store import CacheStore
from db.cache.strain import HOLD_MS, LATE_S, StrainReporter, strained
from telemetry import loop_lag
from tests.integration.inprocess import served

_namespaces = itertools.count()


@pytest.fixture
async def store(redis_url: str, cache_namespace: str) -> AsyncIterator[CacheStore]:
    s = CacheStore(create_redis(redis_url, timeout_s=1.0), namespace=f"{cache_namespace}s{next(_namespaces)}", ttl_s=60)
    yield s
    await s.aclose()


async def test_a_late_event_loop_marks_the_site_strained_for_a_moment(store: CacheStore) -> None:
    reporter = StrainReporter(store, store.namespace, waiting=lambda: 0)
    watcher = asyncio.create_task(loop_lag.watch(0.01, also=reporter.sample))
    try:
        await asyncio.sleep(0.05)
        assert await strained(store, store.namespace) is None
        time.sleep(LATE_S * 2)  # noqa: ASYNC251 (a long synchronous step on purpose: every ready timer runs late)
        await asyncio.sleep(0.05)
        await reporter.settle()
    finally:
        watcher.cancel()
    why = await strained(store, store.namespace)
    assert why is not None and "ms late, 0 waiting for a connection" in why
    assert 0 < await store.redis.pttl(keys.strain(store.namespace)) <= HOLD_MS  # type: ignore[union-attr]


async def test_requests_waiting_for_a_connection_mark_it_too_renewed_at_most_four_times_a_second(
    store: CacheStore,
) -> None:
    waiting = 0
    reporter = StrainReporter(store, store.namespace, waiting=lambda: waiting)
    reporter.sample(0.0)
    await reporter.settle()
    assert reporter.marks == 0 and await strained(store, store.namespace) is None
    waiting = 3
    for _ in range(50):  # 50 samples in a moment: one write to Redis
        reporter.sample(0.001)
    await reporter.settle()
    assert reporter.marks == 1
    why = await strained(store, store.namespace)
    assert why is not None and why.endswith("loop 1 ms late, 3 waiting for a connection")


async def test_a_redis_that_cannot_answer_strains_nothing_and_raises_nothing(cache_namespace: str) -> None:
    gone = CacheStore(
        create_redis(f"redis://127.0.0.1:{localservers.free_port()}/0", timeout_s=0.2),
        namespace=cache_namespace,
        ttl_s=60,
        timeout_s=0.2,
    )
    try:
        reporter = StrainReporter(gone, gone.namespace, waiting=lambda: 5)
        reporter.sample(1.0)
        await reporter.settle()
        assert reporter.marks == 0
        assert await strained(gone, gone.namespace) is None
    finally:
        await gone.aclose()


async def test_a_served_api_whose_loop_stalls_marks_the_site_for_the_ingest(
    database_url: str, redis_url: str, cache_namespace: str
) -> None:
    namespace = f"{cache_namespace}-served"
    async with served(database_url, redis_url, cache_namespace=namespace) as (client, state):
        cache: CacheStore = state["cache"]
        assert (await client.get("/healthz")).status_code == 200
        assert await strained(cache, namespace) is None
        time.sleep(LATE_S * 2)  # noqa: ASYNC251 (a request's long synchronous step, on purpose)
        for _ in range(100):
            await asyncio.sleep(0.02)
            if (why := await strained(cache, namespace)) is not None:
                break
    assert why is not None and "ms late" in why
