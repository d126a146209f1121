"""The rate limit's rule (GCRA): what a charge decides and the figures a client sees, and the same rule in one
process's memory for when Redis cannot be reached (edge/ratelimit.py applies it, in Redis, for every worker)."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from edge.errors import EdgeError
from request_types.rate import Decision

PERIOD_S: Final = 3600
PERIOD_MS: Final = PERIOD_S * 1000

# Clients a process remembers while Redis is down (least recently seen forgotten first).
LOCAL_SUBJECTS: Final = 100_000


def rate_limited(decision: Decision) -> EdgeError:
    """The 429 answering a charge the budget refused, before GraphQL runs."""
    message, figures = decision.refusal()
    return EdgeError(429, "RATE_LIMITED", message, headers={"retry-after": str(decision.retry_after)}, **figures)


def decide(*, allowed: bool, points: int, limit: int, now_ms: float, tat_ms: float) -> Decision:
    """The figures a client sees, from the state after the charge (or the unchanged one, if refused)."""
    interval = PERIOD_MS / limit
    # Redis answers the state in whole milliseconds, rounded up (it keeps it exact): less than one over what was spent.
    ahead = tat_ms - now_ms - 1
    used = 0 if ahead <= 0 else min(limit, math.ceil(ahead / interval))
    retry = 0
    if not allowed:
        # The charge fits once the state has drained to `period - points * interval` ahead of now.
        retry = max(1, math.ceil((tat_ms + points * interval - PERIOD_MS - now_ms) / 1000))
    reset_at = math.ceil((tat_ms if tat_ms > now_ms else now_ms) / 1000)
    return Decision(allowed, limit, points, used, limit - used, reset_at, retry)


class LocalLimiter:
    """The same rule in one process's memory, for when Redis cannot be reached."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._tat: OrderedDict[str, float] = OrderedDict()

    def charge(self, subject: str, points: int, limit: int) -> Decision:
        now = self.clock() * 1000
        tat = max(self._tat.get(subject, now), now)
        new_tat = tat + points * PERIOD_MS / limit
        allowed = new_tat - now <= PERIOD_MS
        if allowed and points > 0:
            self._tat[subject] = new_tat
            self._tat.move_to_end(subject)
            while len(self._tat) > LOCAL_SUBJECTS:
                self._tat.popitem(last=False)
        return decide(allowed=allowed, points=points, limit=limit, now_ms=now, tat_ms=new_tat if allowed else tat)

    def give_back(self, subject: str, points: int, limit: int) -> None:
        tat = self._tat.get(subject)
        if tat is not None:
            self._tat[subject] = max(self.clock() * 1000, tat - points * PERIOD_MS / limit)
