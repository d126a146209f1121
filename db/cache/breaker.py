"""A small circuit breaker for the Redis cache, built for one asyncio event loop.

After `threshold` consecutive failures it opens: callers skip Redis entirely for `reset_after_s`.
Then it lets one probe through (half-open); a success closes it, a failure opens it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import IntEnum


class BreakerState(IntEnum):
    # Values are what /metrics exports.
    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class CircuitBreaker:
    def __init__(
        self,
        *,
        threshold: int = 5,
        reset_after_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1 or reset_after_s <= 0:
            raise ValueError("threshold must be >= 1 and reset_after_s > 0")
        self.threshold = threshold
        self.reset_after_s = reset_after_s
        self._clock = clock
        self._failures = 0
        self._opened_at: float | None = None
        self._probing = False
        self.opens = 0

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at >= self.reset_after_s:
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def allow(self) -> bool:
        """Whether a call may go to Redis now. In half-open state only one probe at a time."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return True
        return False

    def success(self) -> None:
        self._failures = 0
        self._opened_at = None
        self._probing = False

    def failure(self) -> None:
        self._probing = False
        if self._opened_at is not None:
            # A failed probe: stay open for another full period.
            self._opened_at = self._clock()
            return
        self._failures += 1
        if self._failures >= self.threshold:
            self._opened_at = self._clock()
            self.opens += 1
