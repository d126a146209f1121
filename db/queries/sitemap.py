"""The sitemap listing: every paper, researcher and institution with slug and last-modified time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from db.paging import encode_global_id
from db.slugs import entity_slug

SitemapKind = Literal["PAPER", "RESEARCHER", "INSTITUTION"]


# A plain connection or one acquired from the pool.
Conn = asyncpg.Connection | PoolConnectionProxy


@dataclass(slots=True)
class SitemapRow:
    kind: SitemapKind
    id: int
    slug: str
    modified_at: datetime

    @property
    def node_id(self) -> str:
        return encode_global_id(self.kind.title(), self.id)


# Keyset on (modified_at, id): each page is one index range scan, however deep the walk.
_SQL: dict[SitemapKind, tuple[str, str]] = {
    "PAPER": (
        "SELECT id, slug, modified_at FROM papers ORDER BY modified_at, id LIMIT $1",
        "SELECT id, slug, modified_at FROM papers WHERE (modified_at, id) > ($2::timestamptz, $3::bigint)"
        " ORDER BY modified_at, id LIMIT $1",
    ),
    "RESEARCHER": (
        "SELECT id, name_slug, modified_at FROM researchers ORDER BY modified_at, id LIMIT $1",
        "SELECT id, name_slug, modified_at FROM researchers WHERE (modified_at, id) > ($2::timestamptz, $3::bigint)"
        " ORDER BY modified_at, id LIMIT $1",
    ),
    "INSTITUTION": (
        "SELECT id, name_slug, modified_at FROM institutions ORDER BY modified_at, id LIMIT $1",
        "SELECT id, name_slug, modified_at FROM institutions WHERE (modified_at, id) > ($2::timestamptz, $3::bigint)"
        " ORDER BY modified_at, id LIMIT $1",
    ),
}


async def page_sitemap(
    conn: Conn, kind: SitemapKind, *, limit: int, after: tuple[datetime, int] | None = None
) -> list[SitemapRow]:
    first_page, next_page = _SQL[kind]
    records = await conn.fetch(first_page, limit) if after is None else await conn.fetch(next_page, limit, *after)
    if kind == "PAPER":
        return [SitemapRow(kind, r[0], r[1], r[2]) for r in records]
    return [SitemapRow(kind, r[0], entity_slug(r[0], r[1]), r[2]) for r in records]
