"""Points per hour per client, counted in Redis and shared by every worker (GCRA, one Lua script).

A client (an API key, else the client address) has a budget of `limit` points an hour that refills
continuously: each point spent comes back `3600 / limit` seconds later, so `remaining` is what it may
spend now and `resetAt` is when the budget is full again. A request whose cost does not fit is refused
whole (nothing is spent, nothing runs). When Redis is unavailable each process counts on its own
(the same rule in memory): never no limit, never refusing everyone.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from redis.asyncio import Redis

from db.cache import keys
from db.cache.store import CacheStore, Unavailable
from edge.identity import Identity

PERIOD_S: Final = 3600
RESOURCE: Final = "graphql"
# Clients a process remembers while Redis is down (least recently seen forgotten first).
LOCAL_SUBJECTS: Final = 100_000

# KEYS[1] the client's theoretical arrival time (ms); ARGV points, limit, period (ms).
# Returns {allowed, now_ms, tat_ms}: tat is the new one when allowed, the unchanged one when refused.
_CHARGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local points = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + points * period / limit
if new_tat - now > period then
  return {0, now, math.floor(tat)}
end
if points > 0 then
  redis.call('SET', KEYS[1], string.format('%d', math.ceil(new_tat)), 'PX', math.ceil(new_tat - now) + 1000)
end
return {1, now, math.ceil(new_tat)}
"""


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    limit: int
    cost: int
    used: int
    remaining: int
    reset_at: int  # epoch seconds when the budget is full again
    retry_after: int  # seconds until `cost` fits (0 when allowed)

    def refusal(self) -> tuple[str, dict[str, int]]:
        """The RATE_LIMITED error's message and figures."""
        message = (
            f"This query costs {self.cost} points and {self.remaining} of {self.limit} remain this hour; "
            f"retry in {self.retry_after} s."
        )
        figures = {"cost": self.cost, "limit": self.limit, "remaining": self.remaining, "retryAfter": self.retry_after}
        return message, figures

    def headers(self) -> list[tuple[bytes, bytes]]:
        """GitHub's names."""
        return [
            (b"x-ratelimit-limit", str(self.limit).encode()),
            (b"x-ratelimit-remaining", str(self.remaining).encode()),
            (b"x-ratelimit-used", str(self.used).encode()),
            (b"x-ratelimit-reset", str(self.reset_at).encode()),
            (b"x-ratelimit-resource", RESOURCE.encode()),
        ]


def decide(*, allowed: bool, points: int, limit: int, now_ms: float, tat_ms: float) -> Decision:
    """The figures a client sees, from the state after the charge (or the unchanged one, if refused)."""
    period_ms = PERIOD_S * 1000
    interval = period_ms / limit
    used = min(limit, math.ceil(max(0.0, tat_ms - now_ms) / interval - 1e-9))
    retry = 0
    if not allowed:
        # The charge fits once the state has drained to `period - points * interval` ahead of now.
        retry = max(1, math.ceil((tat_ms + points * interval - period_ms - now_ms) / 1000))
    return Decision(
        allowed=allowed,
        limit=limit,
        cost=points,
        used=used,
        remaining=limit - used,
        reset_at=math.ceil(max(tat_ms, now_ms) / 1000),
        retry_after=retry,
    )


class LocalLimiter:
    """The same rule in one process's memory, for when Redis cannot be reached."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._tat: OrderedDict[str, float] = OrderedDict()

    def charge(self, subject: str, points: int, limit: int) -> Decision:
        now = self.clock() * 1000
        tat = max(self._tat.get(subject, now), now)
        new_tat = tat + points * PERIOD_S * 1000 / limit
        allowed = new_tat - now <= PERIOD_S * 1000
        if allowed and points > 0:
            self._tat[subject] = new_tat
            self._tat.move_to_end(subject)
            while len(self._tat) > LOCAL_SUBJECTS:
                self._tat.popitem(last=False)
        return decide(allowed=allowed, points=points, limit=limit, now_ms=now, tat_ms=new_tat if allowed else tat)


class RateLimiter:
    """One per process: Redis through the cache store's breaker, the local limiter behind it."""

    def __init__(self, store: CacheStore | None, *, local: LocalLimiter | None = None) -> None:
        self.store = store
        self.local = local or LocalLimiter()
        self._script = store.redis.register_script(_CHARGE) if store is not None and store.redis else None

    async def charge(self, subject: str, points: int, limit: int) -> Decision:
        points = max(0, points)
        if self.store is not None and self._script is not None:
            script = self._script
            key = keys.rate_limit(self.store.namespace, subject)

            async def run(r: Redis) -> object:
                return await script(keys=[key], args=[points, limit, PERIOD_S * 1000], client=r)

            got = await self.store.call(run)
            if not isinstance(got, Unavailable) and isinstance(got, list) and len(got) == 3:
                allowed, now_ms, tat_ms = (int(v) for v in got)
                return decide(allowed=bool(allowed), points=points, limit=limit, now_ms=now_ms, tat_ms=tat_ms)
        return self.local.charge(subject, points, limit)


@dataclass(frozen=True, slots=True)
class RateLimitPolicy:
    enabled: bool
    anonymous_points_per_hour: int
    key_points_per_hour: int

    def subject(self, identity: Identity) -> tuple[str, int]:
        """Whose budget a request spends, and its size: the key's, else the client address's."""
        key = identity.api_key
        if key is not None:
            return f"key:{key.id}", key.points_per_hour or self.key_points_per_hour
        return f"ip:{identity.client_ip}", self.anonymous_points_per_hour


class Budget:
    """One request's handle on its client's budget: charged once, when its cost is known."""

    def __init__(self, limiter: RateLimiter, policy: RateLimitPolicy, identity: Identity) -> None:
        self.limiter = limiter
        self.enabled = policy.enabled
        self.subject, self.limit = policy.subject(identity)
        self.decision: Decision | None = None

    async def charge(self, points: int) -> Decision:
        """Spend `points`; a refusal spends nothing. With limiting off, an unlimited decision."""
        if not self.enabled:
            self.decision = Decision(True, self.limit, points, 0, self.limit, int(time.time()), 0)
        else:
            self.decision = await self.limiter.charge(self.subject, points, self.limit)
        return self.decision
