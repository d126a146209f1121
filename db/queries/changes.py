"""The changes feed: every paper, researcher and institution modified, withdrawn or merged since a time.

Ordered by (time, kind, id) and walked by keyset: each branch reads its table's (modified_at, id) index from the
position on, so a page costs the same however far the walk has gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from db.connection import Conn

ChangeKind = Literal["PAPER", "RESEARCHER", "INSTITUTION"]
ChangeType = Literal["MODIFIED", "WITHDRAWN", "MERGED"]
KIND_RANKS: dict[ChangeKind, int] = {"PAPER": 0, "RESEARCHER": 1, "INSTITUTION": 2}
_KINDS: dict[int, ChangeKind] = {rank: kind for kind, rank in KIND_RANKS.items()}


_PAPER_CHANGE = "CASE WHEN p.withdrawn THEN 'WITHDRAWN' ELSE 'MODIFIED' END"
# $1 kinds' ranks, ($2, $3, $4) the position (time, rank, id) to continue after, $5 how many.
_BRANCH = """
    (SELECT {rank} AS rank, {id} AS id, {at} AS at, {change} AS change, {survivor} AS survivor_id, {key} AS key
     FROM {table}
     WHERE {rank} = ANY ($1::int[]) AND {at} >= $2::timestamptz AND ({at}, {rank}, {id}) > ($2, $3::int, $4::bigint)
     ORDER BY {at}, {id} LIMIT $5)"""
SELECT_CHANGES = (
    "SELECT rank, id, at, change, survivor_id, key FROM ("
    + " UNION ALL ".join(
        _BRANCH.format(rank=rank, id=id_, at=at, change=change, survivor=survivor, key=key, table=table)
        for rank, id_, at, change, survivor, key, table in (
            (0, "p.id", "p.modified_at", _PAPER_CHANGE, "NULL::bigint", "p.arxiv_id", "papers p"),
            (1, "r.id", "r.modified_at", "'MODIFIED'", "NULL::bigint", "NULL", "researchers r"),
            (1, "d.old_id", "d.merged_at", "'MERGED'", "d.survivor_id", "NULL", "researcher_redirects d"),
            (2, "i.id", "i.modified_at", "'MODIFIED'", "NULL::bigint", "NULL", "institutions i"),
        )
    )
    + ") c ORDER BY at, rank, id LIMIT $5"
)


@dataclass(frozen=True, slots=True)
class ChangeRow:
    kind: ChangeKind
    id: int
    changed_at: datetime
    change: ChangeType
    survivor_id: int | None  # MERGED: the researcher it was merged into
    arxiv_id: str | None  # a paper's

    @property
    def position(self) -> tuple[datetime, int, int]:
        return self.changed_at, KIND_RANKS[self.kind], self.id


async def page_changes(
    conn: Conn, kinds: Sequence[ChangeKind], *, after: tuple[datetime, int, int], limit: int
) -> list[ChangeRow]:
    """The changes after position `after` (time, kind rank, id), oldest first; (since, -1, 0) starts at `since`."""
    records = await conn.fetch(SELECT_CHANGES, sorted(KIND_RANKS[k] for k in kinds), *after, limit)
    return [ChangeRow(_KINDS[r["rank"]], r["id"], r["at"], r["change"], r["survivor_id"], r["key"]) for r in records]
