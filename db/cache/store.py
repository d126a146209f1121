"""The Redis cache in front of the aggregates: get-or-compute with single flight, guarded by a breaker.

Correctness never depends on Redis. Every call has a short timeout and no client-side retry; after a
few failures the breaker opens and callers go straight to PostgreSQL until Redis answers a probe.
A value computed while an invalidation of its entity ran is not stored (the entity's generation
is read together with the value and checked again, atomically, when storing). A value is answered only while every
tag set it joined still lists it (`listed`): an invalidation finds what to drop through those sets, and Redis under
`maxmemory` may evict a set before the values it lists. The check costs a round trip, so it is made only while
Redis evicts (its `evicted_keys` moved within a tag set's lifetime, read at most once a second).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

import orjson
from redis.asyncio.cluster import RedisCluster

from db.cache import allowance, keys
from db.cache.breaker import BreakerState, CircuitBreaker
from db.cache.client import REDIS_ERRORS, RedisClient, slot
from db.cache.guarded import UNAVAILABLE, GuardedRedis
from db.cache.guarded import Unavailable as Unavailable  # where its users have always found it
from db.cache.metrics import CacheMetrics
from db.cache.positions import replayed_invalidations
from db.cache.scripts import Call, Script
from db.pool import current_connection_budget
from db.records import Touched

T = TypeVar("T")

log = logging.getLogger(__name__)

# Tag sets outlive the entries they list, so an invalidation always finds them.
TAG_TTL_FACTOR: Final = 2
# How often the count of keys Redis evicted is read (at most; only while values are answered from Redis).
EVICTIONS_POLL_S: Final = 1.0
# Keys per MGET: a larger batch is split, in one pipeline.
MGET_CHUNK: Final = 500
# How long an invalidation's drop time of each tag is kept (keys.dropped_at): far longer than a response may take
# from reading its epoch to its store (WOVEPAPER_OPERATION_TIMEOUT_S, 10 s by default); an epoch older than this is
# refused outright once it moved.
DROPPED_TTL_S: Final = 300
# While several computations are in flight, a store waits this long for others to share its pipeline.
STORE_LINGER_S: Final = 0.005

# KEYS[1] value, KEYS[2] guard, KEYS[3..] ARGV[5] tag sets, then (with ARGV[6] = 1) when each was last dropped;
# ARGV value, expected guard, ttl, tag ttl, tag sets, 1 when the tags may decide. A guard that moved refuses the
# store, but for a response's epoch when the tags may decide (db/cache/invalidation.py): an epoch is `t` and Redis's
# clock in microseconds when a drop set it, so the store goes ahead when none of its own tags was dropped after the
# epoch it read, and that epoch is younger (by Redis's clock now) than the drop times are kept. On a Cluster the tag
# sets here are those of the value's hash tag; the others were joined before (_TAG_ADD).
_STORE_GUARDED = Script("""
local g = redis.call('GET', KEYS[2]) or '0'
local sets = tonumber(ARGV[5])
if g ~= ARGV[2] then
  if ARGV[6] ~= '1' then return 0 end
  local read = ARGV[2] == '0' and 0 or (string.sub(ARGV[2], 1, 1) == 't' and tonumber(string.sub(ARGV[2], 2)))
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if not read or string.sub(g, 1, 1) ~= 't' or now - read > tonumber(ARGV[7]) * 1000000 then return 0 end
  for i = 3 + sets, 2 + 2 * sets do
    local d = redis.call('GET', KEYS[i])
    if d and (tonumber(d) or math.huge) > read then return 0 end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
local tag_ttl = tonumber(ARGV[4])
for i = 3, 2 + sets do
  redis.call('SADD', KEYS[i], KEYS[1])
  -- Only ever lengthen: the set must outlive every entry in it, whatever their TTLs.
  if redis.call('TTL', KEYS[i]) < tag_ttl then
    redis.call('EXPIRE', KEYS[i], tag_ttl)
  end
end
return 1
""")
# KEYS[1] a tag set; ARGV member, tag ttl. A tag set outside the value's hash tag, joined before the value is stored:
# an invalidation that drops it after the store finds the value in it, and one that drops it before moved the
# value's guard, so the store does not happen.
_TAG_ADD = Script("""
redis.call('SADD', KEYS[1], ARGV[1])
if redis.call('TTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 1
""")


# KEYS: tag sets of one hash tag; ARGV[1] a key. 1 when every set still lists the key. Under `maxmemory` with an LRU
# policy Redis evicts a tag set sooner than the entries it lists (an entry is read on every hit, its sets only
# written by stores): an invalidation then finds no set, and those entries would be answered stale until their TTL
# (bench/RESULTS.md, "Round 26").
_LISTED = Script("""
for i = 1, #KEYS do
  if redis.call('SISMEMBER', KEYS[i], ARGV[1]) == 0 then return 0 end
end
return 1
""")


class _NotRead:
    __slots__ = ()


_NOT_READ: Final = _NotRead()


@dataclass(slots=True)
class _Flight:
    """A computation in flight, the entity generation it read (bytes, None when never bumped), and how far the
    replica it reads from had replayed (None: the primary)."""

    future: asyncio.Future[Any]
    generation: bytes | None | _NotRead | Unavailable = _NOT_READ
    replayed: int | None = None


@dataclass(frozen=True, slots=True)
class _Store:
    """A guarded store queued for the next batch: the script's keys and arguments, the tag sets it joins before
    (of other hash tags, on a Cluster), its answer."""

    keys: list[str]
    args: list[bytes | int]
    remote_tags: list[str]
    future: asyncio.Future[bool | Unavailable]


@dataclass(frozen=True, slots=True)
class EntityRef:
    kind: str  # one of keys.ENTITY_KINDS
    id: int | str  # a paper's is its arXiv id (its global id names it)


class CacheStore(GuardedRedis):
    """One per process: holds the client, the breaker, the in-flight computations and the counters.

    Reads and guarded stores are batched per event-loop turn: every key asked for in one turn goes out in one
    MGET, every store in one pipeline, and at most `max_in_flight` batches are sent at once (the rest wait and
    join the next batch). A request's Redis traffic is so bounded by the number of turns it takes, not by how
    many fields it resolves; a batch is a task of its own, so a cancelled request cancels no Redis call. A request
    waits for a batch at most the Redis timeout, and after one wait ran out or failed it asks Redis for nothing
    more (db/cache/allowance.py). On a Cluster the MGET is split by slot, and a store joins the tag sets of other
    hash tags before its guarded script runs (`_TAG_ADD`). Each call goes through the breaker (db/cache/guarded.py).
    """

    def __init__(
        self,
        redis: RedisClient | None,
        *,
        namespace: str,
        ttl_s: int,
        timeout_s: float = 0.25,
        breaker: CircuitBreaker | None = None,
        metrics: CacheMetrics | None = None,
        max_in_flight: int = 4,
    ) -> None:
        super().__init__(redis, timeout_s=timeout_s, breaker=breaker, metrics=metrics)
        self.cluster = isinstance(redis, RedisCluster)
        self.namespace = namespace
        self.ttl_s = ttl_s
        self._inflight: dict[str, _Flight] = {}
        # What an invalidation could not deliver; sent again with the next one.
        self.pending_invalidation = Touched(lists=False)
        self._slots = asyncio.Semaphore(max_in_flight)
        self._reads: list[tuple[list[str], asyncio.Future[list[bytes | None] | Unavailable]]] = []
        self._stores: list[_Store] = []
        self._checks: list[tuple[str, list[str], asyncio.Future[bool | Unavailable]]] = []
        self._check_scheduled = False
        # Redis's count of evicted keys when last read (None: not yet), when it was read, and until when tag sets
        # may be missing (a set evicted then outlives no entry past its own TTL).
        self._evictions: int | None = None
        self._evictions_read_at = -EVICTIONS_POLL_S
        self._evicting_until = 0.0
        self._read_scheduled = False
        self._store_scheduled = False
        self._batches: set[asyncio.Task[None]] = set()
        self.max_in_flight = max_in_flight
        self._in_flight = 0
        self.peak_in_flight = 0

    async def mget(self, keys: list[str]) -> list[bytes | None] | Unavailable:
        """The values of `keys`, read in the same MGET as every other key asked for in this loop turn."""
        if self.redis is None or allowance.spent():
            return UNAVAILABLE
        self._watch_evictions()
        future: asyncio.Future[list[bytes | None] | Unavailable] = asyncio.get_running_loop().create_future()
        self._reads.append((keys, future))
        if not self._read_scheduled:
            self._read_scheduled = True
            self._spawn(self._flush_reads)
        return await self.wait(future)

    async def listed(self, key: str, tag_keys: Callable[[], Sequence[str]]) -> bool | Unavailable:
        """Whether every tag set `key` joined when it was stored (`tag_keys()`, named only when they are checked)
        still lists it, checked with every other key asked about in this loop turn, in one pipeline: a value some
        set no longer lists is not to be answered, since the invalidation that drops that set's entity would not
        find it. Checked only while Redis evicts."""
        if self.redis is None or allowance.spent():
            return UNAVAILABLE
        if not self._may_have_evicted():
            return True
        names = list(tag_keys())
        if not names:
            return True
        future: asyncio.Future[bool | Unavailable] = asyncio.get_running_loop().create_future()
        self._checks.append((key, names, future))
        if not self._check_scheduled:
            self._check_scheduled = True
            self._spawn(self._flush_checks)
        return await self.wait(future)

    def _may_have_evicted(self) -> bool:
        """Whether a tag set may have been evicted from under a live entry: Redis's eviction count was not read yet,
        or moved within the last tag-set lifetime."""
        return self._evictions is None or asyncio.get_running_loop().time() < self._evicting_until

    def _watch_evictions(self) -> None:
        """Read Redis's eviction count again (in the background) if it was last read a second ago or more: a set
        evicted within that second goes unseen for that long."""
        now = asyncio.get_running_loop().time()
        if now - self._evictions_read_at >= EVICTIONS_POLL_S:
            self._evictions_read_at = now
            self._spawn(self._read_evictions)

    async def _read_evictions(self) -> None:
        # A background reading, kept out of the breaker and the counters (which judge the calls requests make); one
        # that fails is made again a second later, and until one succeeds the checks go on as they were.
        if self.redis is None or self.breaker.state is not BreakerState.CLOSED:
            return
        try:
            async with asyncio.timeout(self.timeout_s * 2):
                count = await _evicted_keys(self.redis)
        except (*REDIS_ERRORS, TimeoutError):
            return
        if count > 0 if self._evictions is None else count != self._evictions:
            self._evicting_until = asyncio.get_running_loop().time() + self.ttl_s * TAG_TTL_FACTOR
        self._evictions = count

    async def _flush_checks(self) -> None:
        got_slot = await self._slot()
        batch, self._checks = self._checks, []
        self._check_scheduled = False
        try:
            # One script call per key and hash tag of its sets (a Cluster keeps them apart), all in one pipeline.
            calls: list[Call] = []
            owners: list[int] = []
            for i, (key, tag_keys, _) in enumerate(batch):
                by_slot: dict[int, list[str]] = {}
                for t in tag_keys:
                    by_slot.setdefault(slot(t) if self.cluster else 0, []).append(t)
                calls += [(ts, [key]) for ts in by_slot.values()]
                owners += [i] * len(by_slot)
            results: list[object] | Unavailable = UNAVAILABLE
            if got_slot:
                results = await self.call_shared(lambda r: _LISTED.run_many(r, calls))
            else:
                self.metrics.saturated += 1
            listed = [True] * len(batch)
            if not isinstance(results, Unavailable):
                for i, result in zip(owners, results, strict=True):
                    listed[i] = listed[i] and result == 1
            for i, (_, _, future) in enumerate(batch):
                if not future.done():
                    future.set_result(results if isinstance(results, Unavailable) else listed[i])
        finally:
            if got_slot:
                self._free_slot()

    def _spawn(self, flush: Callable[[], Coroutine[Any, Any, None]], *, delay: float = 0.0) -> None:
        loop = asyncio.get_running_loop()

        def start() -> None:
            task = loop.create_task(flush())
            self._batches.add(task)
            task.add_done_callback(self._batches.discard)

        if delay:
            loop.call_later(delay, start)
        else:
            loop.call_soon(start)

    async def _slot(self) -> bool:
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._slots.acquire()
        except TimeoutError:
            return False
        self._in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        return True

    def _free_slot(self) -> None:
        self._in_flight -= 1
        self._slots.release()

    async def _flush_reads(self) -> None:
        got_slot = await self._slot()
        batch, self._reads = self._reads, []
        self._read_scheduled = False
        try:
            if not got_slot:
                self.metrics.saturated += 1
                values: list[bytes | None] | Unavailable = UNAVAILABLE
                wanted: list[str] = []
            else:
                wanted = list(dict.fromkeys(k for keys_, _ in batch for k in keys_))
                values = await self.call_shared(lambda r: _mget_chunked(r, wanted))
            found = {} if isinstance(values, Unavailable) else dict(zip(wanted, values, strict=True))
            for keys_, future in batch:
                if not future.done():
                    future.set_result(values if isinstance(values, Unavailable) else [found[k] for k in keys_])
        finally:
            if got_slot:
                self._free_slot()

    async def _flush_stores(self) -> None:
        got_slot = await self._slot()
        batch, self._stores = self._stores, []
        self._store_scheduled = False
        try:
            results: list[object] | Unavailable = UNAVAILABLE
            if got_slot:
                results = await self.call_shared(lambda r: self._eval_stores(r, batch))
            else:
                self.metrics.saturated += 1
            for i, store in enumerate(batch):
                if not store.future.done():
                    store.future.set_result(results if isinstance(results, Unavailable) else bool(results[i]))
        finally:
            if got_slot:
                self._free_slot()

    async def _eval_stores(self, redis: RedisClient, batch: list[_Store]) -> list[object]:
        """The guarded-store script once per store, all in one pipeline; on a Cluster, the tag sets of other hash
        tags joined first (one pipeline before)."""
        joins = [([t], [s.keys[0], s.args[3]]) for s in batch for t in s.remote_tags]
        if joins:
            await _TAG_ADD.run_many(redis, joins)
        return await _STORE_GUARDED.run_many(redis, [(s.keys, s.args) for s in batch])

    async def get_or_compute(
        self,
        key: str,
        compute: Callable[[], Awaitable[T]],
        *,
        load: Callable[[Any], T],
        owner: EntityRef,
        tags: Callable[[T], Iterable[EntityRef]] | None = None,
        ttl_s: int | None = None,
        keep_none: bool = True,
    ) -> T:
        """The cached value of `key`, or `compute()` stored under it; concurrent misses compute once.

        `owner` is the entity whose invalidation drops this key; `tags` names further entities whose
        invalidation must drop it too (for example every researcher in a co-author network). With `keep_none`
        false a computed None is answered, not stored.
        """
        gen_key = keys.entity_generation(self.namespace, owner.kind, owner.id)
        while True:
            flight = self._inflight.get(key)
            if flight is None or not await self._may_join(flight, gen_key):
                break
            self.metrics.singleflight_joins += 1
            try:
                value: T = await asyncio.shield(flight.future)
                if isinstance(flight.generation, Unavailable) and flight.generation.failed:
                    allowance.note_failure(timed_out=False)  # it waited out the computation's Redis failure
                return value
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # The computing request was cancelled, not this one: compute it here instead.
        flight = _Flight(asyncio.get_running_loop().create_future(), replayed=_replayed())
        self._inflight[key] = flight
        try:
            value = await self._get_or_compute(
                key, gen_key, flight, compute, load, owner, tags, ttl_s or self.ttl_s, keep_none
            )
        except asyncio.CancelledError:
            flight.future.cancel()
            raise
        except BaseException as exc:
            flight.future.set_exception(exc)
            flight.future.exception()  # retrieved here, so an unawaited failure is not logged twice
            raise
        else:
            flight.future.set_result(value)
            return value
        finally:
            if self._inflight.get(key) is flight:
                del self._inflight[key]

    async def _may_join(self, flight: _Flight, gen_key: str) -> bool:
        """Whether a computation in flight is fresh enough for a request arriving now.

        It is when it has not read Redis yet (it will see at least what this request would), or
        when no invalidation of the entity happened since it did; otherwise joining it could serve
        figures from before a write that committed before this request arrived.
        """
        mine = _replayed()
        if flight.replayed is not None and (mine is None or mine > flight.replayed):
            # It reads a replica further behind than this request may read (a writer's own write, the primary).
            return False
        if flight.generation is _NOT_READ or isinstance(flight.generation, Unavailable):
            return True
        current = await self.mget([gen_key])
        if isinstance(current, Unavailable):
            return True
        return _as_bytes(current[0]) == flight.generation

    async def _get_or_compute(
        self,
        key: str,
        gen_key: str,
        flight: _Flight,
        compute: Callable[[], Awaitable[T]],
        load: Callable[[Any], T],
        owner: EntityRef,
        tags: Callable[[T], Iterable[EntityRef]] | None,
        ttl_s: int,
        keep_none: bool,
    ) -> T:
        got = await self.mget([key, gen_key])
        if isinstance(got, Unavailable):
            flight.generation = got
            self.metrics.fallbacks += 1
            _note_request("cache_fallbacks")
            return await compute()
        raw, generation = _as_bytes(got[0]), _as_bytes(got[1])
        flight.generation = generation
        if raw is not None:
            try:
                cached = load(orjson.loads(raw))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("undecodable cache entry %s; recomputing", key)
            else:
                listed = await self.listed(key, partial(self._tag_keys, owner, tags, cached))
                if isinstance(listed, Unavailable):
                    flight.generation = listed
                    self.metrics.fallbacks += 1
                    _note_request("cache_fallbacks")
                    return await compute()
                if listed:
                    self.metrics.hits += 1
                    _note_request("cache_hits")
                    return cached
                self.metrics.unlisted_skipped += 1
        self.metrics.misses += 1
        _note_request("cache_misses")
        value = await compute()
        if value is None and not keep_none:
            return value
        tag_keys = self._tag_keys(owner, tags, value)
        if flight.replayed is not None and not await replayed_invalidations(self, tag_keys, flight.replayed):
            # Read from a replica that may not have replayed a write that invalidated it: served, never stored.
            self.metrics.lagging_stores_skipped += 1
            return value
        # With other computations in flight (a request fanning out), the store waits a moment to share a pipeline.
        await self.store_guarded(
            key,
            orjson.dumps(value),
            guard_key=gen_key,
            guard_value=generation,
            tag_keys=tag_keys,
            ttl_s=ttl_s,
            linger=STORE_LINGER_S if len(self._inflight) > 1 else 0.0,
        )
        return value

    def _tag_keys(self, owner: EntityRef, tags: Callable[[T], Iterable[EntityRef]] | None, value: T) -> list[str]:
        refs = {owner, *(tags(value) if tags is not None else ())}
        return [keys.entity_tag(self.namespace, t.kind, t.id) for t in sorted(refs, key=_ref_order)]

    async def fetch_guarded(self, key: str, guard_key: str) -> tuple[bytes | None, bytes | None] | Unavailable:
        """The value of `key` and the current value of its guard, in one round trip."""
        got = await self.mget([key, guard_key])
        if isinstance(got, Unavailable):
            return got
        return _as_bytes(got[0]), _as_bytes(got[1])

    async def store_guarded(
        self,
        key: str,
        payload: bytes,
        *,
        guard_key: str,
        guard_value: bytes | None,
        tag_keys: Sequence[str],
        ttl_s: int,
        linger: float = 0.0,
        by_tags: bool = False,
    ) -> bool:
        """SET `key` with a TTL and add it to every tag set, unless the guard moved since it was read.

        `by_tags`: the guard is a response epoch, and a store whose epoch moved still goes ahead when none of its own
        tags was dropped since (one server, not evicting: on a Cluster the tags' drop times live under other hash
        tags, and while Redis evicts one may be gone). Every invalidation moves every epoch: without this, an answer
        that took longer to compute than the time between two writes (the slowest pages, under an ingest) would
        never be kept, whatever the writes changed.

        It goes out with the other stores of the batch: on the next loop turn, or `linger` seconds from now with
        every store queued by then."""
        if self.redis is None or allowance.spent():
            return False
        expected = guard_value if guard_value is not None else b"0"
        future: asyncio.Future[bool | Unavailable] = asyncio.get_running_loop().create_future()
        future.add_done_callback(self._count_store)
        local, remote = list(tag_keys), []
        if self.cluster:
            home = slot(key)
            local, remote = [t for t in tag_keys if slot(t) == home], [t for t in tag_keys if slot(t) != home]
        decide = by_tags and not self.cluster and not self._may_have_evicted()
        dropped = [keys.dropped_at(t) for t in local] if decide else []
        args: list[bytes | int] = [payload, expected, ttl_s, ttl_s * TAG_TTL_FACTOR, len(local), int(decide)]
        args.append(DROPPED_TTL_S)
        self._stores.append(_Store([key, guard_key, *local, *dropped], args, remote, future))
        if not self._store_scheduled:
            self._store_scheduled = True
            self._spawn(self._flush_stores, delay=linger)
        return await self.wait(future) is True

    def _count_store(self, future: asyncio.Future[bool | Unavailable]) -> None:
        if not future.cancelled() and future.result() is False:
            self.metrics.stale_stores_skipped += 1

    async def settle(self) -> None:
        """Wait until every queued read and store has been sent (tests, shutdown)."""
        while self._batches or self._read_scheduled or self._store_scheduled or self._check_scheduled:
            await asyncio.sleep(STORE_LINGER_S / 2 if not self._batches else 0)
            if self._batches:
                await asyncio.gather(*self._batches, return_exceptions=True)

    async def aclose(self) -> None:
        await self.settle()
        self.metrics.fold()
        if self.redis is not None:
            await self.redis.aclose()


def _ref_order(ref: EntityRef) -> tuple[str, str]:
    return (ref.kind, str(ref.id))


async def _mget_chunked(redis: RedisClient, wanted: list[str]) -> list[bytes | None]:
    if isinstance(redis, RedisCluster):
        if len({slot(k) for k in wanted}) > 1:
            # One MGET per slot, in one pipeline (split by node).
            return list(map(_as_bytes, await redis.mget_nonatomic(wanted)))
        # A request's own read (an entry and its guard) is one slot: one command, no pipeline.
        return list(map(_as_bytes, await redis.mget(wanted)))
    if len(wanted) <= MGET_CHUNK:
        return list(map(_as_bytes, await redis.mget(wanted)))
    pipe = redis.pipeline(transaction=False)
    for start in range(0, len(wanted), MGET_CHUNK):
        pipe.mget(wanted[start : start + MGET_CHUNK])
    return [_as_bytes(v) for chunk in await pipe.execute() for v in chunk]


async def _evicted_keys(redis: RedisClient) -> int:
    """Keys Redis evicted since it started (every primary's, on a Cluster)."""
    if isinstance(redis, RedisCluster):
        info = await redis.info("stats", target_nodes=RedisCluster.PRIMARIES)
    else:
        info = await redis.info("stats")
    # A Cluster answers per node (the node's name to its section).
    answers = list(info.values()) if info and all(isinstance(v, dict) for v in info.values()) else [info]
    return sum(int(answer.get("evicted_keys", 0)) for answer in answers)


def _replayed() -> int | None:
    """How far the replica the running request reads from had replayed (None: the primary, or no request)."""
    budget = current_connection_budget()
    return budget.replayed if budget is not None else None


def _note_request(field: str) -> None:
    budget = current_connection_budget()
    if budget is not None:
        stats = budget.stats
        setattr(stats, field, getattr(stats, field) + 1)


def _as_bytes(v: bytes | str | None) -> bytes | None:
    # The client does not decode responses; str only appears with decode_responses=True.
    return v.encode() if isinstance(v, str) else v
