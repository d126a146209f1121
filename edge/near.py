"""Whole responses held in this process, in front of Redis, kept true by the invalidations every worker hears.

A hit here crosses no network. It stays true across workers because every invalidation publishes the tags it
dropped on `keys.invalidations(ns)` in the same atomic step as the drop, and the writer waits one more round
trip before it returns (db/cache/invalidation.py): by then the message is in every subscriber's socket. Each
process subscribes and reads its messages as they arrive: the event loop watches the subscription's socket and
hears what it holds in the same turn that reads any request arriving after it, before that request's task runs;
so a hit costs no system call of its own. So a write whose invalidation returned is seen by the next request on
any worker, as with Redis alone.

On a Cluster the channel is a shard channel (SSUBSCRIBE on the primary of its slot, where the writer publishes and
waits); under Sentinel it is followed to the primary Sentinel names. Without the subscription (not yet connected,
broken, its health PING unanswered, its server failed over, its slot moved) messages may have been missed:
everything held is forgotten, and nothing is served or kept until it is back. An entry lives at most
`max_age_s`, and memory is bounded by `max_bytes` (least recently used first), each entry charged its body, its tags
(twice: in the entry and in the index by tag) and its bookkeeping. Nothing read or stored while an
invalidation arrived is kept (`mark()` before the Redis call, `keep(..., since=mark)` after it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import redis
from redis.asyncio.cluster import RedisCluster
from redis.client import PubSub
from redis.exceptions import RedisError

from db.cache import keys
from db.cache.client import REDIS_ERRORS, channel_node, close_quietly, subscribe
from settings.redis_target import RedisTarget

log = logging.getLogger(__name__)

# Bytes an entry is charged beyond its body and tags (key, bookkeeping), so many tiny entries stay bounded too ...
ENTRY_OVERHEAD: Final = 512
# ... and each of its tags beyond the tag's text (the index by tag holds every tag again, with a set per tag).
TAG_OVERHEAD: Final = 160
# A subscription whose PING went unanswered this many watch intervals is taken as lost.
MISSED_PINGS: Final = 3


def strong_etag(body: bytes) -> bytes:
    return b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"'


@dataclass(frozen=True, slots=True)
class Held:
    body: bytes
    cost: int  # the query cost a hit is charged
    tags: tuple[str, ...]  # as in `Surrogate-Key`
    etag: bytes
    expires: float
    size: int  # what it is charged against the bound


class NearResponses:
    """One per process; `watch()` (a task of the lifespan) connects, health-checks and reconnects."""

    def __init__(
        self,
        target: RedisTarget | str,
        namespace: str,
        *,
        max_bytes: int,
        max_age_s: float,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        cluster: RedisCluster | None = None,
    ) -> None:
        """`cluster`: the process's Cluster client, which finds the primary of the channel's slot."""
        self.target = RedisTarget(url=target) if isinstance(target, str) else target
        self.cluster = cluster
        self.channel = keys.invalidations(namespace)
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.timeout_s = timeout_s
        self._clock = clock
        self.namespace = namespace
        self._entries: OrderedDict[str, Held] = OrderedDict()
        # The keys holding each tag: one key as itself, several as a set. Most tags are held by one entry, and a
        # set per tag would put tens of thousands of objects in every full pass of the collector.
        self._by_tag: dict[str, str | set[str]] = {}
        self._bytes = 0
        self._pubsub: PubSub | None = None
        self._client: redis.Redis | None = None
        self._manager: object = None
        # The event loop reading the subscription's socket as messages arrive, and its descriptor; without one
        # (a connection redis-py gives no socket for), every answer from here reads the subscription first.
        self._reader: tuple[asyncio.AbstractEventLoop, int] | None = None
        self._sock: object = None
        self._last_pong = 0.0
        # Moves with every invalidation heard and every loss of the subscription.
        self.seq = 0

    # --- what the response cache calls --------------------------------------------------------------------

    def get(self, key: str) -> Held | None:
        if not self.listening():
            return None
        held = self._entries.get(key)
        if held is None:
            return None
        if held.expires <= self._clock():
            self._remove(key)
            return None
        self._entries.move_to_end(key)
        return held

    def mark(self) -> int:
        """Taken before reading or storing in Redis: `keep()` keeps nothing if an invalidation came since."""
        self.listening()
        return self.seq

    def keep(self, key: str, body: bytes, *, cost: int, tags: list[str], since: int) -> None:
        size = len(body) + ENTRY_OVERHEAD + sum(len(t) + TAG_OVERHEAD for t in tags)
        if not self.listening() or self.seq != since or size > self.max_bytes // 8:
            return
        self._remove(key)
        self._entries[key] = Held(body, cost, tuple(tags), strong_etag(body), self._clock() + self.max_age_s, size)
        self._bytes += size
        by_tag = self._by_tag
        for tag in tags:
            held_by = by_tag.get(tag)
            if held_by is None:
                by_tag[tag] = key
            elif isinstance(held_by, set):
                held_by.add(key)
            elif held_by != key:
                by_tag[tag] = {held_by, key}
        while self._bytes > self.max_bytes and self._entries:
            self._remove(next(iter(self._entries)))

    def listening(self) -> bool:
        """Reads what the subscription has delivered; False (and nothing held) without one."""
        if self._pubsub is None:
            return False
        if self._reader is not None:
            return True  # what arrived was read when it did (`_read`)
        return self._read()

    def _read(self) -> bool:
        """Hears every message the subscription holds; False (and nothing held) once it is lost."""
        pubsub = self._pubsub
        if pubsub is None:
            return False
        try:
            while (message := pubsub.get_message(timeout=0.0)) is not None:
                if not self._hear(message):
                    self._lose("unsubscribed by the server (its slot moved)")
                    return False
        except REDIS_ERRORS as exc:
            self._lose(f"{type(exc).__name__}: {exc}")
            return False
        if getattr(pubsub.connection, "_sock", None) is not self._sock:
            # redis-py reconnected (and subscribed again) on its own: what was published meanwhile is lost.
            self._lose("reconnected")
            return False
        return True

    def __len__(self) -> int:
        return len(self._entries)

    # --- the subscription ---------------------------------------------------------------------------------

    async def connect(self) -> bool:
        """Subscribe (in a thread: the client is a blocking one); True once confirmed."""
        try:
            node = None
            if self.target.topology == "cluster":
                if self.cluster is None:
                    raise RedisError("no Cluster client to find the channel's primary")
                node = await channel_node(self.cluster, self.channel)
            client, pubsub, manager = await asyncio.to_thread(
                subscribe,
                self.target,
                self.channel,
                timeout_s=self.timeout_s,
                client_name=f"{self.channel}:listener",
                node=node,
            )
        except REDIS_ERRORS as exc:
            log.warning("near cache: cannot subscribe to invalidations: %s: %s", type(exc).__name__, exc)
            return False
        self.close()
        # The client is kept with its pubsub: a client dropped would close the pool the pubsub reads through.
        self._client, self._pubsub, self._manager = client, pubsub, manager
        self._sock = getattr(pubsub.connection, "_sock", None)
        if isinstance(self._sock, socket.socket):
            loop = asyncio.get_running_loop()
            loop.add_reader(self._sock.fileno(), self._read)
            self._reader = (loop, self._sock.fileno())
        self._last_pong = self._clock()
        return True

    async def watch(self, interval_s: float = 1.0) -> None:
        """Forever: (re)connect when needed, PING the subscription, drop it when PINGs go unanswered."""
        while True:
            if self._pubsub is None:
                await self.connect()
            elif self.listening():
                if self._clock() - self._last_pong > MISSED_PINGS * interval_s:
                    self._lose("health PING unanswered")
                else:
                    self._ping()
            await asyncio.sleep(interval_s)

    def _ping(self) -> None:
        assert self._pubsub is not None
        try:
            self._pubsub.ping()
        except REDIS_ERRORS as exc:
            self._lose(f"{type(exc).__name__}: {exc}")
            return
        if getattr(self._pubsub.connection, "_sock", None) is not self._sock:
            self._lose("reconnected")  # on a socket the event loop does not watch

    def _hear(self, message: dict[str, Any]) -> bool:
        """Acts on one message; False when the server ended the subscription."""
        kind = message["type"]
        if kind in ("message", "smessage"):
            self.seq += 1
            # The tags as a CDN names them (`researcher:7`, `lists`), as each entry holds them.
            for tag in bytes(message["data"]).decode().split():
                held_by = self._by_tag.pop(tag, None)
                for key in (held_by,) if isinstance(held_by, str) else held_by or ():
                    self._remove(key)
        elif kind == "pong":
            self._last_pong = self._clock()
        elif kind in ("unsubscribe", "sunsubscribe"):
            return False
        return True

    def _lose(self, reason: str) -> None:
        log.warning("near cache: invalidation subscription lost (%s); answering from Redis", reason)
        self.close()

    def close(self) -> None:
        pubsub, client, manager, reader = self._pubsub, self._client, self._manager, self._reader
        self._pubsub, self._client, self._manager, self._sock, self._reader = None, None, None, None, None
        self._forget()
        if reader is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                reader[0].remove_reader(reader[1])
        close_quietly(pubsub, client, manager)

    def _forget(self) -> None:
        self.seq += 1
        self._entries.clear()
        self._by_tag.clear()
        self._bytes = 0

    def _remove(self, key: str) -> None:
        held = self._entries.pop(key, None)
        if held is None:
            return
        self._bytes -= held.size
        by_tag = self._by_tag
        for tag in held.tags:
            held_by = by_tag.get(tag)
            if held_by == key:
                del by_tag[tag]
            elif isinstance(held_by, set):
                held_by.discard(key)
                if len(held_by) == 1:
                    by_tag[tag] = held_by.pop()
