"""Redis beyond one server, with real servers the tests start on loopback (tests/drills/redis_servers.py): a Cluster of
three primaries with a replica each, and a primary with a replica and three Sentinels, each started once for the
module. Several `wovepaper serve` processes share them and must agree; a primary is killed under load (SIGKILL) and
slots move under load (`redis-cli --cluster reshard`), and every answer must stay right; a frozen Redis (SIGSTOP)
costs a request one timeout at most. The assertions are about answers and counts, never about how fast they came;
bench/drills.py runs the same drills longer and prints the times."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import localservers
from settings.redis_target import RedisTarget, parse_sentinels
from tests.drills.load import site_calls
from tests.drills.redis_servers import (
    PASSWORD,
    LocalCluster,
    LocalSentinel,
    Node,
    make_tls,
    missing,
    start_cluster,
    start_sentinel,
)
from tests.drills.scenarios import load_small_demo
from tests.drills.topologies import (
    agreement_drill,
    api_env,
    channel_primary,
    cluster_env,
    exercise,
    failover_drill,
    namespace,
    request_lines,
    reshard_drill,
    start_apis,
)
from tests.fake_model import fake_model
from tests.integration.chat_support import KEY, chatbot
from tests.jwt_support import SECRET

pytestmark = [pytest.mark.slow, pytest.mark.skipif(missing() is not None, reason=str(missing()))]


@pytest.fixture(scope="module")
async def topology_db(make_database: Any) -> str:
    dsn = await make_database("topologies")
    await load_small_demo(dsn)
    return str(dsn)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    started = start_cluster(tmp_path_factory.mktemp("cluster"))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def sentinel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSentinel]:
    started = start_sentinel(tmp_path_factory.mktemp("sentinel"))
    yield started
    started.stop()


def assert_all_right(result: Any) -> None:
    """Every answer the right data: none failed, none wrong, not even a retryable 503."""
    print(result.summary, result.facts)
    for phase, summary in result.summary.items():
        assert set(summary["outcomes"]) == {"ok"}, (phase, summary)
        assert summary["requests"] > 0, phase


async def test_check_finds_the_primary_on_each_topology(cluster: LocalCluster, sentinel: LocalSentinel) -> None:
    """`wovepaper check` reaches a Cluster (its state) and the primary the Sentinels name, and reads each primary's
    memory policy (a Cluster answers it per node)."""
    from typer.testing import CliRunner

    from cli import app

    for env, setting, what in (
        (cluster_env(cluster), "WOVEPAPER_REDIS_CLUSTER", "Redis Cluster (state ok)"),
        (sentinel.env(), "WOVEPAPER_REDIS_SENTINELS", "(the Sentinels' primary)"),
    ):
        clean = {k: None for k in os.environ if k.startswith("WOVEPAPER_") or k in ("DATABASE_URL", "REDIS_URL")}
        result = await asyncio.to_thread(CliRunner().invoke, app, ["check", "--only", "redis"], env=clean | env)
        assert result.exit_code == 0, result.output
        row = next(line for line in result.output.splitlines() if line.split()[:2] == ["ok", "redis"])
        assert setting in row and what in row and PASSWORD not in row


async def test_three_processes_on_a_cluster_agree(topology_db: str, cluster: LocalCluster, tmp_path: Any) -> None:
    env = api_env(
        cluster_env(cluster),
        namespace(),
        WOVEPAPER_RATE_LIMITS="on",
        WOVEPAPER_ANON_POINTS_PER_HOUR=str(10**9),
        WOVEPAPER_JWT_SECRET=SECRET,
    )
    async with fake_model(chatbot) as model:
        env |= {"WOVEPAPER_LLM_API_URL": model.base_url, "WOVEPAPER_LLM_MODEL": "fake", "WOVEPAPER_LLM_API_KEY": KEY}
        apis = start_apis(topology_db, env, tmp_path, 3)
        try:
            facts = await agreement_drill(topology_db, apis, env, model)
        finally:
            for api in apis:
                api.stop()
    print(facts)
    cost = facts["cost"]
    # The key's 60 points spent once across the three, wherever each request went.
    assert cost and facts["points_allowed"] == 60 // cost * cost and facts["budget_refused_by_process"] is not None
    assert facts["used_reported"] == [cost * (i + 1) for i in range(60 // cost)]
    assert facts["response_cache"] == ["miss", "hit", "hit"] and facts["same_answer"]
    assert facts["held_before"] == ["hit", "hit", "hit"]
    assert facts["name_after_invalidation"] == [True, True, True]
    assert facts["chat_replayed"] == [False, True, True] and facts["chat_same_answer"]
    assert facts["chat_model_requests"] == 1
    assert facts["revoked_key_status"] == [401, 401, 401]
    assert facts["redis_errors"] == [0, 0, 0] and min(facts["redis_calls"]) > 0


async def test_a_frozen_redis_costs_a_request_one_timeout_at_most(topology_db: str, tmp_path: Any) -> None:
    """One Redis frozen (SIGSTOP) under three processes, each request from another client (its charge goes to Redis),
    the site's pages asked: every answer right, and no request waited out more than one Redis timeout (its log line
    counts them)."""
    redis = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    env = api_env(
        {"REDIS_URL": redis.url},
        namespace(),
        WOVEPAPER_RATE_LIMITS="on",
        WOVEPAPER_ANON_POINTS_PER_HOUR=str(10**9),
        WOVEPAPER_TRUSTED_PROXIES="127.0.0.1",
        WOVEPAPER_REDIS_TIMEOUT_S="0.25",
        WOVEPAPER_NEAR_CACHE_MB="0",
    )
    apis = start_apis(topology_db, env, tmp_path, 3)
    clients = [httpx.AsyncClient(base_url=a.url, timeout=30) for a in apis]
    try:
        calls = await site_calls(topology_db)
        expected = {}
        for i, c in enumerate(calls):
            expected[i] = (await clients[i % 3].post("/graphql", json=c.body)).json()["data"]
        os.kill(redis.pid, signal.SIGSTOP)
        try:

            async def ask(n: int) -> bool:
                headers = {"x-forwarded-for": f"198.18.{n // 256}.{n % 256}", "x-request-id": f"frozen-{n}"}
                r = await clients[n % 3].post("/graphql", json=calls[n % len(calls)].body, headers=headers)
                return r.status_code == 200 and r.json().get("data") == expected[n % len(calls)]

            answers = await asyncio.gather(*(ask(n) for n in range(60)))
        finally:
            os.kill(redis.pid, signal.SIGCONT)
        await asyncio.sleep(1.0)  # the log lines reach their files
        lines = [x for a in apis for x in request_lines(a) if str(x["request_id"]).startswith("frozen-")]
    finally:
        for c in clients:
            await c.aclose()
        for a in apis:
            a.stop()
        redis.stop()
    assert all(answers)
    waited = [line["redis_timeouts"] for line in lines]
    print({"requests": len(lines), "one_timeout": waited.count(1), "skipped": sum(x["redis_skipped"] for x in lines)})
    assert len(lines) == 60
    assert max(waited) == 1  # some waited one out (the freeze was felt), none waited two


async def test_a_cluster_primary_killed_under_load(topology_db: str, cluster: LocalCluster, tmp_path: Any) -> None:
    ns = namespace()
    result = await failover_drill(
        topology_db,
        api_env(cluster_env(cluster), ns),
        tmp_path,
        # The primary of the invalidation channel: the processes' subscriptions are lost with it, and come back.
        victim=lambda: channel_primary(cluster, ns),
        recovered=cluster.healthy,
        phase_s=2.0,
    )
    assert_all_right(result)
    assert result.facts["first_redis_hit_after_s"] > 0  # answered from Redis again once its replica took over
    assert result.facts["hits_after_failover"] > 0
    await asyncio.to_thread(cluster.wait_healthy)


async def test_slots_moved_under_load(topology_db: str, cluster: LocalCluster, tmp_path: Any) -> None:
    await asyncio.to_thread(cluster.wait_healthy)
    result = await reshard_drill(
        topology_db, cluster, api_env(cluster_env(cluster), namespace()), tmp_path, slots=2000, phase_s=2.0
    )
    assert_all_right(result)
    assert result.facts["redis_errors"] == 0  # MOVED and ASK followed: no call failed


async def test_a_moved_channel_slot_makes_a_process_forget_and_subscribe_again(cluster: LocalCluster) -> None:
    """The invalidations' shard channel moves with its slot: the server ends the subscription (SUNSUBSCRIBE), so the
    in-memory tier forgets what it holds (it may miss a message) and subscribes again on the slot's new primary,
    where the next invalidation reaches it."""
    from db.cache.client import create_redis, slot
    from db.cache.invalidation import invalidate
    from db.cache.store import CacheStore
    from db.records import Touched
    from edge.near import NearResponses

    await asyncio.to_thread(cluster.wait_healthy)
    ns = namespace()
    target = RedisTarget(url=cluster.url, cluster=True)
    redis = create_redis(target, timeout_s=1.0)
    store = CacheStore(redis, namespace=ns, ttl_s=600, timeout_s=1.0)
    near = NearResponses(target, ns, max_bytes=2**20, max_age_s=60, timeout_s=1.0, cluster=redis)  # type: ignore[arg-type]
    try:
        assert await near.connect()
        near.keep("page", b"{}", cost=1, tags=["researcher:9"], since=near.mark())
        source = channel_primary(cluster, ns)
        destination = next(n for n in cluster.primaries() if n is not source)
        await asyncio.to_thread(cluster.move_slot, slot(near.channel), source, destination)
        for _ in range(100):  # the server's SUNSUBSCRIBE arrives
            if not near.listening():
                break
            await asyncio.sleep(0.02)
        assert not near.listening() and len(near) == 0
        assert await near.connect()  # what the watcher does next
        assert channel_primary(cluster, ns) is destination
        near.keep("page", b"{}", cost=1, tags=["researcher:9"], since=near.mark())
        await invalidate(store, Touched(researchers={9}))
        assert near.listening() and near.get("page") is None
    finally:
        near.close()
        await store.aclose()


async def test_a_sentinel_primary_killed_under_load(topology_db: str, sentinel: LocalSentinel, tmp_path: Any) -> None:
    victim = sentinel.current_primary()
    result = await failover_drill(
        topology_db,
        api_env(sentinel.env(), namespace()),
        tmp_path,
        victim=lambda: victim,
        recovered=lambda: sentinel.current_primary() is not victim and sentinel.in_sync(),
        phase_s=2.0,
    )
    assert_all_right(result)
    assert result.facts["first_redis_hit_after_s"] > 0  # answered from Redis again once the replica was promoted
    assert result.facts["hits_after_failover"] > 0


async def test_tls_and_passwords_on_each_topology(tmp_path: Any) -> None:
    """One server, a Cluster (three primaries) and a primary with its Sentinels, each speaking TLS only and asking
    for a password (the Sentinels for one of their own): every use of Redis works on each, `rediss://` with the CA
    in the URL's query."""
    tls = make_tls(tmp_path / "tls")
    port = localservers.free_port()
    single = Node(port, tmp_path / "single", [], tls=tls)
    single.args = ["--port", "0", "--tls-port", str(port), *tls.server_args(), "--requirepass", PASSWORD]
    single.args += ["--save", "", "--appendonly", "no", "--bind", "127.0.0.1"]
    await asyncio.to_thread(single.start)
    cluster = await asyncio.to_thread(start_cluster, tmp_path / "cluster", replicas=0, tls=tls)
    sentinel = await asyncio.to_thread(start_sentinel, tmp_path / "sentinel", tls=tls)
    try:
        env = sentinel.env()
        targets = {
            "single": RedisTarget(url=f"rediss://:{PASSWORD}@127.0.0.1:{port}/0{tls.url_options()}"),
            "cluster": RedisTarget(url=cluster.url, cluster=True),
            "sentinel": RedisTarget(
                url=env["REDIS_URL"],
                sentinels=parse_sentinels(env["WOVEPAPER_REDIS_SENTINELS"]),
                sentinel_master=env["WOVEPAPER_REDIS_SENTINEL_MASTER"],
                sentinel_password=env["WOVEPAPER_REDIS_SENTINEL_PASSWORD"],
            ),
        }
        for name, target in targets.items():
            assert target.url is not None and target.url.startswith("rediss://")
            facts = await exercise(target, namespace())
            print(name, facts)
            assert facts["first"] == facts["again"] == {"computed": 1}, name
            assert facts["subscribed"] and facts["held"] and not facts["held_after_invalidation"], name
            assert facts["after_invalidation"] == {"computed": 2}, name  # dropped through another entity's tag
            assert facts["remaining"] == [98] * 5 + [99] * 5, name  # two charges of one point each
            assert facts["charged_in_redis"] == 5, name
            assert facts["persisted"] == "query Q { __typename }", name
            assert facts["errors"] == 0, name
    finally:
        single.stop()
        cluster.stop()
        sentinel.stop()
