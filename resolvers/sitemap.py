"""The sitemap listing: keyset pages on (modified_at, id), or numbered chunks of ids with their count."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from db.paging import TokenError, datetime_to_micros, decode_cursor, encode_cursor, micros_to_datetime
from db.queries.sitemap import SitemapKind, SitemapRow, count_sitemap, fetch_sitemap_chunk, page_sitemap
from resolvers.context import Context
from resolvers.errors import BadUserInput

DEFAULT_SITEMAP_FIRST = 1000
MAX_SITEMAP_FIRST = 5000
DEFAULT_CHUNK_SIZE = 10_000
# The sitemap protocol's limit of URLs per sitemap file.
MAX_CHUNK_SIZE = 50_000
MAX_CHUNK = 2**31 // MAX_CHUNK_SIZE


@dataclass(slots=True)
class SitemapPageResult:
    entries: list[SitemapRow]
    has_next_page: bool
    end_cursor: str | None
    chunk: int | None
    chunk_size: int
    counted: Callable[[], Awaitable[tuple[int, int]]]

    async def total_count(self) -> int:
        return (await self.counted())[0]

    async def chunk_count(self) -> int:
        return -(-(await self.counted())[1] // self.chunk_size)


def _after_key(kind: SitemapKind, after: str) -> tuple[int, int]:
    try:
        micros, row_id = decode_cursor(after, f"sitemap:{kind}", 2)
        if not isinstance(micros, int) or not isinstance(row_id, int):
            raise TokenError("cursor holds unexpected values")
        micros_to_datetime(micros)
    except TokenError:
        raise BadUserInput("Malformed `after` cursor: pass `endCursor` from the same sitemap kind.") from None
    return micros, row_id


async def resolve_sitemap(
    ctx: Context,
    kind: SitemapKind,
    *,
    first: int | None,
    after: str | None,
    chunk: int | None = None,
    chunk_size: int | None = None,
) -> SitemapPageResult:
    size = DEFAULT_CHUNK_SIZE if chunk_size is None else chunk_size
    if not 1 <= size <= MAX_CHUNK_SIZE:
        raise BadUserInput(f"`chunkSize` must be between 1 and {MAX_CHUNK_SIZE}; got {size}.")
    counting: asyncio.Task[tuple[int, int]] | None = None

    async def count() -> tuple[int, int]:
        async with ctx.pool.acquire() as conn:
            return await count_sitemap(conn, kind)

    def counted() -> Awaitable[tuple[int, int]]:
        # `totalCount` and `chunkCount` resolve at once: one statement answers both.
        nonlocal counting
        if counting is None:
            counting = asyncio.ensure_future(count())
        return counting

    if chunk is not None:
        if first is not None or after is not None:
            raise BadUserInput("Use either `chunk` (numbered chunks) or `first`/`after` (keyset pages), not both.")
        if not 0 <= chunk <= MAX_CHUNK:
            raise BadUserInput(f"`chunk` counts from 0 (see `chunkCount`); got {chunk}.")
        async with ctx.pool.acquire() as conn:
            rows = await fetch_sitemap_chunk(conn, kind, chunk=chunk, size=size)
        return SitemapPageResult(rows, False, None, chunk, size, counted)
    limit = DEFAULT_SITEMAP_FIRST if first is None else first
    if not 1 <= limit <= MAX_SITEMAP_FIRST:
        raise BadUserInput(f"`first` must be between 1 and {MAX_SITEMAP_FIRST}; got {limit}.")
    key = None
    if after is not None:
        micros, row_id = _after_key(kind, after)
        key = (micros_to_datetime(micros), row_id)
    async with ctx.pool.acquire() as conn:
        rows = await page_sitemap(conn, kind, limit=limit + 1, after=key)
    entries, has_next = rows[:limit], len(rows) > limit
    end = (
        encode_cursor(f"sitemap:{kind}", (datetime_to_micros(entries[-1].modified_at), entries[-1].id))
        if entries
        else after
    )
    return SitemapPageResult(entries, has_next, end, None, size, counted)
