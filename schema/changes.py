"""`changes(since:)`: what changed, for partners keeping a mirror in sync."""

from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from enum import Enum

import strawberry

from db.queries.changes import ChangeRow
from db.queries.researchers import ResearcherRow
from resolvers.changes import ChangesPage, change_merged_into, change_node, resolve_changes
from resolvers.context import Info
from resolvers.nodes import NodeRow
from schema.aggregates import LazyResearcher
from schema.derived import derived, entity_node_id
from schema.node import Node


@strawberry.enum(description="A kind of entity with a page on the site.")
class EntityKind(Enum):
    PAPER = "PAPER"
    RESEARCHER = "RESEARCHER"
    INSTITUTION = "INSTITUTION"


@strawberry.enum(description="What happened to an entity.")
class ChangeType(Enum):
    MODIFIED = strawberry.enum_value(
        "MODIFIED", description="Created or changed: fetch `node` (or `node(id:)`) and store it."
    )
    WITHDRAWN = strawberry.enum_value(
        "WITHDRAWN",
        description="A paper that is withdrawn now: `node` still answers (flagged `withdrawn`), lists leave it out.",
    )
    MERGED = strawberry.enum_value(
        "MERGED",
        description="A researcher merged into another (a tombstone): drop `id`, its papers now name `mergedInto`.",
    )


def _node(root: ChangeRow, info: Info) -> NodeRow | None | Awaitable[NodeRow | None]:
    return change_node(info.context, root)


def _merged_into(root: ChangeRow, info: Info) -> ResearcherRow | None | Awaitable[ResearcherRow | None]:
    return change_merged_into(info.context, root)


@strawberry.type(description="One entity that changed, as it is now.")
class Change:
    kind: EntityKind
    change: ChangeType
    node_id: strawberry.ID = derived(
        entity_node_id, name="id", description="Global id of the entity (for MERGED, of the researcher that is gone)."
    )
    id: int = strawberry.field(name="databaseId")
    changed_at: datetime = strawberry.field(
        description="When: the entity's `modifiedAt`, or the time of the merge. A change is stamped with the start "
        "of its write's transaction, so it can become visible a little after that time: start each sync a few "
        "minutes before the last one's last `changedAt` (entries are idempotent)."
    )
    node: NodeRow | None | Awaitable[NodeRow | None] = strawberry.field(
        resolver=_node, graphql_type=Node | None, description="The entity now; null for MERGED."
    )
    merged_into: ResearcherRow | None | Awaitable[ResearcherRow | None] = strawberry.field(
        resolver=_merged_into,
        graphql_type=LazyResearcher | None,
        description="MERGED: the researcher that absorbed it (its `mergedIds` lists `id`).",
    )


@strawberry.type
class ChangesPageInfo:
    has_next_page: bool = strawberry.field(description="More changes past this page (ask again with `after`).")
    end_cursor: str | None = strawberry.field(description="Pass as `after` to continue; keep it to resume later.")


@strawberry.type(description="A page of changes, oldest first.")
class ChangeConnection:
    nodes: list[ChangeRow] = strawberry.field(graphql_type=list[Change])
    page_info: ChangesPageInfo


@strawberry.type
class ChangesQuery:
    @strawberry.field(
        description="Every paper, researcher and institution modified, withdrawn or merged since a time, oldest "
        "first (time, then kind, then id), each once with its latest state: a partner keeps a mirror in sync with a "
        "few requests a day. `since` is inclusive; `kinds` narrows (default: all); `first` 1 to 1000 (default 100); "
        "walk on with `after` = `pageInfo.endCursor` (a keyset cursor: every page costs the same)."
    )
    async def changes(
        self,
        info: Info,
        since: datetime,
        kinds: list[EntityKind] | None = None,
        first: int | None = None,
        after: str | None = None,
    ) -> ChangeConnection:
        page: ChangesPage = await resolve_changes(
            info.context,
            since=since,
            kinds=[k.value for k in kinds] if kinds is not None else None,
            first=first,
            after=after,
        )
        return ChangeConnection(
            nodes=page.changes,
            page_info=ChangesPageInfo(has_next_page=page.has_next_page, end_cursor=page.end_cursor),
        )
