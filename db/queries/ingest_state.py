"""SQL the ingest needs besides the bulk write path: checkpoints, the enrichment queue, tombstones."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import orjson

from db.queries.corrections import CorrectionCounts, fetch_correction_counts
from db.records import AuthorRecord

SELECT_CHECKPOINT = "SELECT state::text FROM ingest_checkpoints WHERE source = $1"
# The state goes in as text and is cast, so the result does not depend on the connection's jsonb codec.
UPSERT_CHECKPOINT = """
INSERT INTO ingest_checkpoints (source, state, updated_at) VALUES ($1, $2::text::jsonb, now())
ON CONFLICT (source) DO UPDATE SET state = excluded.state, updated_at = now()
"""


async def fetch_checkpoint(conn: asyncpg.Connection, source: str) -> dict[str, Any] | None:
    """The saved state of a source (`arxiv:all`, `arxiv:<set>`, ...), or None before its first run."""
    text = await conn.fetchval(SELECT_CHECKPOINT, source)
    if text is None:
        return None
    state = orjson.loads(text)
    return state if isinstance(state, dict) else None


async def commit_without_flush_wait(conn: asyncpg.Connection) -> None:
    """For a transaction that carries its own checkpoint: its commit need not wait for the disk. If PostgreSQL
    crashes before the commit is flushed, the rows and the checkpoint are lost together and the next run
    does that work again."""
    await conn.execute("SET LOCAL synchronous_commit = off")


async def save_checkpoint(conn: asyncpg.Connection, source: str, state: dict[str, Any]) -> None:
    """Write a source's state; call it inside the transaction that writes the rows it accounts for."""
    await conn.execute(UPSERT_CHECKPOINT, source, orjson.dumps(state).decode())


# Newest first, by the same order as papers_enrich_queue_idx; keyset-paged so a paper that failed
# this run is not picked again by the same run. A paper whose write failed waits for its retry time,
# unless it changed since.
SELECT_ENRICH_QUEUE = """
SELECT p.id, p.arxiv_id, p.doi, p.published FROM papers p
WHERE p.enriched_at IS NULL AND ($1::timestamptz IS NULL OR (p.published, p.id) < ($1::timestamptz, $2::bigint))
  AND NOT EXISTS (SELECT 1 FROM enrich_failures f
                  WHERE f.paper_id = p.id AND f.retry_at > now() AND f.paper_modified_at = p.modified_at)
ORDER BY p.published DESC, p.id DESC
LIMIT $3
"""
SELECT_QUEUE_AUTHORS = """
SELECT paper_id, position, name, affiliation, is_collaboration FROM authorships
WHERE paper_id = any($1::bigint[]) ORDER BY paper_id, position
"""


@dataclass(slots=True)
class QueuedPaper:
    id: int
    arxiv_id: str
    doi: str | None
    published: datetime
    authors: list[AuthorRecord] = field(default_factory=list)


async def fetch_enrich_queue(
    conn: asyncpg.Connection, limit: int, after: tuple[datetime, int] | None = None
) -> list[QueuedPaper]:
    """Papers not yet enriched, newest first, after the keyset position `after` (published, id)."""
    rows = await conn.fetch(SELECT_ENRICH_QUEUE, after[0] if after else None, after[1] if after else 0, limit)
    papers = {r["id"]: QueuedPaper(r["id"], r["arxiv_id"], r["doi"], r["published"]) for r in rows}
    if papers:
        for a in await conn.fetch(SELECT_QUEUE_AUTHORS, list(papers)):
            papers[a["paper_id"]].authors.append(
                AuthorRecord(a["position"], a["name"], a["affiliation"], a["is_collaboration"])
            )
    return list(papers.values())


# OAI-PMH `status="deleted"`: the paper stays in the archive, marked withdrawn.
TOMBSTONE_PAPERS = """
UPDATE papers SET withdrawn = true, modified_at = now()
WHERE arxiv_id = any($1::text[]) AND NOT withdrawn
RETURNING id
"""


async def tombstone_papers(conn: asyncpg.Connection, arxiv_ids: Sequence[str]) -> set[int]:
    """Mark papers withdrawn; return the ids that changed."""
    if not arxiv_ids:
        return set()
    return {r["id"] for r in await conn.fetch(TOMBSTONE_PAPERS, list(arxiv_ids))}


SELECT_IDENTITY_OWNERS = """
SELECT 'openalex' AS kind, openalex_id AS key, s2_author_id FROM researchers WHERE openalex_id = any($1::text[])
UNION ALL
SELECT 'orcid', orcid, s2_author_id FROM researchers WHERE orcid = any($2::text[])
"""


async def fetch_identity_owners(
    conn: asyncpg.Connection, openalex_ids: Sequence[str], orcids: Sequence[str]
) -> dict[tuple[str, str], str | None]:
    """(`openalex`|`orcid`, id) -> the S2 author id of the researcher already holding it (None: none)."""
    rows = await conn.fetch(SELECT_IDENTITY_OWNERS, list(openalex_ids), list(orcids))
    return {(r["kind"], r["key"]): r["s2_author_id"] for r in rows}


SELECT_STORED_RORS = "SELECT ror_id FROM institutions WHERE ror_id = any($1::text[])"


async def fetch_stored_rors(conn: asyncpg.Connection, ror_ids: Sequence[str]) -> set[str]:
    """Which of these institutions are stored already (their names and aliases were fetched when they came)."""
    return {r["ror_id"] for r in await conn.fetch(SELECT_STORED_RORS, list(ror_ids))}


SELECT_S2_STATE = """
SELECT r.s2_author_id, r.s2_paper_count, r.s2_citation_count, r.s2_h_index,
       EXISTS (SELECT 1 FROM researcher_works w WHERE w.researcher_id = r.id AND w.source = 's2') AS has_works
FROM researchers r WHERE r.s2_author_id = any($1::text[])
"""


async def fetch_s2_figures(
    conn: asyncpg.Connection, s2_author_ids: Sequence[str]
) -> dict[str, tuple[int | None, int | None, int | None, bool]]:
    """Stored S2 figures and whether the works list is stored: an unchanged author is not re-listed."""
    rows = await conn.fetch(SELECT_S2_STATE, list(s2_author_ids))
    return {
        r["s2_author_id"]: (r["s2_paper_count"], r["s2_citation_count"], r["s2_h_index"], r["has_works"]) for r in rows
    }


# -------------------------------------------------------------------------------- enrichment failures

# The wait doubles with every attempt, from `$3` up to 128 times it.
UPSERT_ENRICH_FAILURES = """
INSERT INTO enrich_failures AS f (paper_id, reason, retry_at, paper_modified_at)
SELECT p.id, r.reason, now() + $3::interval, p.modified_at
FROM unnest($1::bigint[], $2::text[]) AS r(paper_id, reason) JOIN papers p ON p.id = r.paper_id
ON CONFLICT (paper_id) DO UPDATE SET
    attempts = f.attempts + 1, reason = excluded.reason, failed_at = now(),
    retry_at = now() + $3::interval * power(2, least(f.attempts, 7)), paper_modified_at = excluded.paper_modified_at
"""
DELETE_ENRICH_FAILURES = """
DELETE FROM enrich_failures f USING papers p WHERE p.id = f.paper_id AND p.arxiv_id = any($1::text[])
"""
SELECT_ENRICH_FAILURES = """
SELECT p.arxiv_id, f.attempts, f.reason, f.failed_at, f.retry_at
FROM enrich_failures f JOIN papers p ON p.id = f.paper_id
ORDER BY f.failed_at DESC, f.paper_id
LIMIT $1
"""


@dataclass(frozen=True, slots=True)
class EnrichFailure:
    arxiv_id: str
    attempts: int
    reason: str
    failed_at: datetime
    retry_at: datetime


async def record_enrich_failures(
    conn: asyncpg.Connection, failures: Mapping[int, str], *, retry_after: timedelta
) -> None:
    """Mark papers (by id) whose enrichment could not be written, with the reason; they are retried after a
    backoff that starts at `retry_after` and doubles per attempt, or as soon as the paper changes."""
    if failures:
        ids = sorted(failures)
        await conn.execute(UPSERT_ENRICH_FAILURES, ids, [failures[i] for i in ids], retry_after)


async def clear_enrich_failures(conn: asyncpg.Connection, arxiv_ids: Sequence[str]) -> None:
    """Forget the failures of papers now enriched (inside the transaction that enriched them)."""
    if arxiv_ids:
        await conn.execute(DELETE_ENRICH_FAILURES, list(arxiv_ids))


async def fetch_enrich_failures(conn: asyncpg.Connection, *, limit: int = 20) -> list[EnrichFailure]:
    """The papers waiting to be retried after a failed write, latest failure first."""
    rows = await conn.fetch(SELECT_ENRICH_FAILURES, limit)
    return [EnrichFailure(r["arxiv_id"], r["attempts"], r["reason"], r["failed_at"], r["retry_at"]) for r in rows]


# ------------------------------------------------------------------------------------------- progress

UPSERT_PROGRESS = """
INSERT INTO ingest_progress AS g (source, records, pages, last_success_at, caught_up_to)
VALUES ($1, $2, $3, now(), $4)
ON CONFLICT (source) DO UPDATE SET
    records = g.records + excluded.records, pages = g.pages + excluded.pages, last_success_at = now(),
    caught_up_to = coalesce(excluded.caught_up_to, g.caught_up_to)
"""
SELECT_PROGRESS = """
SELECT source, records, pages, last_success_at, caught_up_to,
       extract(epoch FROM now() - last_success_at)::float8 AS since_success_s,
       extract(epoch FROM now() - caught_up_to)::float8 AS lag_s
FROM ingest_progress ORDER BY source
"""
SELECT_ENRICH_BACKLOG = """
SELECT (SELECT count(*) FROM papers WHERE enriched_at IS NULL) AS waiting,
       (SELECT count(*) FROM enrich_failures) AS failed,
       (SELECT min(retry_at) FROM enrich_failures) AS next_retry_at
"""


@dataclass(frozen=True, slots=True)
class SourceProgress:
    """What one ingest source (`arxiv:all`, `arxiv:<set>`, `enrich`) has committed, in total."""

    source: str
    records: int
    pages: int
    last_success_at: datetime | None
    since_success_s: float | None  # seconds since `last_success_at`
    caught_up_to: datetime | None
    lag_s: float | None  # seconds behind the upstream: now - caught_up_to (arXiv)


@dataclass(frozen=True, slots=True)
class IngestStatus:
    sources: list[SourceProgress]
    enrich_waiting: int  # papers not enriched yet (including those waiting for a retry)
    enrich_failed: int  # papers whose enrichment failed to write, waiting for a retry
    enrich_next_retry_at: datetime | None
    # Readers' corrections: waiting, in effect, and the ingest's writes kept from undoing them.
    corrections: CorrectionCounts | None = None


async def record_progress(
    conn: asyncpg.Connection, source: str, *, records: int, pages: int = 1, caught_up_to: datetime | None = None
) -> None:
    """Count a committed page or batch; call it inside the transaction that writes it."""
    await conn.execute(UPSERT_PROGRESS, source, records, pages, caught_up_to)


async def fetch_ingest_status(conn: asyncpg.Connection) -> IngestStatus:
    """Every source's progress and the enrichment backlog: what `wovepaper ingest status` prints and metrics read."""
    sources = [
        SourceProgress(
            r["source"],
            r["records"],
            r["pages"],
            r["last_success_at"],
            r["since_success_s"],
            r["caught_up_to"],
            r["lag_s"],
        )
        for r in await conn.fetch(SELECT_PROGRESS)
    ]
    backlog = await conn.fetchrow(SELECT_ENRICH_BACKLOG)
    assert backlog is not None
    corrections = await fetch_correction_counts(conn)
    return IngestStatus(sources, backlog["waiting"], backlog["failed"], backlog["next_retry_at"], corrections)
