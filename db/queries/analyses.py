"""SQL of the analysis stage: its queue, failed papers, and the day's token count it keeps as a checkpoint.

Analyses themselves are written by `db.queries.writes.analyses.upsert_analyses`, the write path the demo shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import asyncpg

# Newest first, through papers_analysis_queue_idx (whose predicate this repeats): papers whose current title
# and abstract were never attempted. Keyset-paged, so a paper this run could not analyse (the model was down)
# is not taken again by the same run.
SELECT_ANALYSIS_QUEUE = """
SELECT p.id, p.arxiv_id, p.title, p.abstract, p.categories, p.published,
       md5(p.title || E'\\n' || p.abstract) AS source_md5
FROM papers p
WHERE NOT p.withdrawn
  AND p.analysis_source_md5 IS DISTINCT FROM md5(p.title || E'\\n' || p.abstract)::uuid
  AND p.published >= $1::timestamptz
  AND (p.published, p.id) < ($2::timestamptz, $3::bigint)
ORDER BY p.published DESC, p.id DESC
LIMIT $4::int
"""

# A failure is kept with the text it was made from: the paper leaves the queue until that text changes.
# What the API serves does not change, so neither does modified_at.
UPDATE_ANALYSIS_FAILURES = """
UPDATE papers p SET analysis_error = f.reason, analysis_source_md5 = f.source_md5::uuid
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS f (id, source_md5, reason)
WHERE p.id = f.id
"""

COUNT_ANALYSIS_QUEUE = """
SELECT count(*) FROM papers p
WHERE NOT p.withdrawn AND p.analysis_source_md5 IS DISTINCT FROM md5(p.title || E'\\n' || p.abstract)::uuid
"""

# Keyset bounds that take every paper: newer than any, and older than any.
QUEUE_START = (datetime(9999, 12, 31, tzinfo=UTC), 2**63 - 1)
EVER = datetime(1, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class QueuedAnalysis:
    id: int
    arxiv_id: str
    title: str
    abstract: str
    categories: list[str]
    published: datetime
    source_md5: str


@dataclass(frozen=True, slots=True)
class AnalysisFailure:
    paper_id: int
    source_md5: str
    reason: str


async def fetch_analysis_queue(
    conn: asyncpg.Connection,
    limit: int,
    *,
    since: datetime,
    before: tuple[datetime, int],
) -> list[QueuedAnalysis]:
    """Up to `limit` papers to analyse, published on or after `since` and older than `before` (published, id)."""
    rows = await conn.fetch(SELECT_ANALYSIS_QUEUE, since, before[0], before[1], limit)
    return [QueuedAnalysis(*r) for r in rows]


async def record_analysis_failures(conn: asyncpg.Connection, failures: Sequence[AnalysisFailure]) -> None:
    if failures:
        await conn.execute(
            UPDATE_ANALYSIS_FAILURES,
            [f.paper_id for f in failures],
            [f.source_md5 for f in failures],
            [f.reason for f in failures],
        )


async def count_analysis_queue(conn: asyncpg.Connection) -> int:
    count: int = await conn.fetchval(COUNT_ANALYSIS_QUEUE)
    return count
