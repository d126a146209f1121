"""The signed-in reader (`Query.viewer`): null for anonymous requests."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import strawberry

from resolvers.chat import resolve_conversations
from resolvers.viewer import viewer_id
from schema.types import Info

if TYPE_CHECKING:
    from schema.chat import ConversationConnection


@strawberry.type(description="The signed-in reader. Never served from or stored in a shared cache.")
class Viewer:
    id: strawberry.ID = strawberry.field(description="The reader's id: the `sub` of the site's token.")

    @strawberry.field(description="The reader's conversations with the papers, most recently active first.")
    async def conversations(
        self, info: Info, first: int = 10, after: str | None = None
    ) -> Annotated[ConversationConnection, strawberry.lazy("schema.chat")]:
        from schema.chat import as_conversations

        return as_conversations(await resolve_conversations(info.context, str(self.id), first=first, after=after))


@strawberry.type
class ViewerQuery:
    @strawberry.field(description="The signed-in reader (from `Authorization: Bearer <JWT>`); null when anonymous.")
    def viewer(self, info: Info) -> Viewer | None:
        vid = viewer_id(info.context)
        return Viewer(id=strawberry.ID(vid)) if vid is not None else None
