"""WAL positions kept in Redis, for reads served by replicas: each writer's latest write, and the latest
invalidation of each tag.

A position is stored as 16 hexadecimal digits (so Lua compares two as strings) and only ever raised, one key per
script call (a writer's, or a tag's), so concurrent writers never lower what another recorded and each call stays
within one key's hash slot. Every key carries a TTL; a position that is gone reads as 0 (nothing to wait for).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol

from db.cache import keys
from db.cache.guarded import GuardedRedis, Unavailable
from db.cache.scripts import RedisClient, Script

# A write whose position could not be read: no replica counts as having replayed it (the reads it concerns go to the
# primary, and no replica fills a cache with what it tagged, until the key expires).
UNKNOWN: Final = 2**64 - 1
# How long an invalidation's position is kept: longer than any replica in the rotation may lag (the setting is at
# most 60 s), so a replica that could still be missing the write never finds the key gone.
INVALIDATION_TTL_S: Final = 120

# KEYS[1] the position; ARGV[1] a position (16 hex digits), ARGV[2] TTL in seconds. Keeps the higher of the two.
_RAISE = Script("""
local held = redis.call('GET', KEYS[1])
local value = ARGV[1]
if held and string.len(held) == 16 and held > value then value = held end
redis.call('SET', KEYS[1], value, 'EX', ARGV[2])
return 1
""")


class BatchedReads(Protocol):
    """What positions are read through: the cache store (db/cache/store.py), whose MGET joins every key asked for in
    one loop turn. Named by what it does, not imported: the store checks what it fills against these positions."""

    async def mget(self, keys: list[str]) -> list[bytes | None] | Unavailable: ...


def encode(position: int) -> bytes:
    return b"%016x" % min(max(position, 0), UNKNOWN)


def decode(raw: bytes | None) -> int:
    """A stored position; 0 when there is none, UNKNOWN when it is not one (never taken for "nothing to wait for")."""
    if raw is None:
        return 0
    try:
        return int(raw, 16)
    except ValueError:
        return UNKNOWN


async def raise_positions(cache: GuardedRedis, names: Sequence[str], position: int, ttl_s: int) -> bool:
    """Raise each key of `names` to at least `position`, in one pipeline; False when Redis did not take them."""
    if not names:
        return True
    return (await cache.call(lambda redis: raise_on(redis, names, position, ttl_s))) is True


async def raise_on(redis: RedisClient, names: Sequence[str], position: int, ttl_s: int) -> bool:
    """`raise_positions` on a client, inside a call the caller guards (raises what the client raises). One script
    call per key: on a Cluster each goes to its key's node."""
    value = encode(position)
    await _RAISE.run_many(redis, [([name], [value, ttl_s]) for name in names])
    return True


async def read_positions(cache: BatchedReads, names: Sequence[str]) -> list[int] | Unavailable:
    """The positions under `names` (read with every other key asked for in this loop turn)."""
    got = await cache.mget(list(names))
    if not isinstance(got, list):
        return got
    return [decode(raw) for raw in got]


async def record_invalidation(redis: RedisClient, tag_keys: Sequence[str], position: int | None) -> None:
    """Before the tags are dropped, inside the invalidation's call: the position of the write that drops them (None:
    unknown)."""
    names = [keys.invalidated_position(t) for t in tag_keys]
    if names:
        await raise_on(redis, names, UNKNOWN if position is None else position, INVALIDATION_TTL_S)


async def replayed_invalidations(cache: BatchedReads, tag_keys: Sequence[str], replayed: int) -> bool:
    """Whether a server that has replayed the WAL to `replayed` has every write that invalidated one of these tags
    lately; False when Redis cannot say."""
    found = await read_positions(cache, [keys.invalidated_position(t) for t in tag_keys])
    return isinstance(found, list) and all(p <= replayed for p in found)
