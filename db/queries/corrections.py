"""Reads of corrections: a reader's own, the operators' queue, a profile's public log, and what a request is
checked against (a paper's authors, the names a researcher is known by, who owns a profile)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from db.connection import Conn
from db.filters import Clause, Fragment, Sort, compose
from db.rows import RowShape, select_list

CorrectionKind = Literal["CLAIM", "NOT_ME", "IS_ME", "SPLIT", "MERGE"]
CorrectionStatus = Literal["PENDING", "APPLIED", "REJECTED"]
CORRECTION_KINDS: Final = ("CLAIM", "NOT_ME", "IS_ME", "SPLIT", "MERGE")
CORRECTION_STATUSES: Final = ("PENDING", "APPLIED", "REJECTED")


@dataclass(slots=True)
class CorrectionRow:
    id: int
    viewer_id: str  # who asked: shown to that reader and to operators, never publicly
    kind: str
    status: str
    researcher_ids: list[int]  # as asked
    paper_ids: list[int]
    position: int | None
    author_name: str | None
    note: str | None
    created_at: datetime
    decided_at: datetime | None
    reason: str | None
    summary: str | None
    new_researcher_id: int | None
    superseded_at: datetime | None
    conflicts: int
    last_conflict_at: datetime | None


CORRECTIONS = RowShape(CorrectionRow)
CORRECTION_COLUMNS = select_list("c", CORRECTIONS.fields)

# A reader's corrections, newest first.
CORRECTION_SORT = Sort(
    "CORRECTIONS",
    "c.created_at DESC, c.id DESC",
    Fragment("(c.created_at, c.id) < ($1::timestamptz, $2::bigint)", 2),
    (("created_at", "ts"), ("id", "bigint")),
)

# Pending, or applied and still in effect: the same request again is this correction.
SELECT_LIVE = f"""
SELECT {CORRECTION_COLUMNS} FROM corrections c
WHERE c.viewer_id = $1 AND c.fingerprint = $2
  AND (c.status = 'PENDING' OR (c.status = 'APPLIED' AND c.superseded_at IS NULL))
ORDER BY c.id DESC LIMIT 1
"""
SELECT_BY_IDS = f"SELECT {CORRECTION_COLUMNS} FROM corrections c WHERE c.id = any($1::bigint[]) ORDER BY c.id"
COUNT_VIEWER = "SELECT count(*) FROM corrections c WHERE c.viewer_id = $1"
SELECT_QUEUE = f"""
SELECT {CORRECTION_COLUMNS} FROM corrections c
WHERE ($1::text IS NULL OR c.status = $1::text)
ORDER BY c.created_at DESC, c.id DESC LIMIT $2
"""
SELECT_DECISIONS = """
SELECT id, correction_id, decision, decided_by, decided_at, reason, changes
FROM correction_decisions WHERE correction_id = $1 ORDER BY id
"""


@dataclass(slots=True)
class DecisionRow:
    id: int
    correction_id: int
    decision: str
    decided_by: str
    decided_at: datetime
    reason: str | None
    changes: str


DECISIONS = RowShape(DecisionRow)


async def fetch_live_correction(conn: Conn, viewer_id: str, fingerprint: str) -> CorrectionRow | None:
    """The reader's pending or in-effect correction for this request, if there is one."""
    record = await conn.fetchrow(SELECT_LIVE, viewer_id, fingerprint)
    return CORRECTIONS.build(record) if record is not None else None


async def fetch_corrections_by_ids(conn: Conn, ids: Sequence[int]) -> list[CorrectionRow]:
    return CORRECTIONS.build_all(await conn.fetch(SELECT_BY_IDS, list(ids)))


async def page_viewer_corrections(
    conn: Conn, viewer_id: str, *, limit: int, after: Clause | None
) -> list[CorrectionRow]:
    """The reader's corrections, newest first, after the cursor's position."""
    where, args = compose([after] if after else [], offset=1)
    sql = (
        f"SELECT {CORRECTION_COLUMNS} FROM corrections c WHERE c.viewer_id = $1 AND {where}"
        f" ORDER BY {CORRECTION_SORT.order_by} LIMIT ${len(args) + 2}"
    )
    return CORRECTIONS.build_all(await conn.fetch(sql, viewer_id, *args, limit))


async def count_viewer_corrections(conn: Conn, viewer_id: str) -> int:
    count: int = await conn.fetchval(COUNT_VIEWER, viewer_id)
    return count


async def fetch_correction_queue(conn: Conn, *, status: str | None, limit: int) -> list[CorrectionRow]:
    """Corrections for the operators, newest first (`status` None: all of them)."""
    return CORRECTIONS.build_all(await conn.fetch(SELECT_QUEUE, status, limit))


async def fetch_decisions(conn: Conn, correction_id: int) -> list[DecisionRow]:
    return DECISIONS.build_all(await conn.fetch(SELECT_DECISIONS, correction_id))


# ------------------------------------------------------------------------------------------ the public log


@dataclass(slots=True)
class CorrectionLogRow:
    """An applied correction as a profile's public log shows it: what changed and when, never who asked."""

    id: int
    kind: str
    applied_at: datetime
    summary: str
    paper_ids: list[int]
    researcher_ids: list[int]
    new_researcher_id: int | None


_LOGS = RowShape(CorrectionLogRow)
# A profile's log holds the corrections naming it or a profile merged into it, and the split that made it.
SELECT_LOGS = """
SELECT k.id AS owner_id, c.id, c.kind, c.decided_at AS applied_at, c.summary, c.paper_ids, c.researcher_ids,
       c.new_researcher_id
FROM unnest($1::bigint[]) AS k(id)
CROSS JOIN LATERAL (
    SELECT c.* FROM corrections c
    WHERE c.status = 'APPLIED'
      AND (c.researcher_ids && (ARRAY[k.id] || ARRAY(SELECT d.old_id FROM researcher_redirects d
                                                        WHERE d.survivor_id = k.id))
           OR c.new_researcher_id = k.id)
    ORDER BY c.decided_at DESC, c.id DESC
    LIMIT $2
) c
ORDER BY k.id, c.decided_at DESC, c.id DESC
"""


async def fetch_correction_logs(
    conn: Conn, researcher_ids: Sequence[int], *, limit: int
) -> dict[int, list[CorrectionLogRow]]:
    """The latest `limit` applied corrections of each profile, newest first."""
    logs: dict[int, list[CorrectionLogRow]] = {rid: [] for rid in researcher_ids}
    records = await conn.fetch(SELECT_LOGS, list(researcher_ids), limit)
    if records:
        read = _LOGS.reader(records[0])
        for r in records:
            logs[r["owner_id"]].append(read(r))
    return logs


# ------------------------------------------------------------------------------- what requests are checked against


@dataclass(slots=True)
class PaperAuthorRow:
    position: int
    name: str
    researcher_id: int | None
    is_collaboration: bool


# The profile an id names now (an id merged away names its survivor), with its owner.
SELECT_PROFILES = """
SELECT k.id AS asked, r.id, r.name, r.orcid, r.paper_count, o.viewer_id AS owner
FROM unnest($1::bigint[]) AS k(id)
LEFT JOIN researcher_redirects d ON d.old_id = k.id
JOIN researchers r ON r.id = coalesce(d.survivor_id, k.id)
LEFT JOIN researcher_owners o ON o.researcher_id = r.id
"""
SELECT_OWNED = "SELECT researcher_id FROM researcher_owners WHERE viewer_id = $1 AND researcher_id = any($2::bigint[])"
MAX_NAME_VARIANTS: Final = 50


@dataclass(slots=True)
class ProfileRow:
    asked: int
    id: int
    name: str
    orcid: str | None
    paper_count: int
    owner: str | None  # the reader who owns it: for deciding, never shown publicly


_PROFILES = RowShape(ProfileRow)


async def fetch_profiles(conn: Conn, ids: Sequence[int]) -> dict[int, ProfileRow]:
    """By the id asked: the profile it names now (following merges), with its owner; unknown ids are left out."""
    return {p.asked: p for p in _PROFILES.build_all(await conn.fetch(SELECT_PROFILES, list(ids)))}


async def fetch_owned_ids(conn: Conn, viewer_id: str, researcher_ids: Sequence[int]) -> set[int]:
    """Which of these profiles the reader owns."""
    return {r[0] for r in await conn.fetch(SELECT_OWNED, viewer_id, list(researcher_ids))}


@dataclass(slots=True)
class AuthorshipCheck:
    """What a NOT_ME / IS_ME report is checked against: the profile the id names now, the paper's authors, and (when
    asked for) the names the profile is known by."""

    profile: ProfileRow
    authors: list[PaperAuthorRow]
    names: list[str]


SELECT_AUTHORSHIP_CHECK = """
SELECT $1::bigint AS asked, r.id, r.name, r.orcid, r.paper_count, o.viewer_id AS owner,
       a.positions, a.names, a.researcher_ids, a.collaborations,
       CASE WHEN $3 THEN ARRAY(
           SELECT name FROM (
               SELECT r.name, 2147483647 AS uses
               UNION ALL
               SELECT v.name, count(*)::integer FROM authorships v WHERE v.researcher_id = r.id GROUP BY v.name
           ) n ORDER BY uses DESC, name LIMIT $4) END AS variants
FROM (SELECT coalesce((SELECT d.survivor_id FROM researcher_redirects d WHERE d.old_id = $1), $1) AS id) k
JOIN researchers r ON r.id = k.id
LEFT JOIN researcher_owners o ON o.researcher_id = r.id
CROSS JOIN (
    SELECT array_agg(position ORDER BY position) AS positions, array_agg(name ORDER BY position) AS names,
           array_agg(researcher_id ORDER BY position) AS researcher_ids,
           array_agg(is_collaboration ORDER BY position) AS collaborations
    FROM authorships WHERE paper_id = $2
) a
"""
# Which of the papers are on the profile, and on how many it is in all (a split must leave it some).
SELECT_LINKED_PAPERS = """
SELECT ARRAY(SELECT DISTINCT paper_id FROM authorships WHERE researcher_id = $1 AND paper_id = any($2::bigint[]))
           AS linked,
       (SELECT count(DISTINCT paper_id) FROM authorships WHERE researcher_id = $1) AS total
"""


async def fetch_authorship_check(
    conn: Conn, researcher_id: int, paper_id: int, *, with_names: bool
) -> AuthorshipCheck | None:
    """None when the researcher is not in the archive."""
    r = await conn.fetchrow(SELECT_AUTHORSHIP_CHECK, researcher_id, paper_id, with_names, MAX_NAME_VARIANTS)
    if r is None:
        return None
    profile = ProfileRow(r["asked"], r["id"], r["name"], r["orcid"], r["paper_count"], r["owner"])
    authors = [
        PaperAuthorRow(*values)
        for values in zip(
            r["positions"] or [], r["names"] or [], r["researcher_ids"] or [], r["collaborations"] or [], strict=True
        )
    ]
    return AuthorshipCheck(profile, authors, list(r["variants"] or []))


async def fetch_linked_papers(conn: Conn, researcher_id: int, paper_ids: Sequence[int]) -> tuple[set[int], int]:
    """(which of `paper_ids` are on the researcher's profile, how many papers the profile has in all)."""
    r = await conn.fetchrow(SELECT_LINKED_PAPERS, researcher_id, list(paper_ids))
    assert r is not None
    return set(r["linked"]), int(r["total"])


SELECT_PAPER_LABELS = "SELECT id, arxiv_id, title FROM papers WHERE id = any($1::bigint[])"


async def fetch_paper_labels(conn: Conn, paper_ids: Sequence[int]) -> dict[int, tuple[str, str]]:
    """{paper id: (arXiv id, title)}, for the operators' view."""
    return {r["id"]: (r["arxiv_id"], r["title"]) for r in await conn.fetch(SELECT_PAPER_LABELS, list(paper_ids))}


# -------------------------------------------------------------------------------- for status and metrics


@dataclass(frozen=True, slots=True)
class CorrectionCounts:
    pending: int  # waiting for an operator
    in_effect: int  # applied, not superseded by a later correction
    conflicts: int  # writes the pins kept from undoing an applied correction, in all
    in_conflict: int  # corrections that kept at least one
    last_conflict_at: datetime | None


SELECT_COUNTS = """
SELECT count(*) FILTER (WHERE status = 'PENDING') AS pending,
       count(*) FILTER (WHERE status = 'APPLIED' AND superseded_at IS NULL) AS in_effect,
       coalesce(sum(conflicts), 0)::bigint AS conflicts,
       count(*) FILTER (WHERE conflicts > 0) AS in_conflict,
       max(last_conflict_at) AS last_conflict_at
FROM corrections
"""


async def fetch_correction_counts(conn: Conn) -> CorrectionCounts:
    """Corrections waiting and in effect, and the ingest's writes kept from undoing them (`ingest status`,
    /metrics)."""
    r = await conn.fetchrow(SELECT_COUNTS)
    assert r is not None
    return CorrectionCounts(r["pending"], r["in_effect"], int(r["conflicts"]), r["in_conflict"], r["last_conflict_at"])
