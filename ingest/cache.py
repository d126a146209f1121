"""The cache after an ingest batch commits."""

from __future__ import annotations

import logging

import asyncpg

from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.queries.replication import committed_position
from db.records import Touched

log = logging.getLogger("ingest")


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
    commit's (commit_position)."""
    if touched:
        await invalidate(cache, touched, position=position)
