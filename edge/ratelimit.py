"""Points per hour per client, counted in Redis and shared by every worker (GCRA, one Lua script).

A client (an API key, else the client address) has a budget of `limit` points an hour that refills
continuously: each point spent comes back `3600 / limit` seconds later, so `remaining` is what it may
spend now and `resetAt` is when the budget is full again. A request whose cost does not fit is refused
whole (nothing is spent, nothing runs). When Redis is unavailable each process counts on its own
(the same rule in memory): never no limit, never refusing everyone.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from redis.asyncio import Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import NoScriptError

from db.cache import keys
from db.cache.store import CacheStore, Unavailable
from edge.identity import Identity

PERIOD_S: Final = 3600
RESOURCE: Final = "graphql"
# Clients a process remembers while Redis is down (least recently seen forgotten first).
LOCAL_SUBJECTS: Final = 100_000

# Charges of one batch, in order: KEYS[i] the i-th client's theoretical arrival time (ms); ARGV[1] the period (ms),
# then points and limit of each charge. Returns {allowed, now_ms, tat_ms} for each: tat is the new one when
# allowed, the unchanged one when refused. One clock for the batch; a client charged twice sees its first charge.
_CHARGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local points = tonumber(ARGV[2 * i])
  local limit = tonumber(ARGV[2 * i + 1])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local new_tat = tat + points * period / limit
  if new_tat - now > period then
    out[#out + 1] = 0
    out[#out + 1] = now
    out[#out + 1] = math.floor(tat)
  else
    if points > 0 then
      redis.call('SET', KEYS[i], string.format('%d', math.ceil(new_tat)), 'PX', math.ceil(new_tat - now) + 1000)
    end
    out[#out + 1] = 1
    out[#out + 1] = now
    out[#out + 1] = math.ceil(new_tat)
  end
end
return out
"""
_CHARGE_SHA: Final = hashlib.sha1(_CHARGE.encode()).hexdigest()
# Most charges sent in one script call.
MAX_BATCH: Final = 256


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
    """One per process: Redis through the cache store's breaker, the local limiter behind it.

    Charges go to Redis in batches, one script call at a time: those made while a call is out wait for it and go
    together in the next one. Under load a request so costs a share of a round trip, not one; each charge is still
    decided in Redis, in order, so several workers share a budget exactly."""

    def __init__(self, store: CacheStore | None, *, local: LocalLimiter | None = None) -> None:
        self.store = store
        self.local = local or LocalLimiter()
        # A connection of its own, outside the client's pool: the batches take turns on it, so it needs no pool,
        # and a command on it costs half what one through the client does. No socket timeout of its own (each
        # read would start a task): the store bounds the whole call, and a call cut short closes the connection.
        self._conn: AbstractConnection | None = None
        if store is not None and store.redis is not None:
            pool = store.redis.connection_pool
            self._conn = pool.connection_class(**{**pool.connection_kwargs, "socket_timeout": None})
        self._pending: list[tuple[str, int, int, asyncio.Future[tuple[int, int, int] | None]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def charge(self, subject: str, points: int, limit: int) -> Decision:
        points = max(0, points)
        if self.store is not None and self._conn is not None:
            future: asyncio.Future[tuple[int, int, int] | None] = asyncio.get_running_loop().create_future()
            self._pending.append((keys.rate_limit(self.store.namespace, subject), points, limit, future))
            if self._sender is None:
                # A task of its own: a request cancelled while waiting cancels no batch.
                self._sender = asyncio.get_running_loop().create_task(self._send_batches())
            got = await future
            if got is not None:
                allowed, now_ms, tat_ms = got
                return decide(allowed=bool(allowed), points=points, limit=limit, now_ms=now_ms, tat_ms=tat_ms)
        return self.local.charge(subject, points, limit)

    async def _send_batches(self) -> None:
        batch: list[tuple[str, int, int, asyncio.Future[tuple[int, int, int] | None]]] = []
        try:
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                results = await self._run(batch)
                for i, (*_, future) in enumerate(batch):
                    if not future.done():
                        future.set_result(results[i] if results is not None else None)
        finally:
            self._sender = None
            # Cut short (the process stopping): whoever still waits counts locally.
            for *_, future in [*batch, *self._pending]:
                if not future.done():
                    future.set_result(None)
            self._pending = []

    async def _run(
        self, batch: list[tuple[str, int, int, asyncio.Future[tuple[int, int, int] | None]]]
    ) -> list[tuple[int, int, int]] | None:
        """Each charge's (allowed, now_ms, tat_ms), or None when Redis did not answer."""
        assert self.store is not None and self._conn is not None
        conn = self._conn
        keys_ = [key for key, *_ in batch]
        args: list[int] = [PERIOD_S * 1000]
        for _, points, limit, _ in batch:
            args += (points, limit)

        async def run(_: Redis) -> object:
            try:
                return await _evaluate(conn, keys_, args)
            except BaseException:
                # Its reply may still come: never to be read as the next call's.
                await conn.disconnect(nowait=True)
                raise

        got = await self.store.call(run)
        if isinstance(got, Unavailable) or not isinstance(got, list) or len(got) != 3 * len(batch):
            return None
        values = [int(v) for v in got]
        return [(values[i], values[i + 1], values[i + 2]) for i in range(0, len(values), 3)]


    async def aclose(self) -> None:
        if self._conn is not None:
            await self._conn.disconnect()


async def _evaluate(conn: AbstractConnection, keys_: list[str], args: list[int]) -> object:
    """The charge script by its hash; sent whole when Redis does not know it (a restart, SCRIPT FLUSH)."""
    await conn.send_command("EVALSHA", _CHARGE_SHA, len(keys_), *keys_, *args, check_health=False)
    try:
        return await conn.read_response()
    except NoScriptError:
        await conn.send_command("EVAL", _CHARGE, len(keys_), *keys_, *args, check_health=False)
        return await conn.read_response()


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
