"""The drills of Redis beyond one server, shared by the test suite (short phases) and bench/drills.py (longer ones,
for the numbers in bench/RESULTS.md): API processes (`wovepaper serve`) on a Cluster or under Sentinel, under a
steady load of the site's operations, while a primary is killed (SIGKILL) or slots move (`redis-cli --cluster
reshard`); and several processes sharing one Redis, which must agree. Every answer is checked against the data read
before the fault; recovery is timed on a second process without the in-memory tier, so that its hits are Redis's."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson

from db.cache import keys
from db.cache.client import create_redis, slot
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.records import Touched
from settings.redis_target import RedisTarget, parse_sentinels
from tests.drills.load import Load, site_calls
from tests.drills.redis_servers import LocalCluster, LocalSentinel, Node
from tests.drills.scenarios import HITS, DrillResult, metric, until
from tests.server_process import ServerProcess, start_api

REDIS_ERRORS = 'wovepaper_cache_events_total{cache="redis",event="error"}'
REDIS_CALLS = 'wovepaper_cache_events_total{cache="redis",event="call"}'


def api_env(redis: dict[str, str], namespace: str, **extra: str) -> dict[str, str]:
    """What every drill's API process runs with: its Redis, a namespace of its own, a breaker that probes every second
    (10 s by default), and a timeout the shared 2-core machine keeps within (the answers are what is checked)."""
    return {
        **redis,
        "WOVEPAPER_CACHE_NAMESPACE": namespace,
        "WOVEPAPER_REDIS_BREAKER_RESET_S": "1",
        "WOVEPAPER_REDIS_BREAKER_MIN_CALLS": "5",
        "WOVEPAPER_REDIS_TIMEOUT_S": "0.5",
        **extra,
    }


def cluster_env(cluster: LocalCluster) -> dict[str, str]:
    return {"REDIS_URL": cluster.url, "WOVEPAPER_REDIS_CLUSTER": "true"}


def target_of(env: dict[str, str]) -> RedisTarget:
    """The Redis the API processes of `env` use, for a store of the drill's own (the ingest's side)."""
    sentinels = env.get("WOVEPAPER_REDIS_SENTINELS")
    if sentinels:
        return RedisTarget(
            url=env.get("REDIS_URL"),
            sentinels=parse_sentinels(sentinels),
            sentinel_master=env["WOVEPAPER_REDIS_SENTINEL_MASTER"],
            sentinel_password=env.get("WOVEPAPER_REDIS_SENTINEL_PASSWORD"),
        )
    return RedisTarget(url=env["REDIS_URL"], cluster=env.get("WOVEPAPER_REDIS_CLUSTER") == "true")


def start_apis(
    dsn: str, env: dict[str, str], work: Path, count: int, **per_process: dict[str, str]
) -> list[ServerProcess]:
    """`count` API processes serving `dsn` with `env` (each on its own port, logging to its own file), started one
    after the other; `per_process["p<i>"]` adds settings to the i-th."""
    started: list[ServerProcess] = []
    try:
        for i in range(count):
            settings = {"DATABASE_URL": dsn, **env, **per_process.get(f"p{i}", {})}
            started.append(start_api(settings, work / f"api{i}.log"))
    except BaseException:
        for api in started:
            api.stop()
        raise
    return started


def request_lines(api: ServerProcess) -> list[dict[str, Any]]:
    """The request log lines (`wovepaper.request`) an API process wrote so far."""
    lines = []
    for line in api.log.read_text(errors="replace").splitlines():
        if '"wovepaper.request"' not in line:
            continue
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


async def response_key_on(node: Node, namespace: str) -> bytes | None:
    """A whole response the node holds (one of the drill's), read on the node itself."""
    client = node.client()
    try:
        for key in client.scan_iter(match=f"{namespace}:{{r:*}}:response:*", count=1000):
            value = client.get(key)
            if isinstance(value, bytes):
                return value
    finally:
        client.close()
    return None


def call_of(entry: bytes, load: Load) -> int | None:
    """Which of the load's calls a stored response answers (its body is the call's data)."""
    body = entry.partition(b"\n")[2]
    data = orjson.loads(body).get("data")
    return next((i for i, expected in load.expected.items() if expected == data), None)


async def first_redis_hit(probe: httpx.AsyncClient, body: dict[str, Any], started: float, timeout_s: float) -> float:
    """Seconds from `started` until the probe process (no in-memory tier) answers `body` from Redis; -1 if never."""
    while time.monotonic() - started < timeout_s:
        response = await probe.post("/graphql", json=body)
        if response.headers.get("x-cache") == "hit":
            return round(time.monotonic() - started, 2)
        await asyncio.sleep(0.05)
    return -1.0


async def failover_drill(
    dsn: str,
    env: dict[str, str],
    work: Path,
    *,
    victim: Callable[[], Node],
    recovered: Callable[[], bool],
    phase_s: float,
    concurrency: int = 6,
) -> DrillResult:
    """A primary killed (SIGKILL) under load: the load's process answers throughout (from PostgreSQL while its
    primary is gone), and a probe process without the in-memory tier times the first answer from Redis again. The
    killed server is started again at the end (a replica of the new primary)."""
    os.makedirs(work, exist_ok=True)
    apis = start_apis(dsn, env, work, 2, p1={"WOVEPAPER_NEAR_CACHE_MB": "0"})
    api, probe_api = apis
    facts: dict[str, Any] = {}
    try:
        calls = await site_calls(dsn)
        async with (
            httpx.AsyncClient(base_url=api.url, timeout=20) as client,
            httpx.AsyncClient(base_url=probe_api.url, timeout=20) as probe,
            Load(api.url, calls, concurrency=concurrency) as load,
        ):
            for c in calls:  # every answer stored in Redis through the probe process too
                await probe.post("/graphql", json=c.body)
            await load.run_phase("primary up", phase_s)
            node = victim()
            entry = await response_key_on(node, env["WOVEPAPER_CACHE_NAMESPACE"])
            index = call_of(entry, load) if entry is not None else None
            facts["probe_call"] = calls[index].name if index is not None else None
            assert index is not None, "no answer of the load is stored on the primary to kill"
            load.phase = "primary killed"
            killed = time.monotonic()
            node.kill()
            first_hit, failed_over = await asyncio.gather(
                first_redis_hit(probe, calls[index].body, killed, 60), until(_async(recovered), 60)
            )
            facts["failed_over_after_s"] = round(failed_over, 2) if failed_over is not None else None
            facts["first_redis_hit_after_s"] = first_hit
            await load.run_phase("after failover", phase_s)
            hits = await metric(client, HITS)
            await asyncio.sleep(phase_s / 2)
            facts["hits_after_failover"] = int(await metric(client, HITS) - hits)
            node.start()  # back as a replica of the new primary
            load.phase = "killed server back"
            await load.run_phase("killed server back", phase_s)
        return DrillResult(load.summary(), load.bad(), facts)
    finally:
        for a in apis:
            a.stop()


def _async(predicate: Callable[[], bool]) -> Callable[[], Awaitable[bool]]:
    async def wrapped() -> bool:
        try:
            return await asyncio.to_thread(predicate)
        except Exception:
            return False

    return wrapped


async def reshard_drill(
    dsn: str, cluster: LocalCluster, env: dict[str, str], work: Path, *, slots: int, phase_s: float
) -> DrillResult:
    """Slots moved between primaries (`redis-cli --cluster reshard`, keys migrated one by one) under load: the
    client follows MOVED and ASK, every answer stays right, no Redis call fails. The process keeps nothing in memory,
    so that every answer is read from Redis."""
    os.makedirs(work, exist_ok=True)
    apis = start_apis(dsn, {**env, "WOVEPAPER_NEAR_CACHE_MB": "0"}, work, 1)
    api = apis[0]
    facts: dict[str, Any] = {}
    try:
        calls = await site_calls(dsn)
        async with (
            httpx.AsyncClient(base_url=api.url, timeout=20) as client,
            Load(api.url, calls, concurrency=6) as load,
        ):
            await load.run_phase("before", phase_s)
            primaries = sorted(cluster.primaries(), key=lambda n: n.port)
            errors, calls_before = await metric(client, REDIS_ERRORS), await metric(client, REDIS_CALLS)
            hits = await metric(client, HITS)
            load.phase = "reshard"
            started = time.monotonic()
            await asyncio.to_thread(cluster.reshard, primaries[0], primaries[1], slots)
            facts["reshard_s"] = round(time.monotonic() - started, 2)
            facts["slots_moved"] = slots
            await load.run_phase("after", phase_s)
            facts["redis_errors"] = int(await metric(client, REDIS_ERRORS) - errors)
            facts["redis_calls"] = int(await metric(client, REDIS_CALLS) - calls_before)
            facts["redis_hits"] = int(await metric(client, HITS) - hits)
        return DrillResult(load.summary(), load.bad(), facts)
    finally:
        api.stop()


def channel_primary(cluster: LocalCluster, namespace: str) -> Node:
    """The primary that serves the namespace's invalidation channel now."""
    channel_slot = slot(keys.invalidations(namespace))
    for row in cluster.table():
        if row["role"] != "primary" or row["failed"]:
            continue
        for span in row["slots"]:
            first, last = span[0], span[-1]  # a range, or a single slot
            if first.isdigit() and last.isdigit() and int(first) <= channel_slot <= int(last):
                return next(n for n in cluster.nodes if n.port == row["port"])
    raise RuntimeError("no primary serves the channel's slot")


def sentinel_victim(sentinel: LocalSentinel) -> Callable[[], Node]:
    return sentinel.current_primary


async def drill_store(env: dict[str, str]) -> CacheStore:
    """A store like the ingest's, on the drill's Redis and namespace."""
    return CacheStore(
        create_redis(target_of(env), timeout_s=1.0),
        namespace=env["WOVEPAPER_CACHE_NAMESPACE"],
        ttl_s=600,
        timeout_s=1.0,
    )


async def rename(dsn: str, researcher_id: int, store: CacheStore) -> str:
    """A write the ingest would make, committed then invalidated: the researcher's new name."""
    conn = await asyncpg.connect(dsn)
    try:
        name = str(
            await conn.fetchval(
                "UPDATE researchers SET name = name || ' (renamed)' WHERE id = $1 RETURNING name", researcher_id
            )
        )
    finally:
        await conn.close()
    await invalidate(store, Touched(researchers={researcher_id}))
    assert not store.pending_invalidation, "the invalidation did not reach Redis"
    return name


def namespace() -> str:
    return f"drill{uuid.uuid4().hex[:8]}"


ASK_KEYED = """mutation ($input: AskPapersInput!) {
  askPapers(input: $input) { conversationId messageId text replayed }
}"""
CHEAP = "query Cheap { researchers(first: 1) { nodes { id } } }"


async def agreement_drill(dsn: str, apis: list[ServerProcess], env: dict[str, str], model: Any) -> dict[str, Any]:
    """Several API processes sharing one Redis agree: a key's budget is spent once across them, an answer one stored
    is a hit on the others, an invalidation reaches every process's memory before it returns, a revoked key is
    refused by all after the 10 s each may remember it, a retried chat question answers the same on any of them.
    The processes run with rate limits on, a JWT secret (tests/jwt_support.py) and the fake model at `model`."""
    from edge.api_keys import CHECK_TTL_S, new_key
    from tests.drills.load import operation_text
    from tests.jwt_support import bearer, hs256

    facts: dict[str, Any] = {}
    clients = [httpx.AsyncClient(base_url=a.url, timeout=30) for a in apis]
    conn = await asyncpg.connect(dsn)
    store = await drill_store(env)
    try:
        budget, spare = new_key(), new_key()
        for key, points in ((budget, 60), (spare, None)):
            await conn.execute(
                "INSERT INTO api_keys (key_hash, prefix, name, points_per_hour) VALUES ($1, $2, 'drill', $3)",
                key.key_hash,
                key.prefix,
                points,
            )
        # A revoked key: known to every process, then revoked; each may remember it CHECK_TTL_S.
        for c in clients:
            r = await c.post("/graphql", json={"query": CHEAP}, headers={"x-api-key": spare.key})
            assert r.status_code == 200, r.text
        await conn.execute("UPDATE api_keys SET revoked_at = now() WHERE prefix = $1", spare.prefix)
        revoked_at = time.monotonic()

        # One budget: charged round the processes until refused.
        allowed, used, refused_by = 0, [], None
        for i in range(200):
            client = clients[i % len(clients)]
            r = await client.post("/graphql", json={"query": CHEAP}, headers={"x-api-key": budget.key})
            if r.status_code == 429 or "RATE_LIMITED" in r.text:
                refused_by = i % len(clients)
                break
            assert r.status_code == 200 and "errors" not in r.json(), r.text
            allowed += 1
            used.append(int(r.headers["x-ratelimit-used"]))
        facts["budget"] = 60
        facts["cost"] = used[0] if used else None
        facts["points_allowed"] = allowed * (used[0] if used else 0)
        facts["budget_refused_by_process"] = refused_by
        facts["used_reported"] = used

        # An answer stored by one process is a hit on the others.
        rid = await conn.fetchval("SELECT min(id) FROM researchers")
        page = {"query": operation_text("ResearcherPage"), "variables": {"id": str(rid)}}
        answers = [await clients[0].post("/graphql", json=page)]
        # The answer is sent before it is stored: the first process's own hit says the store is done (it keeps a copy
        # in memory only once Redis has it).
        for _ in range(100):
            if (await clients[0].post("/graphql", json=page)).headers.get("x-cache") == "hit":
                break
            await asyncio.sleep(0.05)
        answers += [await c.post("/graphql", json=page) for c in clients[1:]]
        facts["response_cache"] = [a.headers.get("x-cache") for a in answers]
        facts["same_answer"] = len({a.content for a in answers}) == 1

        # Held in every process's memory, then a write's invalidation: the very next answer on each is the new one.
        for c in clients:
            await c.post("/graphql", json=page)
        before = [await c.post("/graphql", json=page) for c in clients]
        facts["held_before"] = [b.headers.get("x-cache") for b in before]
        new_name = await rename(dsn, rid, store)
        after = [await c.post("/graphql", json=page) for c in clients]
        facts["name_after_invalidation"] = [a.json()["data"]["researcher"]["name"] == new_name for a in after]

        # A chat question retried with its idempotency key on each process: asked once, answered the same.
        title = str(await conn.fetchval("SELECT title FROM papers ORDER BY id LIMIT 1"))
        question = {"input": {"question": f"What does {title} find?", "idempotencyKey": uuid.uuid4().hex}}
        reader = bearer(hs256(f"reader-{uuid.uuid4().hex[:8]}"))
        chats = []
        for c in clients:
            r = await c.post("/graphql", json={"query": ASK_KEYED, "variables": question}, headers=reader)
            chats.append(r.json())
        asked = [c.get("data", {}).get("askPapers") or c for c in chats]
        facts["chat_replayed"] = [a.get("replayed") for a in asked]
        facts["chat_same_answer"] = len({(a.get("messageId"), a.get("text")) for a in asked}) == 1
        facts["chat_model_requests"] = len(model.requests)

        # The revoked key, once every process's memory of it has expired.
        await asyncio.sleep(max(0.0, revoked_at + CHECK_TTL_S + 0.5 - time.monotonic()))
        refusals = [await c.post("/graphql", json={"query": CHEAP}, headers={"x-api-key": spare.key}) for c in clients]
        facts["revoked_key_status"] = [r.status_code for r in refusals]
        # Every Redis call of all of it answered: no command crossed slots, none was refused.
        facts["redis_errors"] = [int(await metric(c, REDIS_ERRORS)) for c in clients]
        facts["redis_calls"] = [int(await metric(c, REDIS_CALLS)) for c in clients]
        return facts
    finally:
        await store.aclose()
        await conn.close()
        for c in clients:
            await c.aclose()


async def exercise(target: RedisTarget, ns: str) -> dict[str, Any]:
    """Every use of Redis, in this process, against `target`: an aggregate stored with the tag sets of other entities,
    read back, dropped by an invalidation that a subscribed in-memory tier hears at once; rate-limit charges; a
    persisted document registered and read. What each gave, for the caller to check."""
    from db.cache.store import EntityRef
    from edge.near import NearResponses
    from edge.persisted import _register, _registered
    from edge.ratelimit import RateLimiter

    facts: dict[str, Any] = {}
    redis = create_redis(target, timeout_s=1.0)
    store = CacheStore(redis, namespace=ns, ttl_s=600, timeout_s=1.0)
    near = NearResponses(
        target, ns, max_bytes=2**20, max_age_s=60, timeout_s=1.0, cluster=redis if store.cluster else None
    )
    limiter = RateLimiter(store)
    computed = 0

    async def compute() -> dict[str, int]:
        nonlocal computed
        computed += 1
        return {"computed": computed}

    key = keys.researcher_network(ns, 1, depth=1, min_shared=1, limit=5)

    async def network() -> dict[str, int]:
        others = [EntityRef("researcher", 2), EntityRef("researcher", 3)]
        value: dict[str, int] = await store.get_or_compute(
            key, compute, load=lambda d: d, owner=EntityRef("researcher", 1), tags=lambda _: others
        )
        return value

    try:
        facts["first"], facts["again"] = await network(), await network()
        facts["subscribed"] = await near.connect()
        near.keep("page", b"{}", cost=1, tags=["researcher:3"], since=near.mark())
        facts["held"] = near.get("page") is not None
        await invalidate(store, Touched(researchers={3}))  # a node of the network, not its owner
        facts["held_after_invalidation"] = near.get("page") is not None
        facts["after_invalidation"] = await network()
        decisions = [await limiter.charge(f"ip:192.0.2.{i % 5}", 1, 100) for i in range(10)]
        facts["remaining"] = sorted(d.remaining for d in decisions)
        # Charged in Redis, not counted in this process alone.
        facts["charged_in_redis"] = await redis.exists(*(keys.rate_limit(ns, f"ip:192.0.2.{i}") for i in range(5)))
        await _register(store, "ab" * 32, "query Q { __typename }")
        facts["persisted"] = await _registered(store, "ab" * 32)
        facts["errors"] = store.metrics.errors
    finally:
        near.close()
        await limiter.aclose()
        await store.aclose()
    return facts
