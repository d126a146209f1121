"""Forget what a committed write changed: called by the ingest after each batch commits, never before.

In order, each step finished before the next starts (on a Cluster each is one pipeline over the nodes):
1. every response bucket gets a new epoch and, unless the write changes no list (a follow), loses its lists tag
   (with its members): a response computed across this write may no longer be stored, in whichever bucket, unless
   (on one server) none of its own tags is among those this write drops, each of which keeps when it was dropped;
2. each touched entity loses its tag set (with its members) and its aggregates, and its generation moves: an
   aggregate computed across the write may no longer be stored; a researcher or an institution whose name the write
   may have changed loses its `name:` tag set too (answers showing it by name only); the tags of lookups that found
   nothing go too;
3. on a Cluster, the members of the dropped sets are deleted (one server does that inside the scripts);
4. the dropped tags are published (a shard channel on a Cluster) for the workers' in-process copies
   (edge/near.py), and the writer waits one more round trip on that server.
Under Sentinel or on a Cluster each step also waits (at most half the Redis timeout) until a replica has its writes
(WAIT): Redis replicates asynchronously, and a drop only the dying primary had would come back with its replica.
A store joins its tag sets before its guarded write (db/cache/store.py), so whatever the interleaving a value
computed before the write is either refused by its guard or found in a set this drops. Each script's keys share
one hash tag.
"""

from __future__ import annotations

import logging
import os
import weakref
from dataclasses import dataclass, field
from functools import partial
from typing import Final, Protocol

from redis.asyncio.cluster import RedisCluster

from db.cache import keys
from db.cache.client import RedisClient, replicated, slot
from db.cache.positions import record_invalidation
from db.cache.scripts import Call, Script
from db.cache.store import DROPPED_TTL_S, CacheStore, Unavailable
from db.records import Touched

log = logging.getLogger(__name__)


class Purge(Protocol):
    """Tells a CDN which tags (`Surrogate-Key`) to purge (cdn/purge.py posts them to WOVEPAPER_PURGE_URL), given
    the WAL position of the write that made them stale (None: unknown), so a purge can wait for the replicas."""

    async def __call__(self, tags: list[str], position: int | None = None) -> None: ...


# The purge hook of a store, attached once by whoever opens it (the ingest), used by every invalidate().
_PURGES: weakref.WeakKeyDictionary[CacheStore, Purge] = weakref.WeakKeyDictionary()


def attach_purge(cache: CacheStore, purge: Purge) -> None:
    _PURGES[cache] = purge


# Entities per script call: bounds the time Redis spends in one script.
CHUNK: Final = 200
# Entities per call of an invalidation (each call's commands written in a few hundred KB).
BATCH: Final = 2000

# KEYS: the members of dropped tag sets under one hash tag (a Cluster's step 3).
_DELETE = Script("""
for i = 1, #KEYS do
  redis.call('DEL', KEYS[i])
end
return #KEYS
""")

# KEYS: ARGV[3] epochs, then ARGV[4] tag sets dropped alone (a bucket's lists tag, tags of lookups that found
# nothing), then ARGV[5] (tag set, generation) pairs, then plain keys (aggregates) to delete. ARGV[1] ttl, ARGV[2]
# the new epoch ('' on one server: made here, and returned); ARGV[6] 1: delete the dropped sets' members here (one
# server), 0: return them (a Cluster, where they live under other hash tags); ARGV[7] how long to keep when each set
# was dropped (0: not kept). Epochs move before any set is dropped. On one server an epoch is `t` and Redis's clock in
# microseconds, past every epoch before it, and each dropped set's `<set>:dropped` (keys.dropped_at) keeps it: a
# response computed across this write is still stored if none of its own tags was dropped (db/cache/store.py).
_DROP = Script("""
local ttl = ARGV[1]
local epochs, alone, pairs = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local here = ARGV[6] == '1'
local keep = tonumber(ARGV[7])
local epoch = ARGV[2]
if epoch == '' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  for j = 1, epochs do
    local held = redis.call('GET', KEYS[j])
    local was = held and string.sub(held, 1, 1) == 't' and tonumber(string.sub(held, 2))
    if was and was >= now then now = was + 1 end
  end
  epoch = 't' .. string.format('%.0f', now)
end
local i = 1
for _ = 1, epochs do
  redis.call('SET', KEYS[i], epoch, 'EX', ttl)
  i = i + 1
end
local found = {}
local function drop(tag)
  if keep > 0 then redis.call('SET', tag .. ':dropped', string.sub(epoch, 2), 'EX', keep) end
  local members = redis.call('SMEMBERS', tag)
  if here then
    for j = 1, #members, 1000 do
      redis.call('DEL', unpack(members, j, math.min(j + 999, #members)))
    end
  else
    for j = 1, #members do found[#found + 1] = members[j] end
  end
  redis.call('DEL', tag)
end
for _ = 1, alone do
  drop(KEYS[i])
  i = i + 1
end
for _ = 1, pairs do
  drop(KEYS[i])
  redis.call('INCR', KEYS[i + 1])
  redis.call('EXPIRE', KEYS[i + 1], ttl)
  i = i + 2
end
for j = i, #KEYS do
  redis.call('DEL', KEYS[j])
end
if here then return {epoch} end
return found
""")


@dataclass(slots=True)
class _Work:
    """What one script call does, all under one hash tag."""

    epochs: list[str] = field(default_factory=list)
    alone: list[str] = field(default_factory=list)
    pairs: list[str] = field(default_factory=list)
    plain: list[str] = field(default_factory=list)
    entities: int = 0

    def call(self, ttl: int, epoch: str, here: bool) -> Call:
        args: list[str | int] = [ttl, epoch, len(self.epochs), len(self.alone), len(self.pairs) // 2, int(here)]
        args.append(DROPPED_TTL_S if here else 0)
        return [*self.epochs, *self.alone, *self.pairs, *self.plain], args


@dataclass(frozen=True, slots=True)
class _Entity:
    kind: str
    id: int | str
    renamed: bool = False  # its name may have changed (or it is gone): its `name:` tag goes too

    def names(self) -> list[str]:
        """Its tags as a CDN names them."""
        full = keys.entity_name(self.kind, self.id)
        return [full, keys.identity_name(self.kind, self.id)] if self.renamed else [full]

    def tags(self, ns: str) -> list[str]:
        """Its tag sets: its own (sharing its hash tag with its aggregates and generation) first."""
        return [keys.tag(ns, name) for name in self.names()]


def _entity_keys(ns: str, kind: str, entity_id: int | str) -> tuple[list[str], list[str]]:
    pair = [keys.entity_tag(ns, kind, entity_id), keys.entity_generation(ns, kind, entity_id)]
    if kind == "researcher" and isinstance(entity_id, int):
        plain = [keys.researcher_stats(ns, entity_id), keys.researcher_coauthors(ns, entity_id)]
    elif kind == "institution" and isinstance(entity_id, int):
        plain = [keys.institution_stats(ns, entity_id)]
    else:
        plain = []
    return pair, plain


def _dropped_alone(todo: Touched) -> list[str]:
    """The tags (as a CDN names them) of lookups that found nothing which this write may now answer, and lists."""
    names = [keys.LISTS] if todo.lists else []
    names += [keys.missing_name("paper", a) for a in sorted(todo.new_papers)]
    if todo.all_researchers():
        names.append(keys.missing_name("researcher", "any"))
    if todo.all_institutions():
        names.append(keys.missing_name("institution", "any"))
    return names


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
    todo = Touched(lists=False)
    todo.update(cache.pending_invalidation)
    todo.update(touched)
    if not todo:
        return
    cache.pending_invalidation = Touched(lists=False)
    entities = _entities(todo)
    names = _dropped_alone(todo)
    # A page of the harvest touches thousands of entities: in calls of BATCH entities, each bounded by a round trip
    # per CHUNK of them besides the fixed ones (a bound of a fixed few for all of them never let such a page
    # through, and deferred, it only grew with each page after). With replicas, each writing step may wait a timeout
    # for one's acknowledgement.
    for start in range(0, max(len(entities), 1), BATCH):
        batch = entities[start : start + BATCH]
        calls = 2 + -(-len(batch) // CHUNK)
        done = await cache.call(
            partial(_run, cache=cache, entities=batch, names=names if start == 0 else [], position=position),
            round_trips=calls * (2 if replicated(cache.redis) else 1),
        )
        if isinstance(done, Unavailable):
            cache.metrics.invalidation_failures += 1
            # All of it again next time: dropping what was already dropped is harmless.
            cache.pending_invalidation.update(todo)
            log.warning("cache invalidation deferred for %d entities: Redis unavailable", len(entities))
            return


def _entities(todo: Touched) -> list[_Entity]:
    # A paper's responses are tagged by its arXiv id (its global id names it); by database id too, for
    # responses cached under ids issued before.
    entities = [_Entity("paper", i) for i in sorted(todo.papers)]
    entities += [_Entity("paper", k) for k in sorted(todo.paper_keys)]
    for kind, named, figures in (
        ("researcher", todo.researchers, todo.researcher_figures),
        ("institution", todo.institutions, todo.institution_figures),
    ):
        entities += [_Entity(kind, i, renamed=i in named) for i in sorted(named | figures)]
    return entities


async def _run(
    redis: RedisClient,
    cache: CacheStore,
    entities: list[_Entity],
    names: list[str],
    position: int | None,
) -> bool:
    ns = cache.namespace
    cluster = isinstance(redis, RedisCluster)
    ttl = cache.ttl_s * 2
    # Half the socket timeout: the reply must come before the read gives up (a primary without a replica waits it out).
    wait_ms = int(cache.timeout_s * 500) if replicated(redis) else 0
    epoch = os.urandom(8).hex() if cluster else ""  # one server: the first call makes it
    # Before any drop: whoever sees a drop sees the write's position too (a replica that has not replayed it may not
    # fill what the dropped tags name: db/cache/positions.py).
    alone = [keys.tag(ns, name) for name in names if name != keys.LISTS]
    lists = keys.LISTS in names
    dropped = [*(keys.lists_tags(ns) if lists else []), *alone]
    dropped += [tag for e in entities for tag in e.tags(ns)]
    await record_invalidation(redis, dropped, position)
    # Step 1: every bucket's epoch and lists tag (one script per bucket on a Cluster, else one for all).
    buckets: dict[int, _Work] = {}
    for epoch_key, lists_key in zip(keys.response_epochs(ns), keys.lists_tags(ns), strict=True):
        work = buckets.setdefault(slot(epoch_key) if cluster else 0, _Work())
        work.epochs.append(epoch_key)
        if lists:
            work.alone.append(lists_key)
    # Step 2: each entity's set, generation and aggregates, grouped by hash tag, at most CHUNK entities a call.
    groups: dict[int, list[_Work]] = {}
    for tag in alone:
        _work_for(groups, slot(tag) if cluster else 0).alone.append(tag)
    for e in entities:
        pair, plain = _entity_keys(ns, e.kind, e.id)
        work = _work_for(groups, slot(pair[0]) if cluster else 0)
        work.pairs += pair
        work.plain += plain
        work.entities += 1
        for name_tag in e.tags(ns)[1:]:
            if cluster:  # under its own hash tag
                elsewhere = _work_for(groups, slot(name_tag))
                elsewhere.alone.append(name_tag)
                elsewhere.entities += 1
            else:
                work.alone.append(name_tag)
    if cluster:
        await _DROP.run_many(redis, [w.call(ttl, epoch, False) for w in buckets.values()], replicated_ms=wait_ms)
        entity_calls = [w.call(ttl, epoch, False) for ws in groups.values() for w in ws]
        found = await _DROP.run_many(redis, entity_calls, replicated_ms=wait_ms)
        # Step 3: the members, under their own hash tags.
        by_slot: dict[int, list[str]] = {}
        for result in found:
            for member in result if isinstance(result, list) else ():
                name = member.decode() if isinstance(member, bytes) else str(member)
                by_slot.setdefault(slot(name), []).append(name)
        deletes: list[Call] = [
            (names_[i : i + 1000], []) for names_ in by_slot.values() for i in range(0, len(names_), 1000)
        ]
        await _DELETE.run_many(redis, deletes, replicated_ms=wait_ms)
    else:
        # One server: the epochs first, in the first call, with the first entities.
        first = buckets[0]
        chunks = groups.get(0, [])
        if chunks:
            head = chunks.pop(0)
            first.alone += head.alone
            first.pairs += head.pairs
            first.plain += head.plain
        made = (await _DROP.run_many(redis, [first.call(ttl, epoch, True)], replicated_ms=wait_ms))[0]
        epoch = _text(made[0]) if isinstance(made, list) and made else ""  # "": each chunk makes its own, later
        await _DROP.run_many(redis, [w.call(ttl, epoch, True) for w in chunks], replicated_ms=wait_ms)
    # Step 4: tell the workers, then one more round trip on the same server: Redis has written the message to every
    # subscriber before it answers a later command, so once this returns the next request on any worker sees the
    # drop (edge/near.py).
    channel = keys.invalidations(ns)
    message = " ".join([*names, *(name for e in entities for name in e.names())])
    if isinstance(redis, RedisCluster):
        await redis.execute_command("SPUBLISH", channel, message)
        await redis.exists(channel)  # routed by the channel's slot: the same primary
    else:
        await redis.publish(channel, message)
        await redis.ping()
    return True


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _work_for(groups: dict[int, list[_Work]], key: int) -> _Work:
    chunks = groups.setdefault(key, [_Work()])
    if chunks[-1].entities >= CHUNK:
        chunks.append(_Work())
    return chunks[-1]


def purge_tags(ns: str, touched: Touched) -> list[str]:
    """The CDN tags a write makes stale: the same names as the responses' `Surrogate-Key`."""
    return [*_dropped_alone(touched), *(name for e in _entities(touched) for name in e.names())]
