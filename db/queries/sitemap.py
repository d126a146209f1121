"""The sitemap listing: every paper, researcher and institution with its site path and last-modified time.

Withdrawn papers are not listed (their pages stay reachable, but are not worth indexing). Two ways to walk it:
keyset pages on (modified_at, id), or numbered chunks of database ids (chunk N holds the ids from
N * size + 1 to (N + 1) * size), which a sitemap index addresses directly and where a page stays in its chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg

from db.connection import Conn
from db.slugs import entity_slug

SitemapKind = Literal["PAPER", "RESEARCHER", "INSTITUTION"]
SITE_SECTIONS: dict[SitemapKind, str] = {"PAPER": "papers", "RESEARCHER": "researchers", "INSTITUTION": "institutions"}


@dataclass(slots=True)
class SitemapRow:
    kind: SitemapKind
    id: int
    slug: str
    modified_at: datetime
    arxiv_id: str | None = None

    @property
    def path(self) -> str:
        return f"/{SITE_SECTIONS[self.kind]}/{self.slug}"


# Columns: id, slug (papers) or name_slug, modified_at, arxiv_id (papers) or NULL. `{where}` selects the rows.
_SELECT: dict[SitemapKind, str] = {
    "PAPER": "SELECT id, slug, modified_at, arxiv_id FROM papers WHERE NOT withdrawn AND {where}",
    "RESEARCHER": "SELECT id, name_slug, modified_at, NULL FROM researchers WHERE {where}",
    "INSTITUTION": "SELECT id, name_slug, modified_at, NULL FROM institutions WHERE {where}",
}
_TABLES: dict[SitemapKind, tuple[str, str]] = {
    "PAPER": ("papers", "NOT withdrawn"),
    "RESEARCHER": ("researchers", "true"),
    "INSTITUTION": ("institutions", "true"),
}
# Keyset on (modified_at, id): each page is one index range scan, however deep the walk.
_FIRST_PAGE = {k: sql.format(where="true") + " ORDER BY modified_at, id LIMIT $1" for k, sql in _SELECT.items()}
_NEXT_PAGE = {
    k: sql.format(where="(modified_at, id) > ($2::timestamptz, $3::bigint)") + " ORDER BY modified_at, id LIMIT $1"
    for k, sql in _SELECT.items()
}
_CHUNK = {k: sql.format(where="id BETWEEN $1::bigint AND $2::bigint") + " ORDER BY id" for k, sql in _SELECT.items()}
_COUNT = {k: f"SELECT count(*), coalesce(max(id), 0) FROM {table} WHERE {cond}" for k, (table, cond) in _TABLES.items()}


def _rows(kind: SitemapKind, records: list[asyncpg.Record]) -> list[SitemapRow]:
    if kind == "PAPER":
        return [SitemapRow(kind, r[0], r[1], r[2], r[3]) for r in records]
    return [SitemapRow(kind, r[0], entity_slug(r[0], r[1]), r[2]) for r in records]


async def page_sitemap(
    conn: Conn, kind: SitemapKind, *, limit: int, after: tuple[datetime, int] | None = None
) -> list[SitemapRow]:
    """Entries by modification time, oldest first, after the keyset position `after`."""
    if after is None:
        return _rows(kind, await conn.fetch(_FIRST_PAGE[kind], limit))
    return _rows(kind, await conn.fetch(_NEXT_PAGE[kind], limit, *after))


async def fetch_sitemap_chunk(conn: Conn, kind: SitemapKind, *, chunk: int, size: int) -> list[SitemapRow]:
    """The entries whose database ids fall in chunk `chunk` (from 0) of `size` ids, by id."""
    return _rows(kind, await conn.fetch(_CHUNK[kind], chunk * size + 1, (chunk + 1) * size))


async def count_sitemap(conn: Conn, kind: SitemapKind) -> tuple[int, int]:
    """(entries, largest database id): how many entries there are, and how far the id chunks reach."""
    record = await conn.fetchrow(_COUNT[kind])
    assert record is not None
    return int(record[0]), int(record[1])
