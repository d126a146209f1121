"""What signed-in readers follow: the writes (capped per viewer, counted by triggers) and the reads."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg

from db.connection import Conn
from db.filters import FOLLOWED_INSTITUTIONS_SORT, FOLLOWED_RESEARCHERS_SORT, Clause, Sort, compose
from db.queries.institutions import INSTITUTION_COLUMNS, InstitutionRow
from db.queries.researchers import RESEARCHER_COLUMNS, ResearcherRow
from db.rows import RowShape

FollowKind = Literal["researcher", "institution"]
# What `follow` did: a new follow, one that already existed, refused by the cap, or no such entity.
FollowOutcome = Literal["followed", "following", "limit", "not_found"]


@dataclass(slots=True)
class FollowedResearcherRow(ResearcherRow):
    followed_at: datetime


@dataclass(slots=True)
class FollowedInstitutionRow(InstitutionRow):
    followed_at: datetime


_FOLLOWED_RESEARCHERS = RowShape(FollowedResearcherRow)
_FOLLOWED_INSTITUTIONS = RowShape(FollowedInstitutionRow)
FOLLOW = "SELECT wp_follow($1::text, $2::text, $3::bigint, $4::int)"
UNFOLLOW = {
    "researcher": "DELETE FROM follows WHERE viewer_id = $1::text AND researcher_id = $2::bigint",
    "institution": "DELETE FROM institution_follows WHERE viewer_id = $1::text AND institution_id = $2::bigint",
}
SELECT_FOLLOWED_IDS = {
    "researcher": "SELECT researcher_id FROM follows WHERE viewer_id = $1::text AND researcher_id = any($2::bigint[])",
    "institution": "SELECT institution_id FROM institution_follows"
    " WHERE viewer_id = $1::text AND institution_id = any($2::bigint[])",
}
COUNT_FOLLOWS = {
    "researcher": "SELECT count(*) FROM follows f WHERE f.viewer_id = $1::text",
    "institution": "SELECT count(*) FROM institution_follows f WHERE f.viewer_id = $1::text",
}
_PAGE_SOURCE = {
    "researcher": (
        f"{RESEARCHER_COLUMNS}, f.created_at AS followed_at",
        "follows f JOIN researchers r ON r.id = f.researcher_id",
    ),
    "institution": (
        f"{INSTITUTION_COLUMNS}, f.created_at AS followed_at",
        "institution_follows f JOIN institutions i ON i.id = f.institution_id",
    ),
}
FOLLOWED_SORTS: dict[FollowKind, Sort] = {
    "researcher": FOLLOWED_RESEARCHERS_SORT,
    "institution": FOLLOWED_INSTITUTIONS_SORT,
}


async def follow(conn: Conn, viewer_id: str, kind: FollowKind, target_id: int, *, cap: int) -> FollowOutcome:
    """Follow once (following twice is one follow); refused past `cap` follows of both kinds together."""
    outcome: FollowOutcome = await conn.fetchval(FOLLOW, viewer_id, kind, target_id, cap)
    return outcome


async def unfollow(conn: Conn, viewer_id: str, kind: FollowKind, target_id: int) -> bool:
    """Whether a follow was removed (unfollowing what is not followed removes nothing and is fine)."""
    status: str = await conn.execute(UNFOLLOW[kind], viewer_id, target_id)
    return status != "DELETE 0"


async def fetch_followed_ids(conn: Conn, viewer_id: str, kind: FollowKind, ids: Sequence[int]) -> set[int]:
    """Which of `ids` the viewer follows."""
    return {r[0] for r in await conn.fetch(SELECT_FOLLOWED_IDS[kind], viewer_id, list(ids))}


async def count_follows(conn: Conn, viewer_id: str, kind: FollowKind) -> int:
    count: int = await conn.fetchval(COUNT_FOLLOWS[kind], viewer_id)
    return count


async def page_followed_researchers(
    conn: Conn, viewer_id: str, after: Clause | None, *, limit: int, offset: int = 0
) -> list[FollowedResearcherRow]:
    """The researchers the viewer follows, most recently followed first."""
    rows = await _page(conn, "researcher", viewer_id, after, limit=limit, offset=offset)
    return _FOLLOWED_RESEARCHERS.build_all(rows)


async def page_followed_institutions(
    conn: Conn, viewer_id: str, after: Clause | None, *, limit: int, offset: int = 0
) -> list[FollowedInstitutionRow]:
    """The institutions the viewer follows, most recently followed first."""
    rows = await _page(conn, "institution", viewer_id, after, limit=limit, offset=offset)
    return _FOLLOWED_INSTITUTIONS.build_all(rows)


async def _page(
    conn: Conn, kind: FollowKind, viewer_id: str, after: Clause | None, *, limit: int, offset: int
) -> list[asyncpg.Record]:
    columns, source = _PAGE_SOURCE[kind]
    sort = FOLLOWED_SORTS[kind]
    where, args = compose([after] if after is not None else [], offset=1)
    n = len(args) + 1
    sql = (
        f"SELECT {columns} FROM {source} WHERE f.viewer_id = $1::text AND {where}"
        f" ORDER BY {sort.order_by} LIMIT ${n + 1} OFFSET ${n + 2}"
    )
    return list(await conn.fetch(sql, viewer_id, *args, limit, offset))
