"""The signed-in reader (`Query.viewer`): null for anonymous requests."""

from __future__ import annotations

from typing import cast

import strawberry

from resolvers.viewer import (
    resolve_feed_url,
    resolve_following_institutions,
    resolve_following_researchers,
    resolve_viewer_feed,
    viewer_id,
)
from schema.inputs import PaperFilter
from schema.institution import InstitutionConnection
from schema.paper import PaperConnection, as_paper_connection
from schema.researcher import ResearcherConnection, as_researcher_connection
from schema.types import Info


@strawberry.type(description="The signed-in reader. Never served from or stored in a shared cache.")
class Viewer:
    id: strawberry.ID = strawberry.field(description="The reader's id: the `sub` of the site's token.")
    # Known when the request just created or rotated it.
    feed_token: strawberry.Private[str | None] = None

    @strawberry.field(
        description="Researchers the reader follows, most recently followed first. "
        "`first` 1 to 100 (default 24); `page` or `after`."
    )
    async def following(
        self, info: Info, first: int | None = None, after: str | None = None, page: int | None = None
    ) -> ResearcherConnection:
        connection = await resolve_following_researchers(info, first=first, after=after, page=page)
        return as_researcher_connection(connection)

    @strawberry.field(
        description="Institutions the reader follows, most recently followed first. "
        "`first` 1 to 100 (default 24); `page` or `after`."
    )
    async def following_institutions(
        self, info: Info, first: int | None = None, after: str | None = None, page: int | None = None
    ) -> InstitutionConnection:
        connection = await resolve_following_institutions(info, first=first, after=after, page=page)
        return cast(InstitutionConnection, connection)

    @strawberry.field(
        description="Papers by the researchers or at the institutions the reader follows, newest first, each "
        "once. `first` 1 to 100 (default 24); `page` or `after`. `totalCount` counts every followed paper (its "
        "cost grows with them): ask for it only where it is shown."
    )
    async def feed(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
        filter: PaperFilter | None = None,
    ) -> PaperConnection:
        connection = await resolve_viewer_feed(
            info, filter.to_args() if filter else None, first=first, after=after, page=page
        )
        return as_paper_connection(connection)

    @strawberry.field(
        description="The reader's personal RSS feed (the same papers as `feed`). The URL holds a secret token: "
        "`rotateFeedToken` replaces it, and the old URL stops working at once."
    )
    async def feed_url(self, info: Info) -> str:
        return await resolve_feed_url(info.context, self.feed_token)


@strawberry.type
class ViewerQuery:
    @strawberry.field(description="The signed-in reader (from `Authorization: Bearer <JWT>`); null when anonymous.")
    def viewer(self, info: Info) -> Viewer | None:
        vid = viewer_id(info.context)
        return Viewer(id=strawberry.ID(vid)) if vid is not None else None
