"""`changes(since:)`: the feed a partner keeps a mirror in sync with, walked by keyset cursor."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from datetime import datetime

from db.paging import TokenError, datetime_to_micros, decode_cursor, encode_cursor, micros_to_datetime
from db.queries.changes import ChangeKind, ChangeRow, page_changes
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Context
from resolvers.errors import BadUserInput

DEFAULT_CHANGES_FIRST = 100
MAX_CHANGES_FIRST = 1000
ALL_KINDS: tuple[ChangeKind, ...] = ("PAPER", "RESEARCHER", "INSTITUTION")
_CURSOR = "changes"


@dataclass(slots=True)
class ChangesPage:
    changes: list[ChangeRow]
    has_next_page: bool
    end_cursor: str | None


def _position(since: datetime, after: str | None) -> tuple[datetime, int, int]:
    if after is None:
        return since, -1, 0
    try:
        micros, rank, row_id = decode_cursor(after, _CURSOR, 3)
        if not isinstance(micros, int) or not isinstance(rank, int) or not isinstance(row_id, int):
            raise TokenError("cursor holds unexpected values")
        at = micros_to_datetime(micros)
    except TokenError:
        raise BadUserInput("Malformed `after` cursor: pass `pageInfo.endCursor` of a `changes` page.") from None
    if not -1 <= rank <= 2:
        raise BadUserInput("Malformed `after` cursor: pass `pageInfo.endCursor` of a `changes` page.")
    return max((at, rank, row_id), (since, -1, 0))


async def resolve_changes(
    ctx: Context, *, since: datetime, kinds: Sequence[ChangeKind] | None, first: int | None, after: str | None
) -> ChangesPage:
    limit = DEFAULT_CHANGES_FIRST if first is None else first
    if not 1 <= limit <= MAX_CHANGES_FIRST:
        raise BadUserInput(f"`first` must be between 1 and {MAX_CHANGES_FIRST}; got {limit}.")
    if since.tzinfo is None:
        raise BadUserInput("`since` needs a time zone (2026-11-30T00:00:00Z).")
    wanted = list(dict.fromkeys(kinds)) if kinds is not None else list(ALL_KINDS)
    if not wanted:
        return ChangesPage([], False, None)
    position = _position(since, after)
    async with ctx.pool.acquire() as conn:
        rows = await page_changes(conn, wanted, after=position, limit=limit + 1)
    changes, has_next = rows[:limit], len(rows) > limit
    end = after
    if changes:
        at, rank, row_id = changes[-1].position
        end = encode_cursor(_CURSOR, (datetime_to_micros(at), rank, row_id))
    return ChangesPage(changes, has_next, end)


def change_node(ctx: Context, change: ChangeRow) -> Awaitable[PaperRow | ResearcherRow | InstitutionRow | None] | None:
    """The entity as it is now; None for a merge (the absorbed researcher is gone: see `merged_into`)."""
    loaders = ctx.loaders
    if change.change == "MERGED":
        return None
    if change.kind == "PAPER":
        return loaders.paper_by_id.load(change.id)
    if change.kind == "RESEARCHER":
        return loaders.researcher_by_id.load(change.id)
    return loaders.institution_by_id.load(change.id)


def change_merged_into(ctx: Context, change: ChangeRow) -> Awaitable[ResearcherRow | None] | None:
    return ctx.loaders.researcher_by_id.load(change.survivor_id) if change.survivor_id is not None else None
