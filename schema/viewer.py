"""The signed-in reader (`Query.viewer`): null for anonymous requests."""

from __future__ import annotations

import strawberry

from resolvers.viewer import viewer_id
from schema.types import Info


@strawberry.type(description="The signed-in reader. Never served from or stored in a shared cache.")
class Viewer:
    id: strawberry.ID = strawberry.field(description="The reader's id: the `sub` of the site's token.")


@strawberry.type
class ViewerQuery:
    @strawberry.field(description="The signed-in reader (from `Authorization: Bearer <JWT>`); null when anonymous.")
    def viewer(self, info: Info) -> Viewer | None:
        vid = viewer_id(info.context)
        return Viewer(id=strawberry.ID(vid)) if vid is not None else None
