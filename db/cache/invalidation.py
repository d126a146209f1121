"""Forget what a committed write changed: called by the ingest after each batch commits, never before."""

from __future__ import annotations

import logging
from typing import Final

from redis.asyncio import Redis

from db.cache import keys
from db.cache.store import CacheStore, Unavailable
from db.records import Touched

log = logging.getLogger(__name__)

# Entities per script call: bounds the time Redis spends in one script.
CHUNK: Final = 200

# KEYS[1] response epoch, KEYS[2] lists tag, then (tag set, generation) per entity, then plain keys
# (ARGV[2] of them at the end). Every member of a dropped tag set is deleted with it.
_INVALIDATE = """
local ttl = ARGV[1]
local plain = tonumber(ARGV[2])
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ttl)
local function drop(tag)
  local members = redis.call('SMEMBERS', tag)
  for j = 1, #members, 1000 do
    redis.call('DEL', unpack(members, j, math.min(j + 999, #members)))
  end
  redis.call('DEL', tag)
end
drop(KEYS[2])
local pairs_end = #KEYS - plain
for i = 3, pairs_end, 2 do
  drop(KEYS[i])
  redis.call('INCR', KEYS[i + 1])
  redis.call('EXPIRE', KEYS[i + 1], ttl)
end
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


async def invalidate(cache: CacheStore | None, touched: Touched) -> None:
    """Drop every cached aggregate and whole response derived from the touched entities.

    Never raises: when Redis is unavailable the ids are kept and sent with the next call, and
    entries left behind expire with their TTL.
    """
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
    for start in range(0, len(entities), CHUNK):
        chunk = entities[start : start + CHUNK]
        pair_keys: list[str] = []
        plain_keys: list[str] = []
        for kind, entity_id in chunk:
            pair, plain = _entity_keys(ns, kind, entity_id)
            pair_keys += pair
            plain_keys += plain
        all_keys = [keys.response_epoch(ns), keys.lists_tag(ns), *pair_keys, *plain_keys]
        args = [ttl, len(plain_keys)]

        async def run(r: Redis, k: list[str] = all_keys, a: list[int] = args) -> object:
            return await script(keys=k, args=a, client=r)

        done = await cache.call(run)
        if isinstance(done, Unavailable):
            cache.metrics.invalidation_failures += 1
            cache.pending_invalidation.update(_touched(entities[start:]))
            log.warning("cache invalidation deferred for %d entities: Redis unavailable", len(entities) - start)
            return
