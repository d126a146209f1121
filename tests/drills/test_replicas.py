"""Reads on a real streaming replica (tests/drills/replica_scenarios.py): a primary of the drill's own, a replica
made by `pg_basebackup -R`, `wovepaper serve` reading from it. The drills assert answers (the reader's own writes,
no old answer cached or older than the maximum lag, no failed request), never how fast they came."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from tests.drills.replica_scenarios import (
    Replicated,
    follows_drill,
    ingest_drill,
    paused_replay_drill,
    primary_restarted_drill,
    replica_api,
    replica_killed_drill,
    replicated_demo,
)
from tests.server_process import ServerProcess

pytestmark = pytest.mark.slow

DELAY_S = 3.0
# Above the replay delay (the replica stays in the rotation while it replays 3 s late), small enough that a paused
# replay takes it out within the drill.
MAX_LAG_S = 5.0


@pytest.fixture(scope="module")
async def cluster() -> AsyncIterator[Replicated]:
    async with replicated_demo() as replicated:
        yield replicated


@pytest.fixture(scope="module")
def namespace() -> str:
    return f"rd{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def cached_api(
    cluster: Replicated, redis_url: str, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """With Redis (the writers' positions, the caches) and the replica."""
    log = tmp_path_factory.mktemp("replica-api") / "api.log"
    api = replica_api(cluster, log, redis_url=redis_url, max_lag_s=MAX_LAG_S, namespace=namespace)
    yield api
    api.stop()


@pytest.fixture(scope="module")
def plain_api(cluster: Replicated, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Without Redis: every request reads the database, and writers' positions live in the process's memory."""
    log = tmp_path_factory.mktemp("replica-api") / "api.log"
    api = replica_api(cluster, log, redis_url=None, max_lag_s=MAX_LAG_S)
    yield api
    api.stop()


async def test_check_names_each_replica_and_refuses_a_primary_listed_as_one(cluster: Replicated) -> None:
    """`wovepaper check`: a row per replica, a standby; the primary named as a replica is a failure naming the
    setting."""
    from typer.testing import CliRunner

    from cli import app

    def check(replicas: str) -> tuple[int, list[list[str]]]:
        clean = {k: None for k in os.environ if k.startswith("WOVEPAPER_") or k in ("DATABASE_URL", "REDIS_URL")}
        env = clean | {"DATABASE_URL": cluster.primary_dsn, "WOVEPAPER_DATABASE_REPLICA_URLS": replicas}
        result = CliRunner().invoke(app, ["check", "--only", "database"], env=env)
        return result.exit_code, [line.split(None, 3) for line in result.output.splitlines()[1:-1]]

    code, rows = await asyncio.to_thread(check, cluster.replica_dsn)
    assert code == 0 and [r[:3] for r in rows] == [
        ["ok", "database", "DATABASE_URL"],
        ["ok", "replica", "WOVEPAPER_DATABASE_REPLICA_URLS"],
    ]
    assert "(standby)" in rows[1][3]
    code, rows = await asyncio.to_thread(check, cluster.primary_dsn)
    assert code == 1 and rows[1][:3] == ["FAIL", "replica", "WOVEPAPER_DATABASE_REPLICA_URLS"]
    assert "not a standby" in rows[1][3]


async def test_a_writer_reads_their_follows_at_once_through_a_delayed_replica(cluster, cached_api) -> None:
    result = await follows_drill(cluster, cached_api, rounds=100, delay_s=DELAY_S)
    print(result.facts)
    assert result.facts["misses"] == 0, result.bad[:5]
    # The replica served the other reader meanwhile; the writer's reads went where their writes were.
    assert result.facts["replica_reads"] > 0
    assert result.facts["read_your_writes_fallbacks"] > 0


async def test_without_redis_a_writer_still_reads_their_follows(cluster, plain_api) -> None:
    result = await follows_drill(cluster, plain_api, rounds=20, delay_s=DELAY_S)
    print(result.facts)
    assert result.facts["misses"] == 0, result.bad[:5]
    assert result.facts["replica_reads"] > 0


async def test_an_ingest_change_is_never_cached_from_a_lagging_replica(
    cluster, cached_api, redis_url, namespace
) -> None:
    result = await ingest_drill(cluster, cached_api, redis_url=redis_url, namespace=namespace, delay_s=DELAY_S)
    print(result.facts)
    facts = result.facts
    assert facts["old_answers_served"] > 0  # the replica was read within its lag (the race this drill is about)
    assert facts["stale_answers_cached"] == 0, result.bad
    assert facts["new_after_the_lag"]
    assert facts["lagging_stores_skipped"] > 0
    # The CDN purge of the paper waited for the replica.
    assert any("paper:2304.05376" in tags for tags, _ in facts["purges"])
    assert facts["purged_before_replica_had_it"] == 0


async def test_a_paused_replay_never_serves_an_answer_older_than_the_maximum_lag(cluster, cached_api) -> None:
    result = await paused_replay_drill(cluster, cached_api, max_lag_s=MAX_LAG_S)
    print(result.facts)
    assert result.facts["out_of_rotation_after_s"] is not None
    assert result.facts["answers_older_than_one_second"] > 0  # the paused replica answered while within the lag
    assert not result.bad, f"{len(result.bad)} answers older than {MAX_LAG_S} s: {max(result.bad)}"


async def test_a_killed_replica_fails_no_request_and_rejoins(cluster, plain_api) -> None:
    try:
        result = await replica_killed_drill(cluster, plain_api, phase_s=2.0, concurrency=6)
    finally:
        if not cluster.replica.running():
            cluster.replica.start()
    print(result.summary, result.facts)
    assert result.facts["failed_requests"] == 0, result.bad[:5]
    assert all(s["requests"] > 0 for s in result.summary.values())
    assert result.facts["replica_reads_before"] > 0
    assert result.facts["out_of_rotation_after_s"] is not None
    assert result.facts["back_in_rotation_after_s"] is not None
    assert result.facts["replica_reads_after_restart"] > 0


async def test_the_primary_restarted_recovers_by_itself(cluster, plain_api) -> None:
    result = await primary_restarted_drill(cluster, plain_api, phase_s=2.0, concurrency=6)
    print(result.summary, result.facts)
    assert not result.bad, result.bad[:5]  # data, or SERVICE_UNAVAILABLE/OVERLOADED 503 with Retry-After
    assert result.facts["ready_after_restart_s"] is not None
    assert result.facts["follow_after_restart"]
    assert result.facts["replica_usable_at_end"]
