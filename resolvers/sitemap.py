"""The sitemap listing, walked by keyset on (modified_at, id)."""

from __future__ import annotations

from dataclasses import dataclass

from db.paging import TokenError, datetime_to_micros, decode_cursor, encode_cursor, micros_to_datetime
from db.queries.sitemap import SitemapKind, SitemapRow, page_sitemap
from resolvers.context import Context
from resolvers.errors import BadUserInput

DEFAULT_SITEMAP_FIRST = 1000
MAX_SITEMAP_FIRST = 5000


@dataclass(frozen=True, slots=True)
class SitemapPageResult:
    entries: list[SitemapRow]
    has_next_page: bool
    end_cursor: str | None


async def resolve_sitemap(
    ctx: Context, kind: SitemapKind, *, first: int | None, after: str | None
) -> SitemapPageResult:
    size = DEFAULT_SITEMAP_FIRST if first is None else first
    if not 1 <= size <= MAX_SITEMAP_FIRST:
        raise BadUserInput(f"`first` must be between 1 and {MAX_SITEMAP_FIRST}; got {size}.")
    key = None
    if after is not None:
        try:
            micros, row_id = decode_cursor(after, f"sitemap:{kind}", 2)
            if not isinstance(micros, int) or not isinstance(row_id, int):
                raise TokenError("cursor holds unexpected values")
        except TokenError:
            raise BadUserInput("Malformed `after` cursor: pass `endCursor` from the same sitemap kind.") from None
        key = (micros_to_datetime(micros), row_id)
    async with ctx.pool.acquire() as conn:
        rows = await page_sitemap(conn, kind, limit=size + 1, after=key)
    entries, has_next = rows[:size], len(rows) > size
    end = (
        encode_cursor(f"sitemap:{kind}", (datetime_to_micros(entries[-1].modified_at), entries[-1].id))
        if entries
        else after
    )
    return SitemapPageResult(entries, has_next, end)
