"""Redis calls through the circuit breaker, each bounded in time: an answer, or `Unavailable` and PostgreSQL.

Every call has a short timeout and no client-side retry; after a few failures the breaker opens and callers go
straight to PostgreSQL until Redis answers a probe. Within a request, once one call failed or a wait ran out, the
request asks Redis for nothing more (db/cache/allowance.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import MaxConnectionsError

from db.cache import allowance
from db.cache.breaker import CircuitBreaker
from db.cache.client import REDIS_ERRORS, RedisClient
from db.cache.metrics import CacheMetrics
from telemetry.metrics import BREAKER_OPENS, BREAKER_STATE, REDIS_CONFIGURED

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("db.cache.store")


class Unavailable:
    """Redis was not asked or did not answer: the caller falls back to PostgreSQL. `failed`: it was asked and
    failed or ran out of time (the rest of the request then goes without it, db/cache/allowance.py)."""

    __slots__ = ("failed",)

    def __init__(self, *, failed: bool = False) -> None:
        self.failed = failed


UNAVAILABLE: Final = Unavailable()
FAILED: Final = Unavailable(failed=True)


class GuardedRedis:
    """A client (None: no Redis) with its breaker, timeout and counters; the cache (db/cache/store.py) is one."""

    def __init__(
        self,
        redis: RedisClient | None,
        *,
        timeout_s: float = 0.25,
        breaker: CircuitBreaker | None = None,
        metrics: CacheMetrics | None = None,
    ) -> None:
        self.redis = redis
        self.timeout_s = timeout_s
        self.breaker = breaker or CircuitBreaker()
        self.metrics = metrics or CacheMetrics()
        self._breaker_reported = -1

    async def call(self, op: Callable[[RedisClient], Awaitable[R]], *, round_trips: int = 2) -> R | Unavailable:
        """Run one Redis operation through the breaker; UNAVAILABLE instead of any Redis failure. Within a request,
        nothing once a call of the request failed, else bounded by the Redis timeout; outside one (the ingest),
        by `round_trips` timeouts."""
        if self.redis is None or allowance.spent():
            return UNAVAILABLE
        in_request = allowance.current_allowance() is not None
        result = await self._call(op, self.timeout_s if in_request else self.timeout_s * round_trips)
        if isinstance(result, Unavailable) and result.failed:
            allowance.note_failure(timed_out=False)
        return result

    async def call_shared(self, op: Callable[[RedisClient], Awaitable[R]]) -> R | Unavailable:
        """Run one Redis operation that serves many requests (a batch): through the breaker, bounded by twice the
        timeout, whatever the request that happened to start it may still wait."""
        return await self._call(op, self.timeout_s * 2)

    async def _call(self, op: Callable[[RedisClient], Awaitable[R]], limit_s: float) -> R | Unavailable:
        redis = self.redis
        if redis is None:
            return UNAVAILABLE
        permit = self.breaker.allow()
        if permit is None:
            self.metrics.short_circuits += 1
            return UNAVAILABLE
        opens = self.breaker.opens
        self.metrics.calls += 1
        try:
            # The socket timeout bounds each read; this bounds the whole call (pool wait + connect + command).
            async with asyncio.timeout(limit_s):
                result = await op(redis)
        except (*REDIS_ERRORS, TimeoutError) as exc:
            if _pool_exhausted(exc):
                # Our own pool was busy: Redis itself is fine, so the breaker is not told.
                self.metrics.saturated += 1
                return UNAVAILABLE
            permit.failure()
            self.metrics.errors += 1
            log.warning("redis unavailable: %s: %s", type(exc).__name__, exc)
            return FAILED
        else:
            permit.success()
            return result
        finally:
            permit.release()
            if self.breaker.opens != opens:
                BREAKER_OPENS.inc(self.breaker.opens - opens)
                log.warning("redis circuit breaker opened: answering from PostgreSQL")
            self._report_breaker()

    async def wait(self, future: asyncio.Future[T]) -> T | Unavailable:
        """A request's wait for what a batch brings: at most the Redis timeout (the future is cancelled after it),
        and a failure or a wait that ran out leaves the rest of the request without Redis."""
        try:
            async with asyncio.timeout(self.timeout_s):
                result = await future
        except TimeoutError:
            allowance.note_failure(timed_out=True)
            return FAILED
        if isinstance(result, Unavailable) and result.failed:
            allowance.note_failure(timed_out=False)
        return result

    def report(self) -> None:
        """Export the counters, the breaker's state and whether Redis is configured to the metrics."""
        self.metrics.fold()
        self._report_breaker()
        REDIS_CONFIGURED.set(int(self.redis is not None))

    def _report_breaker(self) -> None:
        """The breaker's state to its gauge when it moved (with several workers, the gauge a scrape reads of this
        one). The counters reach theirs by their own fold, within FOLD_AFTER_S: not on every call."""
        state = int(self.breaker.state)
        if state != self._breaker_reported:
            self._breaker_reported = state
            BREAKER_STATE.set(state)


def _pool_exhausted(exc: BaseException) -> bool:
    # BlockingConnectionPool's wait ran out ("No connection available."), or a non-blocking pool was full.
    return isinstance(exc, MaxConnectionsError) or (
        isinstance(exc, RedisConnectionError) and str(exc) == "No connection available."
    )
