"""Corrections written: a reader's request recorded (within the reader's limits, and once however often it is
sent), applied at once when the reader owns every profile it concerns (a claim: when the profile's ORCID iD is the
reader's), otherwise by an operator, in one transaction with what applying it writes
(db/queries/writes/correction_apply.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

import asyncpg

from db.connection import Conn
from db.queries.corrections import (
    CORRECTION_COLUMNS,
    CORRECTIONS,
    CorrectionRow,
)
from db.queries.writes.correction_apply import Applied, apply_correction
from db.queries.writes.correction_apply import CannotApply as CannotApply  # where callers find it
from db.records import Touched

# A deadlock with the ingest (it links authorships, then refreshes researchers) is retried this many times.
ATTEMPTS: Final = 3
DecidedBy = str


@dataclass(frozen=True, slots=True)
class CorrectionRequest:
    """What a reader asks, checked by the caller: the ids as asked (a merged id is followed when applied)."""

    kind: str
    fingerprint: str
    researcher_ids: tuple[int, ...]
    paper_ids: tuple[int, ...] = ()
    position: int | None = None
    author_name: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class CorrectionLimits:
    pending: int  # corrections waiting for an operator, per reader
    daily: int  # corrections asked per reader and UTC day


SubmitOutcome = Literal["created", "existing", "pending_limit", "daily_limit"]


@dataclass(slots=True)
class Submitted:
    outcome: SubmitOutcome
    correction: CorrectionRow | None = None
    touched: Touched = field(default_factory=Touched)  # what the cache must forget once committed


@dataclass(slots=True)
class Decided:
    correction: CorrectionRow
    applied: Applied | None  # None: rejected
    touched: Touched


# Creates the reader's row and locks it: one reader's requests are decided one at a time, so the limits hold and
# the same request sent twice at once is one correction.
LOCK_VIEWER = "INSERT INTO viewers (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET id = excluded.id"
SELECT_STANDING = f"""
SELECT s.pending, s.today, {CORRECTION_COLUMNS}
FROM (SELECT count(*) FILTER (WHERE status = 'PENDING') AS pending,
             count(*) FILTER (WHERE created_at >= date_trunc('day', now(), 'UTC')) AS today
      FROM corrections WHERE viewer_id = $1) s
LEFT JOIN LATERAL (
    SELECT * FROM corrections c
    WHERE c.viewer_id = $1 AND c.fingerprint = $2
      AND (c.status = 'PENDING' OR (c.status = 'APPLIED' AND c.superseded_at IS NULL))
    ORDER BY c.id DESC LIMIT 1
) c ON true
"""
INSERT_CORRECTION = f"""
INSERT INTO corrections AS c (viewer_id, kind, fingerprint, researcher_ids, paper_ids, position, author_name, note)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
RETURNING {CORRECTION_COLUMNS}
"""
SELECT_FOR_DECISION = f"SELECT {CORRECTION_COLUMNS} FROM corrections c WHERE c.id = $1 FOR UPDATE"
MARK_APPLIED = f"""
WITH d AS (
    INSERT INTO correction_decisions (correction_id, decision, decided_by, changes) VALUES ($1, 'APPLIED', $2, $3)
)
UPDATE corrections c SET status = 'APPLIED', decided_at = now(), summary = $4, new_researcher_id = $5
WHERE c.id = $1
RETURNING {CORRECTION_COLUMNS}
"""
MARK_REJECTED = f"""
WITH d AS (
    INSERT INTO correction_decisions (correction_id, decision, decided_by, reason) VALUES ($1, 'REJECTED', $2, $3)
)
UPDATE corrections c SET status = 'REJECTED', decided_at = now(), reason = $3
WHERE c.id = $1
RETURNING {CORRECTION_COLUMNS}
"""


async def _mark_applied(conn: Conn, c: CorrectionRow, applied: Applied, by: str) -> CorrectionRow:
    record = await conn.fetchrow(MARK_APPLIED, c.id, by, applied.changes, applied.summary, applied.new_researcher_id)
    assert record is not None
    return CORRECTIONS.build(record)


# -- the reader's request -----------------------------------------------------------------------------------------


async def submit_correction(
    conn: Conn,
    viewer_id: str,
    request: CorrectionRequest,
    *,
    orcid: str | None,
    limits: CorrectionLimits,
) -> Submitted:
    """Record the reader's request and apply it at once when allowed, in one transaction (retried on a deadlock).
    The same request while one is pending or in effect answers that one; past the reader's limits nothing is
    recorded. CannotApply when the archive changed under the request (nothing is recorded either)."""
    for attempt in range(ATTEMPTS):
        try:
            async with conn.transaction():
                return await _submit(conn, viewer_id, request, orcid, limits)
        except asyncpg.DeadlockDetectedError:
            if attempt + 1 == ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def _submit(
    conn: Conn, viewer_id: str, request: CorrectionRequest, orcid: str | None, limits: CorrectionLimits
) -> Submitted:
    await conn.execute(LOCK_VIEWER, viewer_id)
    standing = await conn.fetchrow(SELECT_STANDING, viewer_id, request.fingerprint)
    assert standing is not None
    if standing["id"] is not None:
        return Submitted("existing", CORRECTIONS.build(standing))
    if standing["pending"] >= limits.pending:
        return Submitted("pending_limit")
    if standing["today"] >= limits.daily:
        return Submitted("daily_limit")
    record = await conn.fetchrow(
        INSERT_CORRECTION,
        viewer_id,
        request.kind,
        request.fingerprint,
        list(request.researcher_ids),
        list(request.paper_ids),
        request.position,
        request.author_name,
        request.note,
    )
    assert record is not None
    correction = CORRECTIONS.build(record)
    touched = Touched()
    applied = await apply_correction(conn, correction, touched, owner=viewer_id, orcid=orcid)
    if applied is not None:
        correction = await _mark_applied(conn, correction, applied, applied.decided_by)
    return Submitted("created", correction, touched)


# -- the operator's decision --------------------------------------------------------------------------------------


class NotPending(Exception):
    """The correction was decided already, or does not exist."""


async def decide_correction(
    conn: Conn, correction_id: int, *, approve: bool, operator: str, reason: str | None = None
) -> Decided:
    """An operator applies (`approve`) or rejects a pending correction, in one transaction; the decision is logged
    with `operator` and `reason`. NotPending when it was decided already; CannotApply (nothing written) when it no
    longer fits the archive."""
    for attempt in range(ATTEMPTS):
        try:
            async with conn.transaction():
                return await _decide(conn, correction_id, approve, operator, reason)
        except asyncpg.DeadlockDetectedError:
            if attempt + 1 == ATTEMPTS:
                raise
    raise AssertionError("unreachable")


async def _decide(conn: Conn, correction_id: int, approve: bool, operator: str, reason: str | None) -> Decided:
    record = await conn.fetchrow(SELECT_FOR_DECISION, correction_id)
    if record is None:
        raise NotPending(f"no correction {correction_id}")
    correction = CORRECTIONS.build(record)
    if correction.status != "PENDING":
        raise NotPending(f"correction {correction_id} is {correction.status.lower()} already")
    touched = Touched()
    if not approve:
        rejected = await conn.fetchrow(MARK_REJECTED, correction_id, operator, reason)
        assert rejected is not None
        return Decided(CORRECTIONS.build(rejected), None, touched)
    applied = await apply_correction(conn, correction, touched, owner=None)
    assert applied is not None  # an operator may apply anything
    return Decided(await _mark_applied(conn, correction, applied, operator), applied, touched)
