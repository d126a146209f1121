"""The Redis cache's circuit breaker, built for one asyncio event loop.

It opens on a failure rate, not on a streak: the window is the last `window_calls` calls that ended within
`window_s` seconds; once it holds at least `min_calls` of them and `failure_rate` of them failed, callers
skip Redis for `reset_after_s`. A few slow answers among good ones (a Redis that just restarted, a busy
moment) leave it closed; a Redis that stopped answering opens it after about `window_calls * failure_rate`
failed calls, however busy the process was before.
Then one probe goes through at a time (half-open): a success closes it, a failure opens it again, and a
probe that ends neither way (cancelled with its request) hands its turn to the next caller. The first probe goes
`first_probe_s` after opening and each failed one doubles the wait, up to `reset_after_s`: a failover (a replica
promoted within seconds) has the cache back within seconds of the new primary, a Redis that stays away costs one
probe every `reset_after_s`.

purgatory (the library) counts consecutive failures only, so this stays ours.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from enum import IntEnum


class BreakerState(IntEnum):
    # Values are what /metrics exports.
    CLOSED = 0
    OPEN = 1
    HALF_OPEN = 2


class Permit:
    """One call's pass through the breaker; report its outcome, then `release()` it (in `finally`)."""

    __slots__ = ("_breaker", "_probe", "_done")

    def __init__(self, breaker: CircuitBreaker, *, probe: bool) -> None:
        self._breaker = breaker
        self._probe = probe
        self._done = False

    def success(self) -> None:
        if not self._done:
            self._done = True
            self._breaker._record(ok=True, probe=self._probe)

    def failure(self) -> None:
        if not self._done:
            self._done = True
            self._breaker._record(ok=False, probe=self._probe)

    def release(self) -> None:
        """Ends the permit; a probe that reported nothing (cancelled, or ended by a local error) lets the next
        caller probe instead of keeping the breaker half-open for good."""
        if not self._done:
            self._done = True
            if self._probe:
                self._breaker._probing = False


class CircuitBreaker:
    def __init__(
        self,
        *,
        failure_rate: float = 0.5,
        min_calls: int = 10,
        window_calls: int = 20,
        window_s: float = 10.0,
        reset_after_s: float = 10.0,
        first_probe_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (
            not 0 < failure_rate <= 1
            or not 1 <= min_calls <= window_calls
            or window_s <= 0
            or reset_after_s <= 0
            or first_probe_s <= 0
        ):
            raise ValueError(
                "need 0 < failure_rate <= 1, 1 <= min_calls <= window_calls, and window_s, reset_after_s and "
                "first_probe_s > 0"
            )
        self.failure_rate = failure_rate
        self.min_calls = min_calls
        self.window_s = window_s
        self.reset_after_s = reset_after_s
        self.first_probe_s = min(first_probe_s, reset_after_s)
        self._clock = clock
        # Probes that failed since the breaker opened: each doubles the wait before the next.
        self._failed_probes = 0
        # (ended at, ok), oldest first
        self._calls: deque[tuple[float, bool]] = deque(maxlen=window_calls)
        self._opened_at: float | None = None
        self._probing = False
        self.opens = 0

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return BreakerState.CLOSED
        if self._clock() - self._opened_at >= self.probe_after_s():
            return BreakerState.HALF_OPEN
        return BreakerState.OPEN

    def probe_after_s(self) -> float:
        """How long after opening (or after the last failed probe) the next probe goes."""
        return float(min(self.reset_after_s, self.first_probe_s * 2**self._failed_probes))

    def allow(self) -> Permit | None:
        """A permit for a call to Redis now, or None: skip Redis. In half-open state one probe at a time."""
        state = self.state
        if state is BreakerState.CLOSED:
            return Permit(self, probe=False)
        if state is BreakerState.HALF_OPEN and not self._probing:
            self._probing = True
            return Permit(self, probe=True)
        return None

    def window(self) -> tuple[int, int]:
        """(calls, failures) in the window."""
        horizon = self._clock() - self.window_s
        while self._calls and self._calls[0][0] < horizon:
            self._calls.popleft()
        return len(self._calls), sum(1 for _, ok in self._calls if not ok)

    def _record(self, *, ok: bool, probe: bool) -> None:
        if probe:
            self._probing = False
            if ok:
                self._opened_at = None
                self._failed_probes = 0
                self._calls.clear()
            else:
                # A failed probe: stay open, twice as long as before (at most `reset_after_s`).
                self._opened_at = self._clock()
                self._failed_probes += 1
            return
        if self._opened_at is not None:
            return  # a call that started before the breaker opened: already accounted for
        self._calls.append((self._clock(), ok))
        if not ok:
            calls, failures = self.window()
            if calls >= self.min_calls and failures >= self.failure_rate * calls:
                self._opened_at = self._clock()
                self._failed_probes = 0
                self._calls.clear()
                self.opens += 1
