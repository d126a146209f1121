"""The cache after an ingest batch commits."""

from __future__ import annotations

from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.records import Touched


async def invalidate_after_commit(cache: CacheStore | None, touched: Touched) -> None:
    """Forget cached aggregates of what a committed batch touched (never call before the commit)."""
    if touched:
        await invalidate(cache, touched)
