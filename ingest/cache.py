"""The cache after an ingest batch commits."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import Final, TypeVar

import asyncpg

from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.queries.replication import committed_position
from db.records import Touched

log = logging.getLogger("ingest")

# The ingest waits longer for Redis than a request does (settings.redis_timeout_s, a quarter of a second): a harvest
# page drops thousands of entities in scripts that can take longer than that on a busy host, and a drop that timed out
# must be sent again, where a request would just answer from PostgreSQL.
INGEST_REDIS_TIMEOUT_S: Final = 2.0
# How long a run that ends with drops Redis has not taken keeps sending them: what it committed stays, and the
# entries it made stale would otherwise be answered until their TTL.
DELIVER_WITHIN_S: Final = 60.0


async def commit_position(cache: CacheStore | None, conn: asyncpg.Connection) -> int | None:
    """Right after a commit, on its connection: where it is in the WAL (None without a cache, or when the server
    cannot say). The invalidation keeps it, so that no replica fills a cache with what the commit changed before it
    has replayed it; an unknown position keeps them all from filling those entries for a while."""
    if cache is None:
        return None
    try:
        return await committed_position(conn)
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        log.warning("WAL position after a commit unknown (%s): replicas will not refill its entries for a while", exc)
        return None


async def invalidate_after_commit(cache: CacheStore | None, touched: Touched, position: int | None) -> None:
    """Forget cached aggregates of what a committed batch touched (never call before the commit); `position`: the
    commit's (commit_position). Carried to its end when the run is stopped meanwhile (`to_the_end`)."""
    if touched:
        await to_the_end(invalidate(cache, touched, position=position))


async def tell_after_commit(cache: CacheStore | None, conn: asyncpg.Connection, touched: Touched) -> None:
    """Right after a commit, on its connection: its WAL position, then the cache forgets what it touched; carried to
    its end when the run is stopped meanwhile."""
    await to_the_end(_tell(cache, conn, touched))


async def _tell(cache: CacheStore | None, conn: asyncpg.Connection, touched: Touched) -> None:
    if touched:
        await invalidate(cache, touched, position=await commit_position(cache, conn))


T = TypeVar("T")


async def to_the_end(work: Awaitable[T]) -> T:
    """`work`'s result; when the caller is cancelled meanwhile (a run stopped by Ctrl-C or SIGTERM), `work` still
    runs to its end before the cancellation goes on: a committed write whose drop from the cache was cut would be
    answered stale until its TTL. A second cancellation stops waiting for it."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if not task.done():
            await asyncio.wait({task})
        raise


async def deliver_pending(
    cache: CacheStore | None, *, within_s: float = DELIVER_WITHIN_S, pause_s: float = 1.0
) -> bool:
    """At the end of a run: send the drops Redis did not take during it (each invalidation keeps them for the next)
    again until Redis takes them or `within_s` has passed. False, logged as an error, when some are still not sent:
    their entries go with their TTL."""
    if cache is None or not cache.pending_invalidation:
        return True
    deadline = time.monotonic() + within_s
    while cache.pending_invalidation:
        if time.monotonic() >= deadline:
            log.error(
                "cache invalidation of %d entities not delivered: Redis did not take it within %.0f s; the answers "
                "they name may be stale until their TTL (WOVEPAPER_CACHE_TTL_S)",
                _count(cache.pending_invalidation),
                within_s,
            )
            return False
        await asyncio.sleep(pause_s)  # the circuit breaker, open after the failures, lets a probe through in time
        await invalidate(cache, Touched())
    return True


def _count(touched: Touched) -> int:
    people = len(touched.all_researchers()) + len(touched.all_institutions())
    return len(touched.papers) + len(touched.paper_keys) + people
