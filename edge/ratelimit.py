"""Points per hour per client, counted in Redis and shared by every worker (GCRA, one Lua script).

A client (an API key, else the client address) has a budget of `limit` points an hour that refills
continuously: each point spent comes back `3600 / limit` seconds later, so `remaining` is what it may
spend now and `resetAt` is when the budget is full again. A request whose cost does not fit is refused
whole (nothing is spent, nothing runs). When Redis is unavailable each process counts on its own
(the same rule in memory): never no limit, never refusing everyone.

A busy client's points (one charged again within LEASE_S) are taken from Redis a few requests' worth at a time (a
lease), then spent by the process that holds them without a round trip, and topped up once half spent: at most
LEASE_SHARE of the budget per process, only while a tenth of it would still be left in Redis, and what a lease has
not spent LEASE_S after points were last added goes back. Points leave Redis before they are spent, so no client
ever spends more than its budget, whichever workers answer it; near the end of a budget every charge goes to Redis.

On one server or a Sentinel's primary the batches go over a connection of their own; on a Cluster each client's state
is under its own hash tag (db/cache/keys.py), so a batch goes as one script call per slot, in one pipeline. A
request waits for its charge at most the Redis timeout, then counts on its own (db/cache/allowance.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass
from typing import Final

from redis.asyncio.cluster import RedisCluster
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import NoScriptError

from db.cache import allowance, keys
from db.cache.client import RedisClient, slot
from db.cache.scripts import Script
from db.cache.store import CacheStore, Unavailable
from edge.gcra import LOCAL_SUBJECTS, PERIOD_MS, LocalLimiter, decide
from edge.leases import LEASE_S, Lease, lease_size
from request_types.identity import Identity
from request_types.rate import Decision

# Charges of one batch, in order: KEYS[i] the i-th client's theoretical arrival time (ms, kept exact: rounding it on
# every write would add up), ARGV[1] the period (ms), then points, limit and lease of each charge. Returns {allowed,
# now_ms, tat_ms, leased} for each, in whole ms (tat rounded up): tat is the new one when allowed (with the points
# leased), the unchanged one when refused; the lease is granted only if a tenth of the budget is left after it.
# Negative points give points back (never below a full budget). One clock for the batch; a client charged twice sees
# its first charge.
_CHARGE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local period = tonumber(ARGV[1])
local out = {}
for i = 1, #KEYS do
  local points = tonumber(ARGV[3 * i - 1])
  local limit = tonumber(ARGV[3 * i])
  local lease = tonumber(ARGV[3 * i + 1])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0')
  if tat < now then tat = now end
  local new_tat = tat + points * period / limit
  if new_tat - now > period then
    out[#out + 1] = 0
    out[#out + 1] = now
    out[#out + 1] = math.floor(tat)
    out[#out + 1] = 0
  else
    local leased = 0
    if lease > 0 and new_tat + lease * period / limit - now <= period * 0.9 then
      new_tat = new_tat + lease * period / limit
      leased = lease
    end
    if new_tat < now then new_tat = now end
    if points ~= 0 or leased > 0 then
      redis.call('SET', KEYS[i], string.format('%.17g', new_tat), 'PX', math.ceil(new_tat - now) + 1000)
    end
    out[#out + 1] = 1
    out[#out + 1] = now
    out[#out + 1] = math.ceil(new_tat)
    out[#out + 1] = leased
  end
end
return out
"""
_CHARGE_SHA: Final = hashlib.sha1(_CHARGE.encode()).hexdigest()
_CHARGE_SCRIPT: Final = Script(_CHARGE)
# Most charges sent in one script call.
MAX_BATCH: Final = 256


# (allowed, now_ms, tat_ms, leased) of one charge; a queued charge: (key, points, limit, lease asked, its answer).
_Result = tuple[int, int, int, int]
_Charge = tuple[str, int, int, int, "asyncio.Future[_Result | None]"]


class RateLimiter:
    """One per process: Redis through the cache store's breaker, the local limiter behind it.

    Charges go to Redis in batches, one script call at a time: those made while a call is out wait for it and go
    together in the next one. Under load a request so costs a share of a round trip, not one; each charge sent is
    still decided in Redis, in order, and one of a client's may lease points that this process then spends on the
    client's next charges without a round trip (the module's doc)."""

    def __init__(self, store: CacheStore | None, *, local: LocalLimiter | None = None) -> None:
        self.store = store
        self.local = local or LocalLimiter()
        # A connection of its own, outside the client's pool: the batches take turns on it, so it needs no pool,
        # and a command on it costs half what one through the client does. No socket timeout of its own (each
        # read would start a task): the store bounds the whole call, and a call cut short closes the connection.
        self._conn: AbstractConnection | None = None
        self._shared = store is not None and store.redis is not None
        if store is not None and store.redis is not None and not isinstance(store.redis, RedisCluster):
            pool = store.redis.connection_pool
            self._conn = pool.connection_class(**{**pool.connection_kwargs, "socket_timeout": None})
        self._pending: list[_Charge] = []
        self._sender: asyncio.Task[None] | None = None
        self._leases: dict[str, Lease] = {}
        self._asking: set[str] = set()
        # Answers of top-ups on their way (edge of shutdown: waited for before the leases go back).
        self._topping: set[asyncio.Future[_Result | None]] = set()
        # When each client was last charged in Redis (monotonic; forgotten all at once when full).
        self._seen: dict[str, float] = {}
        self._sweeping = False

    def charge_now(self, subject: str, points: int, limit: int) -> Decision | None:
        """The charge, when it needs no round trip: from a lease that holds the points, or in memory when Redis is
        not used; None (nothing spent) when it needs Redis. A lease spent down to half asks for more meanwhile."""
        points = max(0, points)
        if not self._shared:
            return self.local.charge(subject, points, limit)
        lease = self._leases.get(subject)
        if lease is None or lease.held < points or lease.limit != limit or not lease.fresh():
            return None
        decision = lease.charge(points)
        if 2 * lease.held < lease.size and subject not in self._asking:
            self._top_up(subject, lease)
        return decision

    async def charge(self, subject: str, points: int, limit: int) -> Decision:
        now = self.charge_now(subject, points, limit)
        if now is not None:
            return now
        assert self.store is not None  # without Redis every charge is one of `charge_now`
        points = max(0, points)
        if allowance.spent():
            return self.local.charge(subject, points, limit)
        lease = self._leases.get(subject)
        if lease is not None and (lease.limit != limit or not lease.fresh()):
            self._give_back(self._leases.pop(subject))
            lease = None
        key = keys.rate_limit(self.store.namespace, subject)
        # One charge at a time asks for a client's lease (or more for it): those sent meanwhile are charged exactly.
        # A client this process has not charged within a lease's life gets none: most such clients would not be back
        # before it expired, and it would only hold points back.
        returning = self._returning(subject)
        asked = 0
        if returning and subject not in self._asking:
            asked = max(0, lease_size(points, limit) - (lease.held if lease is not None else 0))
        if asked:
            self._asking.add(subject)
        try:
            got = await self.store.wait(self._send(key, points, limit, asked))
        finally:
            if asked:
                self._asking.discard(subject)
        if got is None or isinstance(got, Unavailable):
            return self.local.charge(subject, points, limit)
        allowed, now_ms, tat_ms, _ = got
        lease = self._noted(subject, key, limit, got, size=asked)
        # Its figures show what was spent, not what this process holds.
        spent_ms = lease.spent_ms() if lease is not None else tat_ms
        return decide(allowed=bool(allowed), points=points, limit=limit, now_ms=now_ms, tat_ms=spent_ms)

    def give_back(self, subject: str, points: int, limit: int) -> None:
        """Returns `points` a charge took that turned out not to be owed: to the client's lease when this process holds
        one (spent from it or not, they are the client's again), else to Redis with the next batch."""
        if points <= 0:
            return
        if self.store is None or self._conn is None:
            self.local.give_back(subject, points, limit)
            return
        lease = self._leases.get(subject)
        if lease is not None and lease.limit == limit and lease.fresh():
            lease.held += points
            return
        self._send(keys.rate_limit(self.store.namespace, subject), -points, limit, 0)

    def _returning(self, subject: str) -> bool:
        """Whether this process charged `subject` in Redis within LEASE_S; notes this charge."""
        now = time.monotonic()
        last = self._seen.get(subject)
        if last is None and len(self._seen) >= LOCAL_SUBJECTS:
            self._seen.clear()
        self._seen[subject] = now
        return last is not None and now - last < LEASE_S

    def _noted(self, subject: str, key: str, limit: int, got: _Result, *, size: int) -> Lease | None:
        """The client's lease after an answer of Redis: updated with it (and what it leased), or taken with it."""
        _, now_ms, tat_ms, leased = got
        lease = self._leases.get(subject)
        if lease is not None and lease.limit == limit:
            lease.update(leased, tat_ms, now_ms)
        elif leased:
            lease = Lease(key, limit, size, leased, tat_ms, now_ms, time.monotonic(), time.monotonic())
            self._hold(lease, subject)
        return lease

    def _top_up(self, subject: str, lease: Lease) -> None:
        """Asks Redis for the points a lease has spent, before it runs out: a busy client's charges keep needing no
        round trip. What comes is added to the lease, or goes back if the lease has gone meanwhile."""
        self._asking.add(subject)
        answer = self._send(lease.key, 0, lease.limit, lease.size - lease.held)
        self._topping.add(answer)

        def added(answer: asyncio.Future[_Result | None]) -> None:
            self._asking.discard(subject)
            self._topping.discard(answer)
            got = answer.result()
            if got is None:
                return
            if self._leases.get(subject) is lease:
                lease.update(got[3], got[2], got[1])
            elif got[3]:
                self._send(lease.key, -got[3], lease.limit, 0)

        answer.add_done_callback(added)

    def _send(self, key: str, points: int, limit: int, lease: int) -> asyncio.Future[_Result | None]:
        """Queues a charge for the next batch: its (allowed, now_ms, tat_ms, leased), None if Redis did not answer."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_Result | None] = loop.create_future()
        self._pending.append((key, points, limit, lease, future))
        if self._sender is None:
            # A task of its own: a request cancelled while waiting cancels no batch.
            self._sender = loop.create_task(self._send_batches())
        return future

    def _hold(self, lease: Lease, subject: str) -> None:
        replaced = self._leases.pop(subject, None)
        if replaced is not None:
            self._give_back(replaced)
        if len(self._leases) >= LOCAL_SUBJECTS:
            self._give_back(self._leases.pop(next(iter(self._leases))))
        self._leases[subject] = lease
        if not self._sweeping:
            self._sweeping = True
            asyncio.get_running_loop().call_later(LEASE_S, self._sweep)

    def _give_back(self, lease: Lease) -> asyncio.Future[_Result | None] | None:
        """Returns what `lease` holds to Redis; the answer, for whoever waits for it."""
        return self._send(lease.key, -lease.held, lease.limit, 0) if lease.held > 0 else None

    def _sweep(self) -> None:
        """Gives back what leases taken LEASE_S ago still hold."""
        self._sweeping = False
        now = time.monotonic()
        for subject, lease in list(self._leases.items()):
            if now - lease.taken >= LEASE_S:
                self._give_back(self._leases.pop(subject))
        if self._leases:
            self._sweeping = True
            asyncio.get_running_loop().call_later(LEASE_S, self._sweep)

    async def _send_batches(self) -> None:
        batch: list[_Charge] = []
        try:
            while self._pending:
                batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                results = await self._run(batch)
                for i, (key, _, limit, _, future) in enumerate(batch):
                    if not future.done():
                        future.set_result(results[i] if results is not None else None)
                    elif results is not None and results[i][3] > 0:
                        self._send(key, -results[i][3], limit, 0)  # its request gave up: nobody holds the lease
        finally:
            self._sender = None
            # Cut short (the process stopping): whoever still waits counts locally.
            for *_, future in [*batch, *self._pending]:
                if not future.done():
                    future.set_result(None)
            self._pending = []

    async def _run(self, batch: list[_Charge]) -> list[_Result] | None:
        """Each charge's (allowed, now_ms, tat_ms, leased), or None when Redis did not answer."""
        assert self.store is not None
        conn = self._conn
        keys_ = [key for key, *_ in batch]
        args: list[int] = [PERIOD_MS]
        for _, points, limit, lease, _ in batch:
            args += (points, limit, lease)

        async def run(redis: RedisClient) -> object:
            if conn is None:
                return await _evaluate_by_slot(redis, keys_, args)
            try:
                return await _evaluate(conn, keys_, args)
            except BaseException:
                # Its reply may still come: never to be read as the next call's.
                await conn.disconnect(nowait=True)
                raise

        # The batch serves many requests, each waiting for it as long as its own allowance lets it.
        got = await self.store.call_shared(run)
        if isinstance(got, Unavailable) or not isinstance(got, list) or len(got) != 4 * len(batch):
            return None
        values = [int(v) for v in got]
        return [(values[i], values[i + 1], values[i + 2], values[i + 3]) for i in range(0, len(values), 4)]

    async def aclose(self) -> None:
        """Gives back what leases hold, then closes the connection."""
        if self._conn is not None:
            if self._topping:
                await asyncio.gather(*self._topping)
            leases, self._leases = list(self._leases.values()), {}
            returns = [answer for lease in leases if (answer := self._give_back(lease)) is not None]
            if returns:
                await asyncio.gather(*returns)
            await self._conn.disconnect()


async def _evaluate(conn: AbstractConnection, keys_: list[str], args: list[int]) -> object:
    """The charge script by its hash; sent whole when Redis does not know it (a restart, SCRIPT FLUSH)."""
    if not conn.is_connected:
        # Its own connect: under Sentinel that asks the Sentinels for the primary (sending would connect to the
        # address it was made with).
        await conn.connect()  # type: ignore[no-untyped-call]
    await conn.send_command("EVALSHA", _CHARGE_SHA, len(keys_), *keys_, *args, check_health=False)
    try:
        return await conn.read_response()
    except NoScriptError:
        await conn.send_command("EVAL", _CHARGE, len(keys_), *keys_, *args, check_health=False)
        return await conn.read_response()


async def _evaluate_by_slot(redis: RedisClient, keys_: list[str], args: list[int]) -> list[object]:
    """The charge script once per slot (a Cluster refuses keys of several in one call), the answers in the batch's
    order; a client charged twice in the batch still sees its first charge (both go in the same call)."""
    by_slot: dict[int, list[int]] = {}
    for i, key in enumerate(keys_):
        by_slot.setdefault(slot(key), []).append(i)
    groups = list(by_slot.values())
    calls = [
        ([keys_[i] for i in group], [args[0], *(a for i in group for a in args[1 + 3 * i : 4 + 3 * i])])
        for group in groups
    ]
    answers = await _CHARGE_SCRIPT.run_many(redis, calls)
    out: list[object] = [None] * (4 * len(keys_))
    for group, answer in zip(groups, answers, strict=True):
        assert isinstance(answer, list) and len(answer) == 4 * len(group)
        for j, i in enumerate(group):
            out[4 * i : 4 * i + 4] = answer[4 * j : 4 * j + 4]
    return out


@dataclass(frozen=True, slots=True)
class RateLimitPolicy:
    enabled: bool
    anonymous_points_per_hour: int
    key_points_per_hour: int
    failed_auth_per_hour: int = 100

    def subject(self, identity: Identity) -> tuple[str, int]:
        """Whose budget a request spends, and its size: the key's, else the client address's."""
        key = identity.api_key
        if key is not None:
            return f"key:{key.id}", key.points_per_hour or self.key_points_per_hour
        return f"ip:{identity.client_ip}", self.anonymous_points_per_hour

    def failed_auth_subject(self, identity: Identity) -> tuple[str, int]:
        """The client address's budget of failed authentications: apart from its anonymous one, so that browsing
        from a shared address never locks a good key out."""
        return f"authfail:{identity.client_ip}", self.failed_auth_per_hour


class RateCharge:
    """One request's charge on its client's points (`RequestState.rate_charge`, a `PointsCharge`): made once, when its
    cost is known."""

    def __init__(
        self,
        limiter: RateLimiter,
        policy: RateLimitPolicy,
        identity: Identity,
        subject: tuple[str, int] | None = None,
    ) -> None:
        """`subject`: whose budget and its size, when not the one `policy` gives the identity."""
        self.limiter = limiter
        self.enabled = policy.enabled
        self.subject, self.limit = subject or policy.subject(identity)
        self.decision: Decision | None = None

    async def charge(self, points: int) -> Decision:
        """Spend `points`; a refusal spends nothing. With limiting off, an unlimited decision."""
        if not self.enabled:
            self.decision = Decision(True, self.limit, points, 0, self.limit, int(time.time()), 0)
        else:
            self.decision = await self.limiter.charge(self.subject, points, self.limit)
        return self.decision

    def give_back(self, points: int) -> None:
        """Returns `points` of a charge that turned out not to be owed (a look-up paid for in advance)."""
        if self.enabled:
            self.limiter.give_back(self.subject, points, self.limit)

    def charge_now(self, points: int) -> bool:
        """Spends `points` when that needs no round trip to Redis (`RateLimiter.charge_now`); False, spending nothing,
        when it does or when the budget refuses them."""
        decision = self.limiter.charge_now(self.subject, points, self.limit) if self.enabled else None
        if decision is None or not decision.allowed:
            return False
        self.decision = decision
        return True
