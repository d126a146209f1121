"""Global ids: `node(id:)` and `nodes(ids:)`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence

from db.paging import TokenError, decode_global_id
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Context
from resolvers.errors import BadUserInput

MAX_NODES = 100
NodeRow = PaperRow | ResearcherRow | InstitutionRow


def _load(ctx: Context, global_id: str) -> Awaitable[NodeRow | None]:
    try:
        type_name, db_id = decode_global_id(global_id)
    except TokenError:
        raise BadUserInput(f"Malformed node id {global_id[:80]!r}: pass an `id` this API returned.") from None
    loaders = ctx.loaders
    if type_name == "Paper":
        return loaders.paper_by_id.load(db_id)
    if type_name == "Researcher":
        return loaders.researcher_by_id.load(db_id)
    if type_name == "Institution":
        return loaders.institution_by_id.load(db_id)
    raise BadUserInput(f"Malformed node id {global_id[:80]!r}: pass an `id` this API returned.")


async def resolve_node(ctx: Context, global_id: str) -> NodeRow | None:
    return await _load(ctx, global_id)


async def resolve_nodes(ctx: Context, global_ids: Sequence[str]) -> list[NodeRow | None]:
    if len(global_ids) > MAX_NODES:
        raise BadUserInput(f"`ids` holds {len(global_ids)} ids; at most {MAX_NODES} per request.")
    # All loads are queued before the first await, so each type is one batch.
    return list(await asyncio.gather(*(_load(ctx, g) for g in global_ids)))
