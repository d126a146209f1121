"""WAL positions in a real Redis, for reads on replicas: writers' positions shared across processes, each dropped
tag's invalidation position, and the aggregate cache filled only from a server that has replayed it."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import pytest

from db.cache import keys
from db.cache.client import create_redis
from db.cache.invalidation import invalidate
from db.cache.positions import UNKNOWN, raise_positions, read_positions, replayed_invalidations
from db.cache.store import CacheStore, EntityRef
from db.pool import connection_budget, current_connection_budget
from db.records import Touched
from db.replicas.writers import WritePositions
from ingest.purge import PurgeAfterReplicas

_ns = itertools.count()


@pytest.fixture
async def store(redis_url: str, cache_namespace: str) -> AsyncIterator[CacheStore]:
    s = CacheStore(create_redis(redis_url, timeout_s=0.25), namespace=f"{cache_namespace}-p{next(_ns)}", ttl_s=600)
    yield s
    await s.aclose()


@pytest.fixture
async def dead_store(tmp_path) -> AsyncIterator[CacheStore]:
    """A Redis that is not there: every call fails at once."""
    s = CacheStore(create_redis(f"unix://{tmp_path}/none.sock", timeout_s=0.05), namespace="dead", ttl_s=600)
    yield s
    await s.aclose()


async def test_a_position_is_only_ever_raised_and_expires(store: CacheStore) -> None:
    assert store.redis is not None
    name = keys.write_position(store.namespace, "viewer:a")
    assert await raise_positions(store, [name], 5000, 30)
    assert await raise_positions(store, [name], 4000, 30)  # a write that committed earlier, recorded later
    assert await read_positions(store, [name, keys.write_position(store.namespace, "viewer:b")]) == [5000, 0]
    assert 0 < await store.redis.ttl(name) <= 30
    await store.redis.script_flush()  # Redis restarted: the script is loaded again
    assert await raise_positions(store, [name], 6000, 30)
    assert await read_positions(store, [name]) == [6000]


async def test_a_writers_position_reaches_every_process_through_redis(store: CacheStore, dead_store) -> None:
    here, there = WritePositions(store, 30), WritePositions(store, 30)
    await here.record("viewer:reader-1", 7000)
    assert await there.position("viewer:reader-1") == 7000
    assert await there.position("viewer:reader-2") == 0
    # Redis down: what this process recorded itself still holds its reads back; another process cannot know it.
    alone, elsewhere = WritePositions(dead_store, 30), WritePositions(dead_store, 30)
    await alone.record("viewer:reader-1", 8000)
    assert await alone.position("viewer:reader-1") == 8000
    assert await elsewhere.position("viewer:reader-1") == 0


async def test_an_invalidation_keeps_the_writes_position_with_every_tag_it_drops(store: CacheStore) -> None:
    ns = store.namespace
    await invalidate(
        store, Touched(researchers={7}, paper_keys={"2401.00001"}, new_papers={"2402.00002"}), position=900
    )
    tags = [
        keys.entity_tag(ns, "researcher", 7),
        keys.entity_tag(ns, "paper", "2401.00001"),
        *keys.lists_tags(ns),  # every response bucket's
        keys.missing_tag(ns, "paper", "2402.00002"),
        keys.missing_tag(ns, "researcher", "any"),
    ]
    assert await read_positions(store, [keys.invalidated_position(t) for t in tags]) == [900] * len(tags)
    assert await replayed_invalidations(store, tags, 900)
    assert not await replayed_invalidations(store, tags, 899)
    await invalidate(store, Touched(researchers={7}), position=800)  # never lowered
    assert await read_positions(store, [keys.invalidated_position(tags[0])]) == [900]
    await invalidate(store, Touched(researchers={8}))  # a write whose position is unknown: no replica has it
    assert await read_positions(store, [keys.invalidated_position(keys.entity_tag(ns, "researcher", 8))]) == [UNKNOWN]


async def test_without_redis_no_replica_answer_counts_as_fresh(dead_store: CacheStore) -> None:
    assert not await replayed_invalidations(dead_store, ["x:tag:lists"], 10**12)


async def _compute_as(
    store: CacheStore, replayed: int | None, computed: list[int | None], researcher: int = 7
) -> dict[str, int]:
    """One request for researcher `researcher`'s figures, reading from a server that had replayed `replayed` (None:
    the primary)."""

    async def compute() -> dict[str, int]:
        computed.append(replayed)
        return {"h": 1}

    with connection_budget(3):
        budget = current_connection_budget()
        assert budget is not None
        budget.replayed = replayed
        return await store.get_or_compute(
            f"agg:{researcher}", compute, load=lambda v: v, owner=EntityRef("researcher", researcher), ttl_s=60
        )


async def test_the_aggregate_cache_is_filled_only_from_a_server_that_replayed_its_invalidation(
    store: CacheStore,
) -> None:
    computed: list[int | None] = []
    await invalidate(store, Touched(researchers={7}), position=1000)
    await _compute_as(store, 999, computed)  # a replica behind the write: served, not kept
    await _compute_as(store, 999, computed)
    assert computed == [999, 999]
    assert store.metrics.lagging_stores_skipped == 2
    await _compute_as(store, 1000, computed)  # a replica that has it: kept
    await _compute_as(store, 999, computed)  # ... and read by anyone
    assert computed == [999, 999, 1000]
    await invalidate(store, Touched(researchers={7}), position=2000)
    await _compute_as(store, None, computed)  # the primary has every write
    await _compute_as(store, 1500, computed)
    assert computed == [999, 999, 1000, None]


async def test_a_request_on_the_primary_never_joins_a_computation_on_a_replica(store: CacheStore) -> None:
    release, started = asyncio.Event(), asyncio.Event()
    computed: list[int | None] = []

    async def slow_compute() -> dict[str, int]:
        computed.append(500)
        started.set()
        await release.wait()
        return {"h": 0}

    async def on_replica() -> dict[str, int]:
        with connection_budget(3):
            budget = current_connection_budget()
            assert budget is not None
            budget.replayed = 500
            return await store.get_or_compute(
                "agg:9", slow_compute, load=lambda v: v, owner=EntityRef("researcher", 9), ttl_s=60
            )

    first = asyncio.create_task(on_replica())
    await started.wait()
    # A request on a replica that replayed no further may share the computation in flight; a writer routed to the
    # primary (their own write may be past 500) computes on its own.
    shared = asyncio.create_task(_compute_as(store, 400, computed, 9))
    on_primary = asyncio.create_task(_compute_as(store, None, computed, 9))
    # Had it joined, it would wait for the release below; it computes on its own instead.
    await asyncio.wait({on_primary}, timeout=10)
    release.set()
    results = (await first, await shared, await on_primary)
    assert computed == [500, None], (computed, results)
    assert results == ({"h": 0}, {"h": 0}, {"h": 1})


async def test_with_replicas_a_purge_waits_for_them_then_goes_in_order() -> None:
    """A replica that cannot say whether it has the write (here: nothing listens) is waited for until the maximum lag
    (and a margin) has passed, when any replica still read from has it; the purges then go, in order."""
    sent: list[tuple[list[str], int | None]] = []

    async def purge(tags: list[str], position: int | None = None) -> None:
        sent.append((tags, position))

    after = PurgeAfterReplicas(purge, ["postgresql://reader@127.0.0.1:1/wovepaper"], max_lag_s=0.0)
    await after(["paper:1"], 123)
    await after(["lists"], None)
    assert sent == []  # queued: the ingest goes on meanwhile
    await after.aclose()  # sends what is still waiting
    assert sent == [(["paper:1"], 123), (["lists"], None)]
