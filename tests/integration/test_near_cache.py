"""The response cache's in-process tier: a hit crosses no network, and stays true across workers.

Two app instances share PostgreSQL and Redis (as two workers do); an invalidation made through either is seen
by the next request on the other; a lost subscription empties the tier until it is back. A request whose bytes
were seen before is answered from it before it is parsed, with the same answer, checks and charge."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest
import redis.asyncio as aioredis

import edge.request as edge_request
from app import create_app
from db.cache import keys
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.records import Touched
from edge.near import NearResponses
from edge.request import parse_post as real_parse_post
from request_types.graphql_request import GraphQLRequest
from settings import Settings
from tests.integration import test_response_cache as shared
from tests.integration.inprocess import served
from tests.integration.test_response_cache import RESEARCHER_PAGE, Statements, post

# That module's operations.
operations_dir = shared.operations_dir


@pytest.fixture(scope="module")
async def resp_db(make_database: Any) -> tuple[str, dict[str, int]]:
    """That module's data, in a database of this module's own."""
    return await shared.build_resp_db(make_database, "nearcache")


_ns = itertools.count()


async def listening(near: Any) -> NearResponses:
    assert isinstance(near, NearResponses)
    for _ in range(200):
        if near.listening():
            return near
        await asyncio.sleep(0.02)
    raise AssertionError("the near cache never subscribed")


@contextlib.asynccontextmanager
async def worker(dsn: str, redis_url: str, namespace: str, **settings: Any) -> AsyncIterator[Worker]:
    """One app instance (a worker) and its lifespan state."""
    counter = Statements()
    # Rate limiting off: its budget is charged in Redis on every request, hit or not (edge/ratelimit.py).
    settings = {"rate_limits": "off", **settings}
    application = create_app(
        Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, cache_namespace=namespace, **settings), query_logger=counter
    )
    async with served(dsn, application=application) as (client, state):
        yield Worker(client, state["cache"], state["near"], counter)


@dataclass
class Worker:
    client: httpx.AsyncClient
    store: CacheStore
    near: NearResponses | None
    statements: Statements


async def test_a_second_hit_needs_no_redis_and_an_invalidation_on_another_worker_is_seen_next(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    ns = f"{cache_namespace}-near{next(_ns)}"
    variables = {"id": str(resp_db[1]["A"])}
    async with worker(resp_db[0], redis_url, ns) as wa, worker(resp_db[0], redis_url, ns) as wb:
        a, store_a, statements, store_b = wa.client, wa.store, wa.statements, wb.store
        near = await listening(wa.near)
        first = await post(a, RESEARCHER_PAGE, variables)
        assert first.headers["x-cache"] == "miss" and len(near) == 1
        calls, statements.n = store_a.metrics.calls, 0
        for _ in range(3):
            again = await post(a, RESEARCHER_PAGE, variables)
            assert again.headers["x-cache"] == "hit" and again.content == first.content
        assert store_a.metrics.calls == calls and statements.n == 0  # neither Redis nor PostgreSQL
        assert store_a.metrics.response_near_hits == 3

        # A write's invalidation made by the other worker: the very next request here is a miss.
        await invalidate(store_b, Touched(researchers={resp_db[1]["B"]}))
        assert (await post(a, RESEARCHER_PAGE, variables)).headers["x-cache"] == "miss"
        assert (await post(a, RESEARCHER_PAGE, variables)).headers["x-cache"] == "hit"
        # A write that touches nothing on the page drops lists only.
        near_hits = store_a.metrics.response_near_hits
        await invalidate(store_b, Touched(researchers={resp_db[1]["E"]}))
        assert (await post(a, RESEARCHER_PAGE, variables)).headers["x-cache"] == "hit"
        assert store_a.metrics.response_near_hits == near_hits + 1


async def test_a_lost_subscription_empties_the_tier_until_it_is_back(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    ns = f"{cache_namespace}-near{next(_ns)}"
    variables = {"id": str(resp_db[1]["A"])}
    async with worker(resp_db[0], redis_url, ns) as w:
        client, store = w.client, w.store
        near = await listening(w.near)
        await post(client, RESEARCHER_PAGE, variables)
        assert len(near) == 1
        admin = aioredis.Redis.from_url(redis_url)
        try:
            listeners = [c for c in await admin.client_list() if c["name"] == f"{keys.invalidations(ns)}:listener"]
            assert len(listeners) == 1
            await admin.client_kill_filter(_id=listeners[0]["id"])
        finally:
            await admin.aclose()
        await asyncio.sleep(0.05)
        calls = store.metrics.calls
        hit = await post(client, RESEARCHER_PAGE, variables)
        # Answered from Redis, not from memory that may have missed an invalidation.
        assert hit.headers["x-cache"] == "hit" and store.metrics.calls > calls
        assert len(near) == 0
        await listening(near)  # the watcher subscribes again
        await post(client, RESEARCHER_PAGE, variables)
        calls = store.metrics.calls
        assert (await post(client, RESEARCHER_PAGE, variables)).headers["x-cache"] == "hit"
        assert store.metrics.calls == calls


async def test_nothing_read_while_an_invalidation_arrived_is_kept(redis_url, cache_namespace) -> None:
    ns = f"{cache_namespace}-near{next(_ns)}"
    near = NearResponses(redis_url, ns, max_bytes=2**20, max_age_s=60, timeout_s=1.0)
    assert await near.connect()
    publisher = aioredis.Redis.from_url(redis_url)
    try:
        since = near.mark()
        await publisher.publish(keys.invalidations(ns), "researcher:99")
        await asyncio.sleep(0.05)
        near.keep("k1", b"{}", cost=1, tags=["researcher:1"], since=since)
        assert near.get("k1") is None
        near.keep("k1", b"{}", cost=1, tags=["researcher:1", "paper:2401.00001"], since=near.mark())
        near.keep("k2", b"{}", cost=1, tags=["researcher:2"], since=near.mark())
        assert near.get("k1") is not None and near.get("k2") is not None
        await publisher.publish(keys.invalidations(ns), "paper:2401.00001 lists")
        await asyncio.sleep(0.05)
        assert near.get("k1") is None and near.get("k2") is not None
    finally:
        await publisher.aclose()
        near.close()


async def test_invalidations_are_heard_as_they_arrive_not_when_a_request_asks(redis_url, cache_namespace) -> None:
    """The event loop reads the subscription (so a hit spends no system call checking it): what an invalidation
    drops is dropped, its memory freed, as the message arrives."""
    ns = f"{cache_namespace}-near{next(_ns)}"
    near = NearResponses(redis_url, ns, max_bytes=2**20, max_age_s=60, timeout_s=1.0)
    assert await near.connect()
    publisher = aioredis.Redis.from_url(redis_url)
    try:
        near.keep("k1", b"{}", cost=1, tags=["researcher:1"], since=near.mark())  # tags as in Surrogate-Key
        near.keep("k2", b"{}", cost=1, tags=["researcher:2"], since=near.mark())
        await publisher.publish(keys.invalidations(ns), "researcher:1")
        await publisher.ping()  # the writer's extra round trip
        await asyncio.sleep(0)
        assert len(near) == 1  # no get(), no listening(): heard anyway
        assert near.get("k1") is None and near.get("k2") is not None
    finally:
        await publisher.aclose()
        near.close()


async def test_memory_and_age_are_bounded(redis_url, cache_namespace) -> None:
    now = [0.0]
    ns = f"{cache_namespace}-near{next(_ns)}"
    near = NearResponses(redis_url, ns, max_bytes=64 * 1024, max_age_s=5, timeout_s=1.0, clock=lambda: now[0])
    assert await near.connect()
    try:
        for i in range(10):
            near.keep(f"k{i}", b"x" * 7000, cost=1, tags=[f"researcher:{i}"], since=near.mark())
        assert near.get("k0") is None and near.get("k9") is not None  # least recently used went first
        assert sum(near.get(f"k{i}") is not None for i in range(10)) < 10
        now[0] = 5.0
        assert near.get("k9") is None  # too old: asked of Redis again
    finally:
        near.close()


async def test_an_entrys_tags_count_against_the_bound(redis_url, cache_namespace) -> None:
    """A small answer naming a thousand entities holds a thousand tags, twice (in the entry and in the index by tag):
    charged for its body alone, 64 KB of bound held megabytes of tags."""
    ns = f"{cache_namespace}-near{next(_ns)}"
    near = NearResponses(redis_url, ns, max_bytes=256 * 1024, max_age_s=60, timeout_s=1.0)
    assert await near.connect()
    try:
        for i in range(20):
            tags = [f"{ns}:tag:researcher:{i * 1000 + j}" for j in range(100)]
            near.keep(f"k{i}", b"{}", cost=1, tags=tags, since=near.mark())
        held = [i for i in range(20) if near.get(f"k{i}") is not None]
        assert 0 < len(held) < 20 and held == list(range(20 - len(held), 20))
    finally:
        near.close()


async def test_the_index_by_tag_follows_every_keep_eviction_and_invalidation(redis_url, cache_namespace) -> None:
    """Entries sharing tags, replaced, evicted by the bound and invalidated, against a plain model: an invalidated
    tag drops every entry holding it and no other, and nothing is left indexed once nothing is held."""
    ns = f"{cache_namespace}-near{next(_ns)}"
    near = NearResponses(redis_url, ns, max_bytes=64 * 1024, max_age_s=600, timeout_s=1.0)
    assert await near.connect()
    publisher = aioredis.Redis.from_url(redis_url)
    rng = random.Random(7)
    try:
        for _ in range(300):
            key = f"k{rng.randrange(40)}"
            tags = sorted({f"researcher:{rng.randrange(12)}" for _ in range(rng.randrange(1, 4))})
            near.keep(key, b"x" * rng.randrange(100, 6000), cost=1, tags=tags, since=near.mark())
            if rng.random() < 0.2:
                tag = f"researcher:{rng.randrange(12)}"
                held = {k: near._entries[k].tags for k in list(near._entries)}
                await publisher.publish(keys.invalidations(ns), tag)
                await publisher.ping()
                await asyncio.sleep(0)
                expected = {k for k, t in held.items() if tag not in t}
                assert set(near._entries) == expected
            model: dict[str, set[str]] = {}
            for k, held_entry in near._entries.items():
                for t in held_entry.tags:
                    model.setdefault(t, set()).add(k)
            index = {t: {v} if isinstance(v, str) else v for t, v in near._by_tag.items()}
            assert index == model
        for key in list(near._entries):
            near._remove(key)
        assert near._by_tag == {}
    finally:
        await publisher.aclose()
        near.close()


async def test_without_redis_there_is_no_tier_and_pages_are_answered(resp_db, cache_namespace, operations_dir) -> None:
    from localservers import free_port

    dead = f"redis://127.0.0.1:{free_port()}/0"
    async with worker(resp_db[0], dead, f"{cache_namespace}-near{next(_ns)}", redis_timeout_s=0.1) as w:
        near = w.near
        for _ in range(3):
            r = await post(w.client, RESEARCHER_PAGE, {"id": str(resp_db[1]["A"])})
            assert r.status_code == 200 and "errors" not in r.json()
        assert isinstance(near, NearResponses) and not near.listening() and len(near) == 0


def _without_request_id(response: httpx.Response) -> list[tuple[str, str]]:
    return [(k, v) for k, v in response.headers.multi_items() if k != "x-request-id"]


async def test_a_repeated_request_is_answered_before_it_is_parsed_and_alike(
    resp_db, redis_url, cache_namespace, operations_dir, monkeypatch
) -> None:
    parsed: list[bytes] = []

    def parse_post(content_type: bytes, body: bytes) -> GraphQLRequest:
        parsed.append(body)
        return real_parse_post(content_type, body)

    monkeypatch.setattr(edge_request, "parse_post", parse_post)
    variables = {"id": str(resp_db[1]["A"])}
    origin = "https://site.example"
    async with worker(resp_db[0], redis_url, f"{cache_namespace}-near{next(_ns)}", cors_origins=origin) as w:
        await listening(w.near)
        first = await post(w.client, RESEARCHER_PAGE, variables)
        assert first.headers["x-cache"] == "miss" and len(parsed) == 1
        same = await post(w.client, RESEARCHER_PAGE, variables)
        assert same.headers["x-cache"] == "hit" and len(parsed) == 1  # the same bytes: not parsed again
        # The same request spelt otherwise is parsed, and its answer from memory is the same, header for header.
        reordered = orjson.dumps({"variables": variables, "query": RESEARCHER_PAGE})
        other = await w.client.post("/graphql", content=reordered, headers={"content-type": "application/json"})
        assert len(parsed) == 2 and other.headers["x-cache"] == "hit"
        assert same.content == other.content == first.content
        assert _without_request_id(same) == _without_request_id(other)
        assert same.headers["x-request-id"] != other.headers["x-request-id"]
        assert w.store.metrics.response_near_hits == 2
        # Its request line and latency are the operation's.
        timed = 'wovepaper_request_duration_seconds_count{operation="ResearcherPage",status="200"}'
        before = await _metric(w.client, timed)
        await post(w.client, RESEARCHER_PAGE, variables)
        assert await _metric(w.client, timed) == before + 1

        # The same bytes from a browser: CORS's headers as on any answer.
        cors = await post(w.client, RESEARCHER_PAGE, variables, origin=origin)
        assert cors.headers["x-cache"] == "hit" and cors.headers["access-control-allow-origin"] == origin
        assert cors.content == first.content and len(parsed) == 2

        # The same bytes with a credential are not answered from memory: a token is verified (and this one is
        # refused), a cookie's answer is private.
        token = await post(w.client, RESEARCHER_PAGE, variables, authorization="Bearer not-a-token")
        assert token.status_code == 401 and token.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
        cookie = await post(w.client, RESEARCHER_PAGE, variables, cookie="session=1")
        assert cookie.status_code == 200 and cookie.headers["cache-control"] == "private, no-store"
        assert "x-cache" not in cookie.headers and len(parsed) == 3
        assert w.store.metrics.response_near_hits == 4


async def _metric(client: httpx.AsyncClient, sample: str) -> float:
    for line in (await client.get("/metrics")).text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


async def test_a_request_answered_from_memory_is_charged_and_refused_past_its_budget(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    variables = {"id": str(resp_db[1]["A"])}
    async with worker(resp_db[0], redis_url, f"{cache_namespace}-near{next(_ns)}", rate_limits="on") as w:
        await listening(w.near)
        cost = int((await post(w.client, RESEARCHER_PAGE, variables)).headers["x-ratelimit-used"])
    assert cost > 0
    ns = f"{cache_namespace}-near{next(_ns)}"
    async with worker(resp_db[0], redis_url, ns, rate_limits="on", anon_points_per_hour=2 * cost) as w:
        await listening(w.near)
        miss = await post(w.client, RESEARCHER_PAGE, variables)
        hit = await post(w.client, RESEARCHER_PAGE, variables)
        assert (miss.headers["x-cache"], hit.headers["x-cache"]) == ("miss", "hit")
        assert hit.headers["x-ratelimit-used"] == str(2 * cost) and hit.headers["x-ratelimit-remaining"] == "0"
        refused = await post(w.client, RESEARCHER_PAGE, variables)
        assert refused.status_code == 429 and refused.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert w.store.metrics.response_near_hits == 1
