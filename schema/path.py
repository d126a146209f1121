from __future__ import annotations

from datetime import datetime
from enum import Enum

import strawberry

from resolvers.context import Info
from resolvers.path import PathResult, resolve_path
from resolvers.sitemap import SitemapPageResult, resolve_sitemap
from schema.derived import derived, entity_node_id
from schema.enums import SitemapKind
from schema.node import Node


@strawberry.enum(description="How a requested path led to its page.")
class PathMatch(Enum):
    CANONICAL = "CANONICAL"
    ID = "ID"
    SLUG = "SLUG"
    NAME = "NAME"
    SIMILAR_NAME = "SIMILAR_NAME"
    MERGED = "MERGED"


@strawberry.type(description="Where a site path leads.")
class PathResolution:
    path: str = strawberry.field(description="The canonical path, e.g. /papers/2401.01234-title-words.")
    redirect: bool = strawberry.field(description="True when the requested path differs: redirect to `path`.")
    node: Node = strawberry.field(description="The paper, researcher or institution at the path.")
    matched_by: PathMatch = strawberry.field(
        description="CANONICAL: the path is the canonical one. ID: an id form (arXiv id, DOI, numeric id, ROR "
        "id, ...). SLUG: an older slug of the same page. NAME: an institution's name, alias or acronym, exactly. "
        "SIMILAR_NAME: no institution has that name; this one's is the most similar (a guess). MERGED: the "
        "researcher was merged into this one."
    )


@strawberry.type(description="One indexable page for the sitemap.")
class SitemapEntry:
    node_id: strawberry.ID = derived(entity_node_id, name="id", description="Global id of the object.")
    id: int = strawberry.field(name="databaseId")
    slug: str
    path: str = strawberry.field(description="The site path: /papers/<slug>, /researchers/<slug>, /institutions/...")
    modified_at: datetime = strawberry.field(description="Last modification, for <lastmod>.")


async def _total_count(root: SitemapPageResult) -> int:
    return await root.total_count()


async def _chunk_count(root: SitemapPageResult) -> int:
    return await root.chunk_count()


@strawberry.type(
    description="A keyset page (oldest modification first) or a numbered chunk (by database id) of the sitemap "
    "listing. Withdrawn papers are not listed."
)
class SitemapPage:
    entries: list[SitemapEntry]
    has_next_page: bool = strawberry.field(description="Keyset pages: whether `endCursor` leads further.")
    end_cursor: str | None = strawberry.field(description="Pass as `after` for the next page.")
    chunk: int | None = strawberry.field(description="The chunk asked for; null for keyset pages.")
    chunk_size: int = strawberry.field(description="Database ids per chunk.")
    total_count: int = strawberry.field(
        resolver=_total_count, description="Entries of this kind in the whole sitemap (all pages or chunks)."
    )
    chunk_count: int = strawberry.field(
        resolver=_chunk_count,
        description="How many chunks of `chunkSize` ids cover every entry: chunks 0 to chunkCount - 1 "
        "(for Next.js generateSitemaps).",
    )


@strawberry.type
class PathQuery:
    @strawberry.field(
        description="The canonical path for a site route (/papers/<id-or-slug>, /researchers/<id-or-slug>, "
        "/institutions/<id-ror-or-name>) and whether to redirect (a paper asked for by another id form, a "
        "researcher merged into another, a slug that changed); null when nothing is there, as `paper(id:)` "
        "and `researcher(id:)` answer. `matchedBy` says how the path matched.",
        graphql_type=PathResolution | None,
    )
    async def resolve_path(self, info: Info, path: str) -> PathResult | None:
        return await resolve_path(info.context, path)

    @strawberry.field(
        description="Every paper (withdrawn ones aside), researcher or institution with its site path and "
        "last-modified time. Either keyset pages walked with `after` (oldest modification first, each page costs "
        "the same; `first` 1 to 5000, default 1000) or numbered chunks: `chunk` N (from 0) holds the entries whose "
        "databaseId is N × chunkSize + 1 to (N + 1) × chunkSize (`chunkSize` 1 to 50000, default 10000), so a "
        "page stays in its chunk; `chunkCount` says how many there are.",
        graphql_type=SitemapPage,
    )
    async def sitemap(
        self,
        info: Info,
        kind: SitemapKind,
        first: int | None = None,
        after: str | None = None,
        chunk: int | None = None,
        chunk_size: int | None = None,
    ) -> SitemapPageResult:
        return await resolve_sitemap(
            info.context, kind.value, first=first, after=after, chunk=chunk, chunk_size=chunk_size
        )
