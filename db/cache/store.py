"""The Redis cache in front of the aggregates: get-or-compute with single flight, guarded by a breaker.

Correctness never depends on Redis. Every call has a short timeout and no client-side retry; after a
few failures the breaker opens and callers go straight to PostgreSQL until Redis answers a probe.
A value computed while an invalidation of its entity ran is not stored (the entity's generation
is read together with the value and checked again, atomically, when storing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import orjson
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from db.cache import keys
from db.cache.breaker import CircuitBreaker
from db.cache.metrics import CacheMetrics
from db.records import Touched

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger(__name__)

# Tag sets outlive the entries they list, so an invalidation always finds them.
TAG_TTL_FACTOR: Final = 2

# KEYS[1] value, KEYS[2] generation (guard), KEYS[3..] tag sets; ARGV value, expected generation, ttl, tag ttl.
_STORE_GUARDED = """
local g = redis.call('GET', KEYS[2]) or '0'
if g ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[3])
local tag_ttl = tonumber(ARGV[4])
for i = 3, #KEYS do
  redis.call('SADD', KEYS[i], KEYS[1])
  -- Only ever lengthen: the set must outlive every entry in it, whatever their TTLs.
  if redis.call('TTL', KEYS[i]) < tag_ttl then
    redis.call('EXPIRE', KEYS[i], tag_ttl)
  end
end
return 1
"""


class Unavailable:
    """Redis was not asked or did not answer: the caller falls back to PostgreSQL."""

    __slots__ = ()


UNAVAILABLE: Final = Unavailable()


class _NotRead:
    __slots__ = ()


_NOT_READ: Final = _NotRead()


@dataclass(slots=True)
class _Flight:
    """A computation in flight, and the entity generation it read (bytes, None when never bumped)."""

    future: asyncio.Future[Any]
    generation: bytes | None | _NotRead | Unavailable = _NOT_READ


@dataclass(frozen=True, slots=True)
class EntityRef:
    kind: str  # one of keys.ENTITY_KINDS
    id: int | str  # a paper's is its arXiv id (its global id names it)


def create_redis(url: str, *, timeout_s: float) -> aioredis.Redis:
    """A client that fails fast: short socket timeouts and no retries (the default retries cost seconds)."""
    return aioredis.Redis.from_url(
        url,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
    )


class CacheStore:
    """One per process: holds the client, the breaker, the in-flight computations and the counters."""

    def __init__(
        self,
        redis: aioredis.Redis | None,
        *,
        namespace: str,
        ttl_s: int,
        timeout_s: float = 0.25,
        breaker: CircuitBreaker | None = None,
        metrics: CacheMetrics | None = None,
    ) -> None:
        self.redis = redis
        self.namespace = namespace
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        self.breaker = breaker or CircuitBreaker()
        self.metrics = metrics or CacheMetrics()
        self._inflight: dict[str, _Flight] = {}
        # What an invalidation could not deliver; sent again with the next one.
        self.pending_invalidation = Touched()
        self._store_script = redis.register_script(_STORE_GUARDED) if redis is not None else None

    async def call(self, op: Callable[[aioredis.Redis], Awaitable[R]]) -> R | Unavailable:
        """Run one Redis operation through the breaker; UNAVAILABLE instead of any Redis failure."""
        redis = self.redis
        if redis is None:
            return UNAVAILABLE
        if not self.breaker.allow():
            self.metrics.short_circuits += 1
            return UNAVAILABLE
        try:
            # The socket timeout bounds each read; this bounds the whole call (connect + command).
            async with asyncio.timeout(self.timeout_s * 2):
                result = await op(redis)
        except (RedisError, OSError, TimeoutError) as exc:
            self.breaker.failure()
            self.metrics.errors += 1
            log.warning("redis unavailable: %s: %s", type(exc).__name__, exc)
            return UNAVAILABLE
        self.breaker.success()
        return result

    async def get_or_compute(
        self,
        key: str,
        compute: Callable[[], Awaitable[T]],
        *,
        load: Callable[[Any], T],
        owner: EntityRef,
        tags: Callable[[T], Iterable[EntityRef]] | None = None,
        ttl_s: int | None = None,
    ) -> T:
        """The cached value of `key`, or `compute()` stored under it; concurrent misses compute once.

        `owner` is the entity whose invalidation drops this key; `tags` names further entities whose
        invalidation must drop it too (for example every researcher in a co-author network).
        """
        gen_key = keys.entity_generation(self.namespace, owner.kind, owner.id)
        while True:
            flight = self._inflight.get(key)
            if flight is None or not await self._may_join(flight, gen_key):
                break
            self.metrics.singleflight_joins += 1
            try:
                value: T = await asyncio.shield(flight.future)
                return value
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                # The computing request was cancelled, not this one: compute it here instead.
        flight = _Flight(asyncio.get_running_loop().create_future())
        self._inflight[key] = flight
        try:
            value = await self._get_or_compute(key, gen_key, flight, compute, load, owner, tags, ttl_s or self.ttl_s)
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
        if flight.generation is _NOT_READ or isinstance(flight.generation, Unavailable):
            return True
        current = await self.call(lambda r: r.get(gen_key))
        if isinstance(current, Unavailable):
            return True
        return _as_bytes(current) == flight.generation

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
    ) -> T:
        got = await self.call(lambda r: r.mget([key, gen_key]))
        if isinstance(got, Unavailable):
            flight.generation = got
            self.metrics.fallbacks += 1
            return await compute()
        raw, generation = _as_bytes(got[0]), _as_bytes(got[1])
        flight.generation = generation
        if raw is not None:
            try:
                cached = load(orjson.loads(raw))
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                log.warning("undecodable cache entry %s; recomputing", key)
            else:
                self.metrics.hits += 1
                return cached
        self.metrics.misses += 1
        value = await compute()
        tag_refs = {owner, *(tags(value) if tags is not None else ())}
        tag_keys = [keys.entity_tag(self.namespace, t.kind, t.id) for t in sorted(tag_refs, key=_ref_order)]
        await self.store_guarded(
            key, orjson.dumps(value), guard_key=gen_key, guard_value=generation, tag_keys=tag_keys, ttl_s=ttl_s
        )
        return value

    async def fetch_guarded(self, key: str, guard_key: str) -> tuple[bytes | None, bytes | None] | Unavailable:
        """The value of `key` and the current value of its guard, in one round trip."""
        got = await self.call(lambda r: r.mget([key, guard_key]))
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
    ) -> bool:
        """SET `key` with a TTL and add it to every tag set, unless the guard moved since it was read."""
        script = self._store_script
        if script is None:
            return False
        expected = guard_value if guard_value is not None else b"0"
        stored = await self.call(
            lambda r: script(
                keys=[key, guard_key, *tag_keys],
                args=[payload, expected, ttl_s, ttl_s * TAG_TTL_FACTOR],
                client=r,
            )
        )
        if isinstance(stored, Unavailable):
            return False
        if not stored:
            self.metrics.stale_stores_skipped += 1
        return bool(stored)

    async def aclose(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()


def _ref_order(ref: EntityRef) -> tuple[str, str]:
    return (ref.kind, str(ref.id))


def _as_bytes(v: bytes | str | None) -> bytes | None:
    # The client does not decode responses; str only appears with decode_responses=True.
    return v.encode() if isinstance(v, str) else v
