"""Forget what a committed write changed: called by the ingest after each batch commits, never before."""

from __future__ import annotations

import logging
import weakref
from typing import Final, Protocol

from redis.asyncio import Redis

from db.cache import keys
from db.cache.positions import record_invalidation
from db.cache.store import CacheStore, Unavailable
from db.records import Touched

log = logging.getLogger(__name__)


class Purge(Protocol):
    """Tells a CDN which tags (`Surrogate-Key`) to purge (db/cache/purge.py posts them to WOVEPAPER_PURGE_URL), given
    the WAL position of the write that made them stale (None: unknown), so a purge can wait for the replicas."""

    async def __call__(self, tags: list[str], position: int | None = None) -> None: ...


# The purge hook of a store, attached once by whoever opens it (the ingest), used by every invalidate().
_PURGES: weakref.WeakKeyDictionary[CacheStore, Purge] = weakref.WeakKeyDictionary()


def attach_purge(cache: CacheStore, purge: Purge) -> None:
    _PURGES[cache] = purge


# Entities per script call: bounds the time Redis spends in one script.
CHUNK: Final = 200

# KEYS[1] response epoch, then ARGV[3] tag sets dropped alone (the lists tag, tags of lookups that found
# nothing), then (tag set, generation) per entity, then plain keys (ARGV[2] of them at the end). Every
# member of a dropped tag set is deleted with it, and the dropped tags are published on ARGV[4] in the same
# atomic step, for the workers' in-process copies (db/cache/near.py).
_INVALIDATE = """
local ttl = ARGV[1]
local plain = tonumber(ARGV[2])
local alone = tonumber(ARGV[3])
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ttl)
local function drop(tag)
  local members = redis.call('SMEMBERS', tag)
  for j = 1, #members, 1000 do
    redis.call('DEL', unpack(members, j, math.min(j + 999, #members)))
  end
  redis.call('DEL', tag)
end
local dropped = {}
for i = 2, alone + 1 do
  drop(KEYS[i])
  dropped[#dropped + 1] = KEYS[i]
end
local pairs_end = #KEYS - plain
for i = alone + 2, pairs_end, 2 do
  drop(KEYS[i])
  dropped[#dropped + 1] = KEYS[i]
  redis.call('INCR', KEYS[i + 1])
  redis.call('EXPIRE', KEYS[i + 1], ttl)
end
redis.call('PUBLISH', ARGV[4], table.concat(dropped, ' '))
for i = pairs_end + 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
return 1
"""


def _entity_keys(ns: str, kind: str, entity_id: int | str) -> tuple[list[str], list[str]]:
    pair = [keys.entity_tag(ns, kind, entity_id), keys.entity_generation(ns, kind, entity_id)]
    if kind == "researcher" and isinstance(entity_id, int):
        plain = [keys.researcher_stats(ns, entity_id), keys.researcher_coauthors(ns, entity_id)]
    elif kind == "institution" and isinstance(entity_id, int):
        plain = [keys.institution_stats(ns, entity_id)]
    else:
        plain = []
    return pair, plain


def _touched(entities: list[tuple[str, int | str]]) -> Touched:
    rest = Touched()
    for kind, entity_id in entities:
        if isinstance(entity_id, str):
            rest.paper_keys.add(entity_id)
        else:
            getattr(rest, kind + "s").add(entity_id)
    return rest


def _dropped_alone(ns: str, todo: Touched) -> list[str]:
    """The lists tag, and the tags of lookups that found nothing which this write may now answer."""
    tags = [keys.lists_tag(ns), *(keys.missing_tag(ns, "paper", a) for a in sorted(todo.new_papers))]
    if todo.researchers:
        tags.append(keys.missing_tag(ns, "researcher", "any"))
    if todo.institutions:
        tags.append(keys.missing_tag(ns, "institution", "any"))
    return tags


async def invalidate(
    cache: CacheStore | None, touched: Touched, *, position: int | None = None, purge: Purge | None = None
) -> None:
    """Drop every cached aggregate and whole response derived from the touched entities; then, with a
    `purge` hook, tell the CDN which tags to purge.

    `position`: the primary's WAL position once the write committed (db.queries.replication.written_position), kept
    with each dropped tag so that no replica that has not replayed the write fills a cache with what it changed;
    None (unknown) keeps every replica from filling them for a while (positions.INVALIDATION_TTL_S).

    Never raises: when Redis is unavailable the ids are kept and sent with the next call, and
    entries left behind expire with their TTL.
    """
    await _drop(cache, touched, position)
    if purge is None and cache is not None:
        purge = _PURGES.get(cache)
    # After Redis: a CDN refetching at once must not be answered from a response this write made stale.
    if purge is not None and touched:
        await purge(purge_tags(cache.namespace if cache else "", touched), position)


async def _drop(cache: CacheStore | None, touched: Touched, position: int | None) -> None:
    if cache is None or cache.redis is None:
        return
    todo = Touched()
    todo.update(cache.pending_invalidation)
    todo.update(touched)
    if not todo:
        return
    cache.pending_invalidation = Touched()
    ns = cache.namespace
    # A paper's responses are tagged by its arXiv id (its global id names it); by database id too, for
    # responses cached under ids issued before.
    entities: list[tuple[str, int | str]] = [
        *(("paper", i) for i in sorted(todo.papers)),
        *(("paper", k) for k in sorted(todo.paper_keys)),
        *(("researcher", i) for i in sorted(todo.researchers)),
        *(("institution", i) for i in sorted(todo.institutions)),
    ]
    script = cache.redis.register_script(_INVALIDATE)
    ttl = cache.ttl_s * 2
    alone = _dropped_alone(ns, todo)
    for start in range(0, max(len(entities), 1), CHUNK):
        chunk = entities[start : start + CHUNK]
        pair_keys: list[str] = []
        plain_keys: list[str] = []
        for kind, entity_id in chunk:
            pair, plain = _entity_keys(ns, kind, entity_id)
            pair_keys += pair
            plain_keys += plain
        # The tags dropped alone go with the first chunk only.
        first = alone if start == 0 else []
        all_keys = [keys.response_epoch(ns), *first, *pair_keys, *plain_keys]
        args: list[int | str] = [ttl, len(plain_keys), len(first), keys.invalidations(ns)]
        dropped = [*first, *pair_keys[::2]]

        async def run(
            r: Redis, k: list[str] = all_keys, a: list[int | str] = args, tags: list[str] = dropped
        ) -> object:
            # Before the drop: whoever sees the drop sees the write's position too.
            await record_invalidation(r, tags, position)
            done = await script(keys=k, args=a, client=r)
            # Redis has written the published tags to every subscriber before it answers a later command:
            # once this returns, the next request on any worker sees the drop (db/cache/near.py).
            await r.ping()
            return done

        done = await cache.call(run)
        if isinstance(done, Unavailable):
            cache.metrics.invalidation_failures += 1
            rest = _touched(entities[start:])
            rest.new_papers = set(todo.new_papers) if start == 0 else set()
            cache.pending_invalidation.update(rest)
            log.warning("cache invalidation deferred for %d entities: Redis unavailable", len(entities) - start)
            return


def purge_tags(ns: str, touched: Touched) -> list[str]:
    """The CDN tags a write makes stale: the same names as the responses' `Surrogate-Key`."""
    tags = [keys.entity_tag(ns, "paper", i) for i in sorted(touched.papers)]
    # A response names a paper by its global id, which names its arXiv id: that is its tag.
    tags += [keys.entity_tag(ns, "paper", k) for k in sorted(touched.paper_keys)]
    tags += [keys.entity_tag(ns, "researcher", i) for i in sorted(touched.researchers)]
    tags += [keys.entity_tag(ns, "institution", i) for i in sorted(touched.institutions)]
    return [keys.surrogate_key(ns, t) for t in (*_dropped_alone(ns, touched), *tags)]
