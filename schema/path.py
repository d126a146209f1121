from __future__ import annotations

from datetime import datetime
from typing import cast

import strawberry

from resolvers.path import resolve_path
from resolvers.sitemap import resolve_sitemap
from schema.enums import SitemapKind
from schema.node import Node
from schema.types import Info


@strawberry.type(description="Where a site path leads.")
class PathResolution:
    path: str = strawberry.field(description="The canonical path, e.g. /papers/2401.01234-title-words.")
    redirect: bool = strawberry.field(description="True when the requested path differs: redirect to `path`.")
    node: Node = strawberry.field(description="The paper, researcher or institution at the path.")


@strawberry.type(description="One indexable page for the sitemap.")
class SitemapEntry:
    node_id: strawberry.ID = strawberry.field(name="id", description="Global id of the object.")
    id: int = strawberry.field(name="databaseId")
    slug: str
    modified_at: datetime = strawberry.field(description="Last modification, for <lastmod>.")


@strawberry.type(description="A page of the sitemap listing, oldest modification first.")
class SitemapPage:
    entries: list[SitemapEntry]
    has_next_page: bool
    end_cursor: str | None = strawberry.field(description="Pass as `after` for the next page.")


@strawberry.type
class PathQuery:
    @strawberry.field(
        description="The canonical path for a site route (/papers/<id-or-slug>, /researchers/<id-or-slug>, "
        "/institutions/<id-ror-or-name>) and whether to redirect; a NOT_FOUND error when nothing is there."
    )
    async def resolve_path(self, info: Info, path: str) -> PathResolution:
        return cast(PathResolution, await resolve_path(info.context, path))

    @strawberry.field(
        description="Every paper, researcher or institution with slug and last-modified time, in pages walked "
        "with `after` (keyset on modification time, so each page costs the same). `first` 1 to 5000, default 1000."
    )
    async def sitemap(
        self, info: Info, kind: SitemapKind, first: int | None = None, after: str | None = None
    ) -> SitemapPage:
        return cast(SitemapPage, await resolve_sitemap(info.context, kind.value, first=first, after=after))
