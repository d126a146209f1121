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


def _malformed(global_id: str) -> BadUserInput:
    return BadUserInput(f"Malformed node id {global_id[:80]!r}: pass an `id` this API returned.")


def _load(ctx: Context, global_id: str) -> Awaitable[NodeRow | None]:
    try:
        type_name, key = decode_global_id(global_id)
    except TokenError:
        raise _malformed(global_id) from None
    loaders = ctx.loaders
    if type_name == "Paper":
        # A paper's id names its arXiv id; ids issued before that named its database id.
        return loaders.paper_by_arxiv_id.load(key) if isinstance(key, str) else loaders.paper_by_id.load(key)
    if isinstance(key, int):
        if type_name == "Researcher":
            return loaders.researcher_by_id.load(key)
        if type_name == "Institution":
            return loaders.institution_by_id.load(key)
    raise _malformed(global_id)


async def resolve_node(ctx: Context, global_id: str) -> NodeRow | None:
    return await _load(ctx, global_id)


async def _entry(ctx: Context, global_id: str) -> NodeRow | BadUserInput | None:
    try:
        load = _load(ctx, global_id)
    except BadUserInput as error:
        return error
    return await load


async def resolve_nodes(ctx: Context, global_ids: Sequence[str]) -> list[NodeRow | BadUserInput | None]:
    """In the order given. A malformed id is a BadUserInput in its place: GraphQL answers null there with an
    error at that entry's path, and the other entries are unaffected."""
    if len(global_ids) > MAX_NODES:
        raise BadUserInput(f"`ids` holds {len(global_ids)} ids; at most {MAX_NODES} per request.")
    # All loads are queued before the first await, so each type is one batch.
    return list(await asyncio.gather(*(_entry(ctx, g) for g in global_ids)))
