from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

import db.cache.store as store_module
import localservers
from db.cache import keys
from db.cache.client import create_redis
from db.cache.invalidation import CHUNK, invalidate
from db.cache.store import CacheStore, EntityRef, Unavailable
from db.pool import create_pool
from db.queries.aggregates import SELECT_RESEARCHER_NETWORK, SELECT_RESEARCHER_STATS, fetch_researcher_stats
from db.queries.figures import refresh_figures
from db.queries.writes.citations import update_citations
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import upsert_researchers
from db.records import AuthorRecord, AuthorshipMatch, CitationRecord, PaperRecord, ResearcherRecord, Touched
from resolvers.aggregates import (
    load_institution_stats,
    load_researcher_coauthors,
    load_researcher_network,
    load_researcher_stats,
)
from tests.integration.agg_data import EXPECTED_ADA, handmade_database

_ns_counter = itertools.count()


class StatementLog:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def __call__(self, record: object) -> None:
        self.queries.append(record.query)  # type: ignore[attr-defined]

    def count(self, sql: str) -> int:
        return sum(1 for q in self.queries if q == sql)


@pytest.fixture(scope="module")
async def cache_db(make_database) -> tuple[str, dict[str, int]]:
    return await handmade_database(make_database, "cache")


@pytest.fixture(scope="module")
async def logged_pool(cache_db) -> AsyncIterator[tuple[asyncpg.Pool, StatementLog]]:
    log = StatementLog()
    pool = await create_pool(cache_db[0], min_size=1, max_size=8, query_logger=log)
    yield pool, log
    await pool.close()


@pytest.fixture
async def store(redis_url, cache_namespace) -> AsyncIterator[CacheStore]:
    # A namespace of its own per test: tests never see each other's keys.
    s = CacheStore(
        create_redis(redis_url, timeout_s=0.25), namespace=f"{cache_namespace}-c{next(_ns_counter)}", ttl_s=600
    )
    yield s
    await s.aclose()


async def test_miss_then_hit_with_ttl_and_tag(logged_pool, cache_db, store) -> None:
    pool, log = logged_pool
    a = cache_db[1]["A"]
    before = log.count(SELECT_RESEARCHER_STATS)
    first = await load_researcher_stats(pool, store, a)
    second = await load_researcher_stats(pool, store, a)
    assert log.count(SELECT_RESEARCHER_STATS) - before == 1
    assert first == second  # the cached copy decodes to the same row, dates included
    assert first is not None and first.citation_count == EXPECTED_ADA["citation_count"]
    assert (store.metrics.hits, store.metrics.misses) == (1, 1)
    assert store.redis is not None
    key = keys.researcher_stats(store.namespace, a)
    ttl = await store.redis.ttl(key)
    assert 0 < ttl <= 600
    tag = keys.entity_tag(store.namespace, "researcher", a)
    assert await store.redis.smembers(tag) == {key.encode()}
    assert await store.redis.ttl(tag) > 0


async def test_fifty_concurrent_misses_compute_once(logged_pool, cache_db, store) -> None:
    pool, log = logged_pool
    a = cache_db[1]["A"]
    before = log.count(SELECT_RESEARCHER_STATS)
    results = await asyncio.gather(*(load_researcher_stats(pool, store, a) for _ in range(50)))
    assert log.count(SELECT_RESEARCHER_STATS) - before == 1
    assert all(r == results[0] for r in results)
    assert store.metrics.misses == 1 and store.metrics.singleflight_joins == 49


async def test_an_id_naming_no_one_leaves_no_entry(logged_pool, cache_db, store) -> None:
    """A page's statistics start before its row says whether the id names anyone: a flood of made-up ids must not
    fill Redis. Each is answered "none" and nothing is kept; a real researcher's figures still are."""
    pool, log = logged_pool
    before = log.count(SELECT_RESEARCHER_STATS)
    assert await load_researcher_stats(pool, store, 987654321) is None
    assert await load_researcher_stats(pool, store, 987654321) is None
    assert await load_institution_stats(pool, store, 987654321) is None
    assert log.count(SELECT_RESEARCHER_STATS) - before == 2
    assert store.redis is not None
    assert [k async for k in store.redis.scan_iter(match=f"{store.namespace}:*")] == []
    assert await load_researcher_stats(pool, store, cache_db[1]["A"]) is not None
    assert await store.redis.exists(keys.researcher_stats(store.namespace, cache_db[1]["A"])) == 1


async def test_invalidation_after_commit_shows_new_figures(logged_pool, cache_db, store) -> None:
    pool, _ = logged_pool
    ids = cache_db[1]
    stats = await load_researcher_stats(pool, store, ids["A"])
    assert stats is not None and stats.most_cited_paper_id == ids["P5"]
    async with pool.acquire() as conn:
        await conn.execute("UPDATE papers SET cited_by_count = 70 WHERE id = $1", ids["P4"])
    try:
        # Before invalidation the cache still answers the old figure; after it, the new one at once.
        stale = await load_researcher_stats(pool, store, ids["A"])
        assert stale is not None and stale.most_cited_paper_id == ids["P5"]
        await invalidate(store, Touched(papers={ids["P4"]}, researchers={ids["A"]}))
        fresh = await load_researcher_stats(pool, store, ids["A"])
        assert fresh is not None and fresh.most_cited_paper_id == ids["P4"]
        assert fresh.citation_total == stats.citation_total + 67
    finally:
        async with pool.acquire() as conn:
            await conn.execute("UPDATE papers SET cited_by_count = 3 WHERE id = $1", ids["P4"])
        await invalidate(store, Touched(researchers={ids["A"]}))


async def test_value_computed_across_an_invalidation_is_not_stored(logged_pool, cache_db, store) -> None:
    pool, _ = logged_pool
    a = cache_db[1]["A"]
    key = keys.researcher_stats(store.namespace, a)

    async def compute_racing_a_write():
        async with pool.acquire() as conn:
            row = await fetch_researcher_stats(conn, researcher_id=a)
        # A write commits and invalidates while this (now stale) result is on its way to Redis.
        await invalidate(store, Touched(researchers={a}))
        return row

    from db.queries.aggregates import ResearcherStatsRow

    await store.get_or_compute(
        key, compute_racing_a_write, load=ResearcherStatsRow.from_json, owner=EntityRef("researcher", a)
    )
    assert store.redis is not None
    assert await store.redis.exists(key) == 0
    assert store.metrics.stale_stores_skipped == 1


async def test_network_dropped_when_any_node_is_invalidated(logged_pool, cache_db, store) -> None:
    pool, log = logged_pool
    ids = cache_db[1]
    before = log.count(SELECT_RESEARCHER_NETWORK)
    net = await load_researcher_network(pool, store, ids["A"], depth=1, min_shared=1, limit=100)
    assert net is not None and {n.researcher_id for n in net.nodes} == {ids["A"], ids["B"], ids["C"]}
    await load_researcher_network(pool, store, ids["A"], depth=1, min_shared=1, limit=100)
    assert log.count(SELECT_RESEARCHER_NETWORK) - before == 1
    # B and C writing a paper together changes an edge of A's network without touching A.
    await invalidate(store, Touched(researchers={ids["B"]}))
    await load_researcher_network(pool, store, ids["A"], depth=1, min_shared=1, limit=100)
    assert log.count(SELECT_RESEARCHER_NETWORK) - before == 2
    # An unrelated researcher leaves it alone.
    await invalidate(store, Touched(researchers={ids["E"]}))
    await load_researcher_network(pool, store, ids["A"], depth=1, min_shared=1, limit=100)
    assert log.count(SELECT_RESEARCHER_NETWORK) - before == 2


async def test_a_value_whose_tag_set_redis_evicted_is_computed_again(
    logged_pool, cache_db, evicting_redis_url, cache_namespace
) -> None:
    """Under `maxmemory` Redis evicts a tag set sooner than the values it lists (an LRU policy: values are read on
    every hit, sets only written by stores). A value its set no longer lists would outlive the invalidation of the
    set's entity: it is computed again, not answered, and stored where the next invalidation finds it."""
    store = CacheStore(create_redis(evicting_redis_url, timeout_s=0.25), namespace=f"{cache_namespace}-ev", ttl_s=600)
    try:
        await _evicted_set_is_seen(logged_pool, cache_db, store)
    finally:
        await store.aclose()


async def _evicted_set_is_seen(logged_pool, cache_db, store: CacheStore) -> None:
    pool, log = logged_pool
    ids = cache_db[1]
    before = log.count(SELECT_RESEARCHER_NETWORK)

    async def computed() -> int:
        net = await load_researcher_network(pool, store, ids["A"], depth=1, min_shared=1, limit=100)
        assert net is not None and ids["B"] in {n.researcher_id for n in net.nodes}
        return log.count(SELECT_RESEARCHER_NETWORK) - before

    assert await computed() == 1 and await computed() == 1
    assert store.redis is not None
    assert await store.redis.delete(keys.entity_tag(store.namespace, "researcher", ids["B"])) == 1  # evicted
    assert await computed() == 2 and store.metrics.unlisted_skipped == 1
    assert await computed() == 2  # listed again: a hit
    await invalidate(store, Touched(researchers={ids["B"]}))
    assert await computed() == 3


async def test_a_redis_that_never_evicted_answers_a_value_in_one_round_trip(
    logged_pool, cache_db, tmp_path, cache_namespace
) -> None:
    """The check of a value's tag sets costs a round trip: made only while Redis evicts (its count of evicted keys,
    read once a second at most, moved within a tag set's lifetime); a Redis of its own never evicted."""
    pool, _ = logged_pool
    a = cache_db[1]["A"]
    server = localservers.start_redis(tmp_path / "redis")
    store = CacheStore(create_redis(server.url, timeout_s=0.25), namespace=f"{cache_namespace}-ne", ttl_s=600)
    try:
        await load_researcher_stats(pool, store, a)
        await store.settle()  # the count of evictions read (0)
        calls = store.metrics.calls
        await load_researcher_stats(pool, store, a)
        assert store.metrics.hits == 1 and store.metrics.calls - calls == 1
    finally:
        await store.aclose()
        server.stop()


async def test_coauthors_first_is_a_slice_of_one_entry(logged_pool, cache_db, store) -> None:
    pool, _ = logged_pool
    ids = cache_db[1]
    one = await load_researcher_coauthors(pool, store, ids["A"], first=1)
    both = await load_researcher_coauthors(pool, store, ids["A"], first=20)
    assert [c.researcher_id for c in one] == [ids["C"]]
    assert [c.researcher_id for c in both] == [ids["C"], ids["B"]]
    assert store.metrics.misses == 1 and store.metrics.hits == 1


async def test_ingest_write_path_then_invalidate_no_stale_read(logged_pool, cache_db, store) -> None:
    """Write through the ingest's functions in one transaction, invalidate after commit, read at once."""
    pool, _ = logged_pool
    when = datetime(2024, 3, 1, tzinfo=UTC)

    def paper(arxiv_id: str) -> PaperRecord:
        return PaperRecord(
            arxiv_id=arxiv_id,
            version=1,
            title=f"Paper {arxiv_id}",
            abstract="",
            categories=["cs.LG"],
            published=when,
            updated=when,
            authors=[AuthorRecord(1, "Wumo Yan"), AuthorRecord(2, "Zhuojin Li")],
        )

    async def write(papers: list[PaperRecord], citations: list[CitationRecord]) -> tuple[Touched, dict[str, int]]:
        touched = Touched()
        # On a connection of its own, as the ingest writes (ingest/runner.connect), not a serving one.
        conn = await asyncpg.connect(cache_db[0])
        try:
            async with conn.transaction():
                rids = await upsert_researchers(
                    conn,
                    [ResearcherRecord("Wumo Yan", s2_author_id="wc-1"), ResearcherRecord("Li", s2_author_id="wc-2")],
                    touched=touched,
                )
                await upsert_papers(conn, papers, touched=touched)
                matches = [
                    AuthorshipMatch(p.arxiv_id, pos, key) for p in papers for pos, key in ((1, "wc-1"), (2, "wc-2"))
                ]
                await apply_authorship_matches(conn, matches, rids, {}, touched=touched)
                await update_citations(conn, citations, touched=touched)
                await refresh_figures(conn, touched)
        finally:
            await conn.close()
        await invalidate(store, touched)  # after the commit, as the ingest does
        return touched, rids

    _, rids = await write([paper("wc.0001")], [CitationRecord("wc.0001", 4, "s2")])
    yan = rids["wc-1"]
    first = await load_researcher_stats(pool, store, yan)
    assert first is not None and (first.paper_count, first.citation_count, first.h_index) == (1, 4, 1)
    assert (first.first, first.matched_papers) == (1, 1)
    await load_researcher_stats(pool, store, yan)  # now cached
    assert store.metrics.hits == 1

    touched, _ = await write([paper("wc.0002")], [CitationRecord("wc.0002", 9, "s2")])
    assert yan in touched.researcher_figures
    second = await load_researcher_stats(pool, store, yan)
    assert second is not None and (second.paper_count, second.citation_count, second.h_index) == (2, 13, 2)
    coauthors = await load_researcher_coauthors(pool, store, yan, first=5)
    assert [(c.researcher_id, c.shared_papers) for c in coauthors] == [(rids["wc-2"], 2)]
    # The stored figures lists sort on agree with the page.
    async with pool.acquire() as conn:
        stored = await conn.fetchrow("SELECT paper_count, h_index, citation_count FROM researchers WHERE id = $1", yan)
    assert tuple(stored) == (2, 2, 13)


async def test_a_revision_of_a_paper_s_text_keeps_its_people_s_statistics(logged_pool, cache_db, store) -> None:
    """A re-harvested paper whose title or versions alone changed is a change of the paper: its own answers go (every
    page that shows it is tagged with it), its people's figures, statistics and modification time stay. One that moved
    to another category changes what its people count: their statistics go and come back with it."""
    pool, log = logged_pool
    when = datetime(2024, 3, 1, tzinfo=UTC)

    def paper(version: int, title: str, categories: list[str]) -> PaperRecord:
        return PaperRecord(
            arxiv_id="rv.0001",
            version=version,
            title=title,
            abstract="",
            categories=categories,
            published=when,
            updated=when,
            authors=[AuthorRecord(1, "Rhea Vos")],
        )

    async def write(record: PaperRecord, *, match: bool = False) -> tuple[Touched, Any]:
        touched = Touched()
        conn = await asyncpg.connect(cache_db[0])
        try:
            async with conn.transaction():
                rids = await upsert_researchers(conn, [ResearcherRecord("Rhea Vos", s2_author_id="rv-1")])
                await upsert_papers(conn, [record], touched=touched)
                if match:
                    matches = [AuthorshipMatch("rv.0001", 1, "rv-1")]
                    await apply_authorship_matches(conn, matches, rids, {}, touched=touched)
                await refresh_figures(conn, touched)
            modified = await conn.fetchval("SELECT modified_at FROM researchers WHERE id = $1", rids["rv-1"])
        finally:
            await conn.close()
        await invalidate(store, touched)
        return touched, modified

    _, before = await write(paper(1, "A title", ["cs.LG"]), match=True)
    vos = await pool.fetchval("SELECT id FROM researchers WHERE s2_author_id = 'rv-1'")
    stats = await load_researcher_stats(pool, store, vos)
    assert stats is not None and [f.category for f in stats.fields] == ["cs.LG"]
    computed = log.count(SELECT_RESEARCHER_STATS)

    touched, after = await write(paper(2, "A better title", ["cs.LG"]))
    assert touched.paper_keys == {"rv.0001"} and not touched.all_researchers()
    assert after == before
    assert await load_researcher_stats(pool, store, vos) == stats
    assert log.count(SELECT_RESEARCHER_STATS) == computed  # answered from the cache

    touched, after = await write(paper(3, "A better title", ["math.AP"]))
    assert vos in touched.researcher_figures and after > before
    moved = await load_researcher_stats(pool, store, vos)
    assert moved is not None and [f.category for f in moved.fields] == ["math.AP"]
    assert log.count(SELECT_RESEARCHER_STATS) == computed + 1


async def test_no_redis_configured_still_single_flight(logged_pool, cache_db) -> None:
    pool, log = logged_pool
    store = CacheStore(None, namespace="none", ttl_s=60)
    before = log.count(SELECT_RESEARCHER_STATS)
    results = await asyncio.gather(*(load_researcher_stats(pool, store, cache_db[1]["A"]) for _ in range(10)))
    assert log.count(SELECT_RESEARCHER_STATS) - before == 1
    assert results[0] is not None and all(r == results[0] for r in results)
    await invalidate(store, Touched(researchers={1}))  # a no-op without Redis, never an error


async def test_request_after_an_invalidation_never_joins_an_older_computation(logged_pool, cache_db, store) -> None:
    """A computation in flight that read the database before a write committed is not shared with
    requests that arrive after that write's invalidation: they compute the new figures themselves."""
    from db.queries.aggregates import ResearcherStatsRow

    pool, _ = logged_pool
    ids = cache_db[1]
    a = ids["A"]
    key = keys.researcher_stats(store.namespace, a)
    read_done, release = asyncio.Event(), asyncio.Event()

    async def slow_compute():
        async with pool.acquire() as conn:
            row = await fetch_researcher_stats(conn, researcher_id=a)
        read_done.set()
        await release.wait()
        return row

    leader = asyncio.create_task(
        store.get_or_compute(key, slow_compute, load=ResearcherStatsRow.from_json, owner=EntityRef("researcher", a))
    )
    await read_done.wait()
    async with pool.acquire() as conn:
        await conn.execute("UPDATE papers SET cited_by_count = 70 WHERE id = $1", ids["P4"])
    try:
        await invalidate(store, Touched(papers={ids["P4"]}, researchers={a}))
        follower = await asyncio.wait_for(load_researcher_stats(pool, store, a), 5)
        assert follower is not None and follower.most_cited_paper_id == ids["P4"]
        release.set()
        old = await leader
        assert old is not None and old.most_cited_paper_id == ids["P5"]  # what the leader's own caller asked for
        later = await load_researcher_stats(pool, store, a)
        assert later is not None and later.most_cited_paper_id == ids["P4"]  # the stale result was not stored
        assert store.metrics.stale_stores_skipped == 1
    finally:
        release.set()
        async with pool.acquire() as conn:
            await conn.execute("UPDATE papers SET cited_by_count = 3 WHERE id = $1", ids["P4"])
        await invalidate(store, Touched(researchers={a}))


async def test_tag_sets_outlive_every_entry_they_list(store) -> None:
    """A short-lived entry added to a tag set never shortens the set below a longer-lived entry's TTL."""
    assert store.redis is not None
    tag = keys.entity_tag(store.namespace, "researcher", 424242)
    gen = keys.entity_generation(store.namespace, "researcher", 424242)
    long_key, short_key = f"{store.namespace}:long", f"{store.namespace}:short"
    assert await store.store_guarded(long_key, b"1", guard_key=gen, guard_value=None, tag_keys=[tag], ttl_s=3000)
    assert await store.store_guarded(short_key, b"1", guard_key=gen, guard_value=None, tag_keys=[tag], ttl_s=60)
    assert await store.redis.ttl(tag) > 3000
    await invalidate(store, Touched(researchers={424242}))
    assert await store.redis.exists(long_key, short_key, tag) == 0


async def test_a_harvest_page_s_thousands_of_entities_are_dropped_not_deferred(
    logged_pool, cache_db, redis_url, cache_namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page of the harvest touches thousands of entities: its invalidation gets a round trip's time per chunk of
    them, so it goes through instead of being deferred (and growing with every page after)."""
    pool, _ = logged_pool
    ids = cache_db[1]
    store = CacheStore(
        create_redis(redis_url, timeout_s=0.25), namespace=f"{cache_namespace}-c{next(_ns_counter)}", ttl_s=600
    )
    allowed: list[int] = []
    call = store.call

    async def counted(op: Any, *, round_trips: int = 2) -> Any:
        allowed.append(round_trips)
        return await call(op, round_trips=round_trips)

    monkeypatch.setattr(store, "call", counted)
    try:
        assert await load_researcher_stats(pool, store, ids["A"]) is not None
        key = keys.researcher_stats(store.namespace, ids["A"])
        assert await store.redis.exists(key)
        touched = Touched(researchers={ids["A"], *range(10_000_000, 10_020_000)})
        await invalidate(store, touched)
        assert store.metrics.invalidation_failures == 0
        assert not store.pending_invalidation
        assert not await store.redis.exists(key)
        # The time it may take grows with the entities (a round trip per chunk), not a fixed few for all of them:
        # read from the allowance, not the clock, so a busy machine does not decide it.
        assert sum(allowed) >= len(touched.researchers) // CHUNK
    finally:
        await store.aclose()


async def test_a_response_computed_across_a_write_is_kept_unless_the_write_dropped_one_of_its_tags(
    tmp_path, evicting_redis_url, cache_namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every invalidation moves every response epoch; a response computed across one is still stored when that
    write dropped none of its tags (on one Redis that never evicted), so the slowest pages are kept while an ingest
    writes. A write that dropped one of them, or a Redis that evicts (a tag's drop time may be gone), refuses it."""
    server = localservers.start_redis(tmp_path / "redis")
    stores = [
        CacheStore(create_redis(server.url, timeout_s=0.25), namespace=f"{cache_namespace}-bt", ttl_s=600),
        CacheStore(create_redis(evicting_redis_url, timeout_s=0.25), namespace=f"{cache_namespace}-bte", ttl_s=600),
    ]
    try:
        for store in stores:
            evicting = store is stores[1]
            ns = store.namespace
            page, listing = (keys.response(ns, schema_version="1", operation=op, document_hash="h", variables=b"{}")
                             for op in ("ResearcherPage", "PaperList"))  # fmt: skip
            tags = {page: keys.tag_keys(ns, ["researcher:1"], of_key=page),
                    listing: keys.tag_keys(ns, [keys.LISTS], of_key=listing)}  # fmt: skip
            await invalidate(store, Touched(papers={7}))
            await store.settle()  # Redis's count of evicted keys read

            # A follow of researcher 2: neither answer shows it, nor is either a list it changes.
            epochs = await _epochs(store, tags)
            await invalidate(store, Touched(researcher_figures={2}, lists=False))
            assert await _stored(store, tags, epochs) == [not evicting, not evicting]

            # A write changing researcher 1, and so every list: both answers were computed from what it changed.
            epochs = await _epochs(store, tags)
            await invalidate(store, Touched(researcher_figures={1}))
            assert await _stored(store, tags, epochs) == [False, False]

            # Started after it: kept, on any Redis.
            assert await _stored(store, tags, await _epochs(store, tags)) == [True, True]
            assert store.redis is not None
            assert await store.redis.exists(*tags) == 2

            # An epoch older than the drop times are kept: the store is refused once it moved.
            with monkeypatch.context() as patched:
                patched.setattr(store_module, "DROPPED_TTL_S", 0)
                epochs = await _epochs(store, tags)
                await invalidate(store, Touched(researcher_figures={2}, lists=False))
                assert await _stored(store, tags, epochs) == [False, False]
    finally:
        for store in stores:
            await store.aclose()
        server.stop()


async def _epochs(store: CacheStore, tags: dict[str, list[str]]) -> dict[str, bytes | None]:
    """Each response's epoch as a request reads it before computing the response."""
    epochs = {}
    for key in tags:
        got = await store.fetch_guarded(key, keys.response_epoch(store.namespace, key))
        assert not isinstance(got, Unavailable)
        epochs[key] = got[1]
    return epochs


async def _stored(store: CacheStore, tags: dict[str, list[str]], epochs: dict[str, bytes | None]) -> list[bool]:
    """Whether each response, computed since its epoch was read, is stored."""
    return [
        await store.store_guarded(
            key,
            b"v",
            guard_key=keys.response_epoch(store.namespace, key),
            guard_value=epochs[key],
            tag_keys=tags[key],
            ttl_s=60,
            by_tags=True,
        )
        for key in tags
    ]
