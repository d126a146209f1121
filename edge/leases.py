"""A lease: points of one busy client taken from Redis a few requests' worth at a time, then spent by the process
that holds them without a round trip (edge/ratelimit.py takes, tops up and gives them back)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from edge.gcra import PERIOD_MS, decide
from request_types.rate import Decision

# A lease: at most this share of a client's budget, and this many times the charge that takes it, held by one
# process for at most LEASE_S.
LEASE_SHARE: Final = 0.01
LEASE_CHARGES: Final = 256
LEASE_S: Final = 1.0


@dataclass(slots=True)
class Lease:
    """Points of one client taken from Redis and not spent yet, with the latest state Redis gave for that client."""

    key: str
    limit: int
    size: int  # the points it is topped up to
    held: int
    tat_ms: float  # Redis's latest state (what this lease holds included)
    redis_now_ms: float  # Redis's clock then
    seen: float  # this process's monotonic clock then
    taken: float  # this process's monotonic clock when points were last added: they go back LEASE_S after

    def fresh(self) -> bool:
        return time.monotonic() - self.taken < LEASE_S

    def charge(self, points: int) -> Decision:
        """Spends `points` of the held ones: the figures as Redis would give them, had each charge gone there."""
        self.held -= points
        now_ms = self.redis_now_ms + (time.monotonic() - self.seen) * 1000
        return decide(allowed=True, points=points, limit=self.limit, now_ms=now_ms, tat_ms=self.spent_ms())

    def spent_ms(self) -> float:
        """Redis's state less what this lease holds: what has been spent."""
        return self.tat_ms - self.held * PERIOD_MS / self.limit

    def update(self, leased: int, tat_ms: int, now_ms: int) -> None:
        """A later answer of Redis for this client, with the points it leased besides."""
        self.tat_ms, self.redis_now_ms, self.seen = tat_ms, now_ms, time.monotonic()
        if leased:
            self.held += leased
            self.taken = self.seen


def lease_size(points: int, limit: int) -> int:
    """The points a charge of `points` asks to hold besides: none for a free charge or a budget too small to share."""
    return min(int(limit * LEASE_SHARE), LEASE_CHARGES * points)
