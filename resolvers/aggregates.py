"""Researcher and institution aggregates: read through the Redis cache, computed in PostgreSQL on a miss.

Sibling fields of one researcher (hIndexInArchive, fields, authorPositions, ...) share one cached
statistics entry; when they resolve concurrently the store's single flight makes it one Redis read.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

from db.cache import keys
from db.cache.store import CacheStore, EntityRef
from db.queries.aggregates import (
    MAX_COAUTHORS,
    MAX_TOP_RESEARCHERS,
    CoauthorRow,
    InstitutionStatsRow,
    NetworkRow,
    ResearcherStatsRow,
    fetch_institution_stats,
    fetch_researcher_coauthors,
    fetch_researcher_network,
    fetch_researcher_stats,
    fetch_researcher_stats_and_most_cited,
)
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Context
from resolvers.errors import BadUserInput

MAX_NETWORK_LIMIT = 200
MAX_MIN_SHARED = 1000


def check_first(first: int, maximum: int = MAX_TOP_RESEARCHERS) -> None:
    if not 1 <= first <= maximum:
        raise BadUserInput(f"`first` must be between 1 and {maximum}.")


async def researcher_rows(ctx: Context, ids: list[int]) -> dict[int, ResearcherRow]:
    """Researchers by id through the request's loader (one batched statement for all of them)."""
    rows = await ctx.loaders.researcher_by_id.load_many(ids)
    return {r.id: r for r in rows if r is not None}


def _optional(load: Any) -> Any:
    def inner(d: Any) -> Any:
        return None if d is None else load(d)

    return inner


async def load_researcher_stats(
    pool: asyncpg.Pool, cache: CacheStore | None, researcher_id: int, *, most_cited: list[PaperRow] | None = None
) -> ResearcherStatsRow | None:
    """The statistics, from the cache or computed; computed here, their most cited paper is read by the same
    statement and appended to `most_cited` when given. An id that names no one is not cached: the row answers
    that, and the statistics start before it (`researcher_stats`), so a kept "none" would let made-up ids fill
    Redis."""

    async def compute() -> ResearcherStatsRow | None:
        async with pool.acquire() as conn:
            if most_cited is None:
                return await fetch_researcher_stats(conn, researcher_id=researcher_id)
            stats, paper = await fetch_researcher_stats_and_most_cited(conn, researcher_id=researcher_id)
        if paper is not None:
            most_cited.append(paper)
        return stats

    if cache is None:
        return await compute()
    result: ResearcherStatsRow | None = await cache.get_or_compute(
        keys.researcher_stats(cache.namespace, researcher_id),
        compute,
        load=_optional(ResearcherStatsRow.from_json),
        owner=EntityRef("researcher", researcher_id),
        keep_none=False,
    )
    return result


def researcher_stats(ctx: Context, researcher_id: int) -> asyncio.Task[ResearcherStatsRow | None]:
    """The researcher's statistics for this request, read once for all the fields that show them; the first caller
    starts it (`resolve_researcher` does, beside the researcher's row, when the selection shows them). Computed
    here, their most cited paper comes with them and `mostCitedPaper` is answered without a statement."""

    async def load() -> ResearcherStatsRow | None:
        most_cited: list[PaperRow] = []
        stats = await load_researcher_stats(ctx.pool, ctx.cache, researcher_id, most_cited=most_cited)
        ctx.loaders.prime_papers(most_cited)
        return stats

    return ctx.loaders.started(("researcher_stats", researcher_id), load)


def institution_stats(ctx: Context, institution_id: int) -> asyncio.Task[InstitutionStatsRow | None]:
    """The institution's statistics for this request, read once (as `researcher_stats`)."""
    return ctx.loaders.started(
        ("institution_stats", institution_id), lambda: load_institution_stats(ctx.pool, ctx.cache, institution_id)
    )


async def load_researcher_coauthors(
    pool: asyncpg.Pool, cache: CacheStore | None, researcher_id: int, *, first: int
) -> list[CoauthorRow]:
    check_first(first, MAX_COAUTHORS)

    async def compute() -> list[CoauthorRow]:
        async with pool.acquire() as conn:
            return await fetch_researcher_coauthors(conn, researcher_id=researcher_id, limit=MAX_COAUTHORS)

    if cache is None:
        rows = await compute()
    else:
        rows = await cache.get_or_compute(
            keys.researcher_coauthors(cache.namespace, researcher_id),
            compute,
            load=lambda d: [CoauthorRow.from_json(x) for x in d],
            owner=EntityRef("researcher", researcher_id),
        )
    return rows[:first]


def check_network_arguments(depth: int, min_shared: int, limit: int) -> None:
    if depth not in (1, 2):
        raise BadUserInput("`depth` must be 1 or 2.")
    if not 1 <= min_shared <= MAX_MIN_SHARED:
        raise BadUserInput(f"`minShared` must be between 1 and {MAX_MIN_SHARED}.")
    if not 1 <= limit <= MAX_NETWORK_LIMIT:
        raise BadUserInput(f"`limit` must be between 1 and {MAX_NETWORK_LIMIT}.")


async def load_researcher_network(
    pool: asyncpg.Pool, cache: CacheStore | None, researcher_id: int, *, depth: int, min_shared: int, limit: int
) -> NetworkRow | None:
    check_network_arguments(depth, min_shared, limit)

    async def compute() -> NetworkRow | None:
        async with pool.acquire() as conn:
            return await fetch_researcher_network(
                conn, researcher_id=researcher_id, depth=depth, min_shared=min_shared, limit=limit
            )

    if cache is None:
        return await compute()
    result: NetworkRow | None = await cache.get_or_compute(
        keys.researcher_network(cache.namespace, researcher_id, depth=depth, min_shared=min_shared, limit=limit),
        compute,
        load=_optional(NetworkRow.from_json),
        owner=EntityRef("researcher", researcher_id),
        # Edges between other researchers change when they write together: every node's
        # invalidation drops this network.
        tags=lambda n: [EntityRef("researcher", x.researcher_id) for x in n.nodes] if n is not None else [],
    )
    return result


async def load_institution_stats(
    pool: asyncpg.Pool, cache: CacheStore | None, institution_id: int
) -> InstitutionStatsRow | None:
    """The statistics, from the cache or computed (an id naming no institution is not cached, as a researcher's)."""

    async def compute() -> InstitutionStatsRow | None:
        async with pool.acquire() as conn:
            return await fetch_institution_stats(conn, institution_id=institution_id, top=MAX_TOP_RESEARCHERS)

    if cache is None:
        return await compute()
    result: InstitutionStatsRow | None = await cache.get_or_compute(
        keys.institution_stats(cache.namespace, institution_id),
        compute,
        load=_optional(InstitutionStatsRow.from_json),
        owner=EntityRef("institution", institution_id),
        # Top researchers rank by their stored figures: a researcher's refresh may reorder them.
        tags=lambda s: [EntityRef("researcher", x) for x in s.top_researcher_ids] if s is not None else [],
        keep_none=False,
    )
    return result
