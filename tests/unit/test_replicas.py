"""Reads on replicas, the parts without I/O: replica DSNs and their labels, the lag from the primary's samples, the
choice of a target, the writers' positions kept in memory, and the settings."""

from __future__ import annotations

import math
from typing import Any

import asyncpg
import pytest

from db.cache.positions import UNKNOWN, decode, encode
from db.pool import is_recovery_conflict
from db.replicas.dsn import BadDsn, parse_replica_dsn
from db.replicas.lag import PrimaryTimeline
from db.replicas.routing import ReplicaSet
from db.replicas.writers import ENTRY_OVERHEAD, WritePositions
from request_types.identity import ApiKey, Identity
from resolvers.context import Context
from settings import Settings, SettingsError, load_settings, split_dsns
from telemetry.metrics import DB_READS, REPLICA_FALLBACKS


@pytest.mark.parametrize(
    ("dsn", "label"),
    [
        ("postgresql://reader:s3cret@db-r1.internal:5433/wovepaper?sslmode=require", "db-r1.internal:5433/wovepaper"),
        ("postgres://db-r2/wovepaper", "db-r2:5432/wovepaper"),
        ("postgresql://app@10.0.0.7", "10.0.0.7:5432/app"),
        ("postgresql://u:p@[::1]:6543/w", "::1:6543/w"),
        ("postgresql://a:5432,b:5433/w", "a:5432,b:5433/w"),
        ("postgresql:///w?host=/run/postgresql&port=5434", "/run/postgresql:5434/w"),
        ("postgresql://h/w%20x", "h:5432/w x"),
    ],
)
def test_a_replica_is_named_host_port_database_never_with_its_password(dsn: str, label: str) -> None:
    parsed = parse_replica_dsn(dsn)
    assert parsed.label == label
    assert "s3cret" not in parsed.label and "reader" not in parsed.label


@pytest.mark.parametrize(
    ("dsn", "why"),
    [
        ("mysql://h/db", "must start with postgresql://"),
        ("db-r1:5432/wovepaper", "must start with postgresql://"),
        ("postgresql:///wovepaper", "names no host"),
        ("postgresql://user:secret@h:54x2/db", "is not a port number"),
        ("postgresql://h:70000/db", "is not a port number"),
    ],
)
def test_a_dsn_that_does_not_parse_is_refused_without_repeating_it(dsn: str, why: str) -> None:
    with pytest.raises(BadDsn, match=why) as refused:
        parse_replica_dsn(dsn)
    assert "secret" not in str(refused.value)


def test_the_list_splits_between_dsns_not_inside_a_multi_host_one() -> None:
    assert split_dsns(" postgresql://a:5432,b:5433/w , postgres://c/w,, ") == [
        "postgresql://a:5432,b:5433/w",
        "postgres://c/w",
    ]
    assert split_dsns("") == []


def test_settings_hold_writers_at_least_as_long_as_a_replica_may_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WOVEPAPER_REPLICA_MAX_LAG_S", "20")
    monkeypatch.setenv("WOVEPAPER_READ_YOUR_WRITES_S", "10")
    with pytest.raises(SettingsError, match="WOVEPAPER_READ_YOUR_WRITES_S .* must be at least WOVEPAPER_REPLICA_MAX"):
        load_settings()
    monkeypatch.setenv("WOVEPAPER_REPLICA_MAX_LAG_S", "61")
    monkeypatch.setenv("WOVEPAPER_READ_YOUR_WRITES_S", "120")
    with pytest.raises(SettingsError, match="WOVEPAPER_REPLICA_MAX_LAG_S is malformed"):
        load_settings()


def test_a_replica_is_as_old_as_the_newest_primary_position_it_has_replayed() -> None:
    timeline = PrimaryTimeline(window_s=10)
    for when, position in [(100.0, 1000), (100.5, 1000), (101.0, 1500), (101.5, 2000)]:
        timeline.sample(when, position)
    assert timeline.caught_at(2000) == 101.5  # caught up
    assert timeline.caught_at(5000) == 101.5  # replayed past the last sample: as fresh as it
    assert timeline.caught_at(1999) == 101.0
    assert timeline.caught_at(1000) == 100.5  # an idle primary: the latest time it was still there
    assert timeline.caught_at(999) is None  # behind every sample kept
    assert timeline.caught_at(None) is None
    timeline.sample(120.0, 2000)  # samples older than the window are forgotten
    assert timeline.caught_at(1500) is None and timeline.caught_at(2000) == 120.0


class _Pool:
    """A stand-in for a pool: choosing a target never touches it."""


def replica_set(count: int, *, max_lag_s: float = 10) -> ReplicaSet:
    async def never(dsn: str, on_lost: Any) -> Any:
        raise AssertionError("no pool is opened here")

    replicas = ReplicaSet(
        _Pool(),  # type: ignore[arg-type]
        [f"postgresql://r{n}:5432/w" for n in range(count)],
        open_pool=never,
        max_lag_s=max_lag_s,
        read_your_writes_s=30,
        cache=None,
        primary_dsn="postgresql://p/w",
    )
    for replica in replicas.replicas:
        replica.pool = _Pool()  # type: ignore[assignment]
        replica.healthy = True
        replica.caught_at = 100.0
        replica.replayed = 5000
    return replicas


def counted(metric: Any, label: str) -> float:
    return float(metric.labels(label)._value.get())


def test_reads_take_turns_among_replicas_in_the_rotation() -> None:
    replicas = replica_set(2)
    chosen = [replicas.choose(0, now=lambda: 101.0).label for _ in range(4)]
    assert chosen == ["r0:5432/w", "r1:5432/w", "r0:5432/w", "r1:5432/w"]
    target = replicas.choose(0, now=lambda: 101.0)
    assert target.is_replica and target.replayed == 5000


def test_a_writer_reads_from_a_replica_only_once_it_has_their_write() -> None:
    replicas = replica_set(2)
    replicas.replicas[0].replayed = 7000
    before = counted(REPLICA_FALLBACKS, "read_your_writes")
    assert {replicas.choose(6000, now=lambda: 101.0).label for _ in range(3)} == {"r0:5432/w"}
    assert replicas.choose(8000, now=lambda: 101.0).label == "primary"
    assert counted(REPLICA_FALLBACKS, "read_your_writes") == before + 1


def test_a_lagging_or_failed_replica_is_out_and_reads_go_to_the_primary() -> None:
    replicas = replica_set(1, max_lag_s=10)
    primary_reads = counted(DB_READS, "primary")
    lagging = counted(REPLICA_FALLBACKS, "lagging")
    assert replicas.choose(0, now=lambda: 110.0).is_replica  # exactly the maximum lag: still in
    assert replicas.choose(0, now=lambda: 110.01).label == "primary"
    assert counted(REPLICA_FALLBACKS, "lagging") == lagging + 1
    replicas.replicas[0].lost()  # a request lost its connection to it
    unavailable = counted(REPLICA_FALLBACKS, "unavailable")
    assert replicas.choose(0, now=lambda: 100.5).label == "primary"
    assert counted(REPLICA_FALLBACKS, "unavailable") == unavailable + 1
    assert counted(DB_READS, "primary") == primary_reads + 2
    assert replicas.usable_count() == 0
    assert "unavailable" in replicas.describe()


def test_a_dsn_that_does_not_parse_is_left_out_under_a_label_of_its_own(caplog: pytest.LogCaptureFixture) -> None:
    async def never(dsn: str, on_lost: Any) -> Any:
        raise AssertionError

    replicas = ReplicaSet(
        _Pool(),  # type: ignore[arg-type]
        ["postgresql://reader:hunter2@r1:99999/w", "postgresql://r2/w"],
        open_pool=never,
        max_lag_s=10,
        read_your_writes_s=30,
        cache=None,
        primary_dsn="postgresql://p/w",
    )
    assert [r.label for r in replicas.replicas] == ["invalid-dsn-1", "r2:5432/w"]
    assert "WOVEPAPER_DATABASE_REPLICA_URLS: replica 1 of 2 does not parse" in caplog.text
    assert "hunter2" not in caplog.text


def test_whose_writes_a_request_must_see() -> None:
    key = ApiKey(7, "site", "wpk_0000", 0)
    assert Identity("1.2.3.4").writer is None
    assert Identity("1.2.3.4", api_key=key).writer == "key:7"
    assert Identity("1.2.3.4", viewer_id="reader-9", api_key=key).writer == "viewer:reader-9"


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_writers_position_is_kept_in_memory_for_its_ttl_and_only_raised() -> None:
    clock = Clock()
    writers = WritePositions(None, 30, clock=clock)
    assert await writers.position("viewer:a") == 0
    await writers.record("viewer:a", 5000)
    await writers.record("viewer:a", 4000)  # an earlier write finishing later never lowers it
    assert await writers.position("viewer:a") == 5000
    assert await writers.position("viewer:b") == 0
    clock.now += 30.5
    assert await writers.position("viewer:a") == 0


async def test_the_writers_memory_is_bounded_in_bytes() -> None:
    writers = WritePositions(None, 30, max_bytes=10 * (ENTRY_OVERHEAD + 10))
    for n in range(100):
        await writers.record(f"viewer:{n:03d}", n + 1)  # 10 characters each
    assert await writers.position("viewer:099") == 100
    assert await writers.position("viewer:000") == 0  # the oldest forgotten
    assert len(writers._memory) == 10


def test_positions_are_stored_in_an_order_redis_compares_as_strings() -> None:
    assert encode(0x16B3748) == b"00000000016b3748"
    assert encode(UNKNOWN) == b"ffffffffffffffff"
    assert sorted([encode(10), encode(9), encode(2**40)]) == [encode(9), encode(10), encode(2**40)]
    assert decode(encode(123456789)) == 123456789
    assert decode(None) == 0
    assert decode(b"garbage!") == UNKNOWN
    assert math.isclose(float(decode(encode(2**52))), 2.0**52)


def test_a_recovery_conflict_is_the_replicas_not_the_query() -> None:
    assert is_recovery_conflict(asyncpg.SerializationError("canceling statement due to conflict with recovery"))
    assert not is_recovery_conflict(asyncpg.SerializationError("could not serialize access"))
    assert not is_recovery_conflict(ValueError("conflict with recovery"))


async def test_an_operation_run_again_after_its_replica_failed_reads_from_the_primary() -> None:
    replicas = replica_set(1)
    replicas.replicas[0].caught_at = math.inf  # never too old, whatever the clock
    primary = replicas.primary.pool
    ctx = Context.create(primary, Settings(), replicas=replicas, identity=Identity("1.2.3.4"))
    await ctx.route(write=False)
    assert ctx.pool is replicas.replicas[0].pool and ctx.loaders._pool is ctx.pool
    ctx.renew()  # the run failed (a lost connection, a recovery conflict): it runs again ...
    await ctx.route(write=False)
    assert ctx.pool is primary and ctx.loaders._pool is primary  # ... on the primary
    writer = Context.create(primary, Settings(), replicas=replicas, identity=Identity("1.2.3.4"))
    await writer.route(write=True)
    assert writer.pool is primary and writer.write_pool is primary
