"""The Redis breaker opens on a failure rate over a window, probes one call at a time, and never stays
half-open because a probe was cancelled."""

from __future__ import annotations

import asyncio

import pytest

from db.cache.breaker import BreakerState, CircuitBreaker
from db.cache.store import CacheStore, Unavailable


def _clocked(**kwargs: float) -> tuple[CircuitBreaker, list[float]]:
    now = [1000.0]
    return CircuitBreaker(clock=lambda: now[0], **kwargs), now  # type: ignore[arg-type]


def _calls(b: CircuitBreaker, outcomes: str) -> None:
    for o in outcomes:
        permit = b.allow()
        assert permit is not None
        permit.success() if o == "." else permit.failure()
        permit.release()


def test_a_streak_of_slow_answers_among_many_good_ones_leaves_it_closed() -> None:
    b, now = _clocked(failure_rate=0.5, min_calls=10, window_s=10, reset_after_s=10)
    _calls(b, "." * 20)
    _calls(b, "x" * 5)  # five timeouts in a row: the old rule opened here
    assert b.state is BreakerState.CLOSED
    assert b.window() == (20, 5)  # the last 20 calls: a quarter failed


def test_opens_at_the_failure_rate_once_enough_calls_ended() -> None:
    b, now = _clocked(failure_rate=0.5, min_calls=10, window_s=10, reset_after_s=10)
    _calls(b, "xxxx")  # too few calls to judge
    assert b.state is BreakerState.CLOSED
    _calls(b, "....x")
    assert b.state is BreakerState.CLOSED  # 5 of 9
    _calls(b, "x")
    assert b.state is BreakerState.OPEN and b.opens == 1 and b.allow() is None


def test_old_outcomes_leave_the_window() -> None:
    b, now = _clocked(failure_rate=0.5, min_calls=4, window_s=10, reset_after_s=10)
    _calls(b, "xxx")
    now[0] += 11
    _calls(b, "..x")
    assert b.state is BreakerState.CLOSED and b.window() == (3, 1)


def test_half_open_lets_one_probe_through_and_a_success_closes() -> None:
    b, now = _clocked(failure_rate=0.5, min_calls=2, window_s=10, reset_after_s=10, first_probe_s=10)
    _calls(b, "xx")
    assert b.state is BreakerState.OPEN
    now[0] += 10
    assert b.state is BreakerState.HALF_OPEN
    probe = b.allow()
    assert probe is not None and b.allow() is None  # one probe at a time
    probe.failure()
    probe.release()
    assert b.state is BreakerState.OPEN and b.opens == 1  # reopened for a full period, not a new opening
    now[0] += 9
    assert b.allow() is None
    now[0] += 1
    probe = b.allow()
    assert probe is not None
    probe.success()
    probe.release()
    assert b.state is BreakerState.CLOSED and b.window() == (0, 0)


def test_probes_come_soon_after_opening_then_back_off_to_the_reset_period() -> None:
    """A failover promotes a replica within seconds: the first probe goes after 1 s, each failed one doubles the wait
    up to the reset period, and a breaker that opens again starts over."""
    b, now = _clocked(failure_rate=0.5, min_calls=2, window_s=10, reset_after_s=10)
    _calls(b, "xx")
    waits = []
    for _ in range(6):
        opened = now[0]
        while b.state is BreakerState.OPEN:
            now[0] += 0.25
        waits.append(now[0] - opened)
        probe = b.allow()
        assert probe is not None
        probe.failure()
        probe.release()
    assert waits == [1, 2, 4, 8, 10, 10]
    now[0] += 10
    probe = b.allow()
    assert probe is not None
    probe.success()
    probe.release()
    assert b.state is BreakerState.CLOSED
    _calls(b, "xx")
    assert b.state is BreakerState.OPEN and b.probe_after_s() == 1


def test_a_probe_that_ends_without_an_outcome_hands_its_turn_on() -> None:
    b, now = _clocked(failure_rate=0.5, min_calls=2, window_s=10, reset_after_s=10)
    _calls(b, "xx")
    now[0] += 10
    probe = b.allow()
    assert probe is not None
    probe.release()  # cancelled: neither success nor failure
    assert b.state is BreakerState.HALF_OPEN
    assert b.allow() is not None


async def test_a_cancelled_probe_does_not_wedge_the_cache() -> None:
    """graphql-core cancels sibling fields when a non-null field fails, and the operation timeout cancels too:
    a request cancelled while its Redis call is the half-open probe must not leave both caches off."""
    b, now = _clocked(failure_rate=0.5, min_calls=2, window_s=10, reset_after_s=10)
    store = CacheStore(object(), namespace="t", ttl_s=60, breaker=b)  # type: ignore[arg-type]
    _calls(b, "xx")
    now[0] += 10
    started = asyncio.Event()

    async def hangs(_redis: object) -> str:
        started.set()
        await asyncio.sleep(3600)
        return "never"

    task = asyncio.create_task(store.call(hangs))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert b.state is BreakerState.HALF_OPEN

    async def answers(_redis: object) -> str:
        return "pong"

    assert await store.call(answers) == "pong"  # the next call probes, and closes the breaker
    assert b.state is BreakerState.CLOSED


async def test_a_busy_client_pool_is_not_a_redis_failure() -> None:
    from redis.exceptions import ConnectionError as RedisConnectionError

    b, now = _clocked(failure_rate=0.5, min_calls=2, window_s=10, reset_after_s=10)
    store = CacheStore(object(), namespace="t", ttl_s=60, breaker=b)  # type: ignore[arg-type]

    async def exhausted(_redis: object) -> str:
        raise RedisConnectionError("No connection available.")

    for _ in range(5):
        assert isinstance(await store.call(exhausted), Unavailable)
    assert b.state is BreakerState.CLOSED and b.window() == (0, 0)
    assert store.metrics.saturated == 5 and store.metrics.errors == 0
