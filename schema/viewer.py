"""The signed-in reader (`Query.viewer`): null for anonymous requests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import strawberry

from db.queries.chat import ConversationRow
from db.queries.corrections import CorrectionRow
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.chat import resolve_conversations
from resolvers.context import Info
from resolvers.corrections import resolve_viewer_corrections
from resolvers.pagination import Connection
from resolvers.viewer import (
    resolve_feed_url,
    resolve_following_institutions,
    resolve_following_researchers,
    resolve_viewer_feed,
    viewer_id,
)
from schema.inputs import PaperFilter
from schema.institution import InstitutionConnection
from schema.paper import PaperConnection
from schema.researcher import ResearcherConnection

if TYPE_CHECKING:
    from schema.chat import ConversationConnection
    from schema.corrections import CorrectionConnection


@strawberry.type(description="The signed-in reader. Never served from or stored in a shared cache.")
class Viewer:
    id: strawberry.ID = strawberry.field(description="The reader's id: the `sub` of the site's token.")
    # Known when the request just created or rotated it.
    feed_token: strawberry.Private[str | None] = None

    @strawberry.field(
        description="Researchers the reader follows, most recently followed first. "
        "`first` 1 to 100 (default 24); `page` or `after`.",
        graphql_type=ResearcherConnection,
    )
    async def following(
        self, info: Info, first: int | None = None, after: str | None = None, page: int | None = None
    ) -> Connection[ResearcherRow]:
        return await resolve_following_researchers(info, first=first, after=after, page=page)

    @strawberry.field(
        description="Institutions the reader follows, most recently followed first. "
        "`first` 1 to 100 (default 24); `page` or `after`.",
        graphql_type=InstitutionConnection,
    )
    async def following_institutions(
        self, info: Info, first: int | None = None, after: str | None = None, page: int | None = None
    ) -> Connection[InstitutionRow]:
        return await resolve_following_institutions(info, first=first, after=after, page=page)

    @strawberry.field(
        description="Papers by the researchers or at the institutions the reader follows, newest first, each "
        "once. `first` 1 to 100 (default 24); `page` or `after`. `totalCount` counts every followed paper (its "
        "cost grows with them): ask for it only where it is shown.",
        graphql_type=PaperConnection,
    )
    async def feed(
        self,
        info: Info,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
        filter: PaperFilter | None = None,
    ) -> Connection[PaperRow]:
        return await resolve_viewer_feed(
            info, filter.to_args() if filter else None, first=first, after=after, page=page
        )

    @strawberry.field(
        description="The reader's personal RSS feed (the same papers as `feed`). The URL holds a secret token: "
        "`rotateFeedToken` replaces it, and the old URL stops working at once."
    )
    async def feed_url(self, info: Info) -> str:
        return await resolve_feed_url(info.context, self.feed_token)

    @strawberry.field(
        description="The reader's verified ORCID iD, from their token; null when it carries none (then a claim "
        "waits for an operator)."
    )
    def orcid(self, info: Info) -> str | None:
        return info.context.identity.viewer_orcid

    @strawberry.field(
        description="The corrections the reader asked for, newest first, with what became of each. `first` 1 to 100 "
        "(default 10).",
        graphql_type=Annotated["CorrectionConnection", strawberry.lazy("schema.corrections")],
    )
    async def corrections(self, info: Info, first: int = 10, after: str | None = None) -> Connection[CorrectionRow]:
        return await resolve_viewer_corrections(info, first=first, after=after)

    @strawberry.field(
        description="The reader's conversations with the papers, most recently active first.",
        graphql_type=Annotated["ConversationConnection", strawberry.lazy("schema.chat")],
    )
    async def conversations(self, info: Info, first: int = 10, after: str | None = None) -> Connection[ConversationRow]:
        return await resolve_conversations(info.context, str(self.id), first=first, after=after)


@strawberry.type
class ViewerQuery:
    @strawberry.field(description="The signed-in reader (from `Authorization: Bearer <JWT>`); null when anonymous.")
    def viewer(self, info: Info) -> Viewer | None:
        vid = viewer_id(info.context)
        return Viewer(id=strawberry.ID(vid)) if vid is not None else None
