from __future__ import annotations

import strawberry

from resolvers.context import Info
from resolvers.errors import BadUserInput
from resolvers.nodes import NodeRow, resolve_node, resolve_nodes
from schema.derived import NODE_ID_DOC


@strawberry.interface(description="An object with a global id, fetchable with `node(id:)`.")
class Node:
    node_id: strawberry.ID = strawberry.field(name="id", description=NODE_ID_DOC)


@strawberry.type
class NodeQuery:
    @strawberry.field(description="Any object by its global id; null when it does not exist.", graphql_type=Node | None)
    async def node(self, info: Info, id: strawberry.ID) -> NodeRow | None:
        return await resolve_node(info.context, id)

    @strawberry.field(
        description="Objects by global id, in the order given (null where missing); at most 100 ids.",
        graphql_type=list[Node | None],
    )
    async def nodes(self, info: Info, ids: list[strawberry.ID]) -> list[NodeRow | BadUserInput | None]:
        return await resolve_nodes(info.context, ids)
