from __future__ import annotations

import strawberry

from resolvers.nodes import NodeRow, resolve_node, resolve_nodes
from schema.types import Info


@strawberry.interface(description="An object with a global id, fetchable with `node(id:)`.")
class Node:
    node_id: strawberry.ID = strawberry.field(
        name="id", description="Opaque global id; stable, but not meant to be taken apart."
    )


@strawberry.type
class NodeQuery:
    @strawberry.field(description="Any object by its global id; null when it does not exist.")
    async def node(self, info: Info, id: strawberry.ID) -> Node | None:
        row: NodeRow | None = await resolve_node(info.context, id)
        return row  # type: ignore[return-value]

    @strawberry.field(description="Objects by global id, in the order given (null where missing); at most 100 ids.")
    async def nodes(self, info: Info, ids: list[strawberry.ID]) -> list[Node | None]:
        rows = await resolve_nodes(info.context, ids)
        return rows  # type: ignore[return-value]
