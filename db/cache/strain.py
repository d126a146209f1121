"""The site's strain, told to the ingest through Redis.

An API process whose event loop runs late, or whose requests wait for a database connection, marks the site
strained for a moment (`StrainReporter`, fed by telemetry/loop_lag.py), and renews the mark while it stays so. The
harvest and the enrichment ask (`strained`) between their writes and wait while it holds (ingest/pacing.py): what a
write drops from the cache the site recomputes, and on a host the two share, the next write made during that
recomputation is what turns a busy second into refused requests. Any process of any host can mark it; the ingest
reads one key. A Redis that cannot answer says nothing is strained: the ingest never stops for a fault of Redis.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from typing import Final

from db.cache import keys
from db.cache.breaker import BreakerState
from db.cache.client import REDIS_ERRORS
from db.cache.guarded import GuardedRedis, Unavailable
from telemetry.metrics import SITE_STRAINED

# How late a timer may run before the process counts as strained: tens of milliseconds is a worker near its CPU
# (telemetry/loop_lag.py); a request making four round trips pays it four times.
LATE_S: Final = 0.1
# How long a mark holds; a strained process renews it at most every RENEW_S.
HOLD_MS: Final = 1000
RENEW_S: Final = 0.25


class StrainReporter:
    """One per API process: `sample(late_s)` with each lateness the loop watcher measures; `waiting()` counts the
    requests waiting for a database connection."""

    def __init__(self, cache: GuardedRedis, namespace: str, waiting: Callable[[], int]) -> None:
        self._cache = cache
        self._key = keys.strain(namespace)
        self._waiting = waiting
        self._marked_at = -RENEW_S
        self._who = f"{socket.gethostname()}:{os.getpid()}"
        self._tasks: set[asyncio.Task[None]] = set()
        self.marks = 0

    def sample(self, late_s: float) -> None:
        waiting = self._waiting()
        if late_s < LATE_S and waiting == 0:
            return
        now = time.monotonic()
        if now - self._marked_at < RENEW_S:
            return
        self._marked_at = now
        why = f"{self._who}: loop {late_s * 1000:.0f} ms late, {waiting} waiting for a connection"
        task = asyncio.get_running_loop().create_task(self._mark(why))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Until the marks in flight are written (or given up)."""
        await asyncio.gather(*self._tasks)

    async def _mark(self, why: str) -> None:
        # A background write kept out of the breaker and the counters (which judge the calls requests make); a mark
        # that fails is tried again with the next strained sample.
        redis = self._cache.redis
        if redis is None or self._cache.breaker.state is not BreakerState.CLOSED:
            return
        try:
            async with asyncio.timeout(self._cache.timeout_s * 2):
                await redis.set(self._key, why.encode(), px=HOLD_MS)
        except (*REDIS_ERRORS, TimeoutError):
            return
        self.marks += 1
        SITE_STRAINED.inc()


async def strained(cache: GuardedRedis, namespace: str) -> str | None:
    """Why the site is strained (which process, how), or None: not strained, or Redis cannot say."""
    key = keys.strain(namespace)
    got = await cache.call(lambda redis: redis.get(key), round_trips=1)
    if isinstance(got, Unavailable) or got is None:
        return None
    return got.decode() if isinstance(got, bytes) else str(got)
