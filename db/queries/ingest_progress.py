"""What the ingest has done so far, for /metrics: checkpoints, table sizes, the enrichment queue, and the readers'
corrections it must keep."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from db.connection import Conn
from db.queries.corrections import CorrectionCounts, fetch_correction_counts

# Counting the whole queue could read millions of index entries on every scrape: past this it says "at least".
QUEUE_COUNT_CAP: Final = 100_000

SELECT_CHECKPOINTS = """
SELECT source, updated_at, coalesce((state->>'pages')::bigint, 0) AS pages,
       state->>'token' IS NOT NULL AS running,
       CASE WHEN state->>'token' IS NOT NULL THEN state->>'harvest_from' ELSE state->>'next_from' END AS through
FROM ingest_checkpoints ORDER BY source
"""
# Planner estimates: free to read, refreshed by autovacuum's ANALYZE.
SELECT_ROW_ESTIMATES = """
SELECT c.relname AS kind, greatest(c.reltuples, 0)::bigint AS n FROM pg_class c
WHERE c.oid IN ('papers'::regclass, 'researchers'::regclass, 'institutions'::regclass)
"""
COUNT_ENRICH_QUEUE = f"""
SELECT count(*) FROM (SELECT 1 FROM papers WHERE enriched_at IS NULL LIMIT {QUEUE_COUNT_CAP}) AS q
"""


@dataclass(frozen=True, slots=True)
class CheckpointProgress:
    source: str
    updated_at: datetime
    pages: int
    running: bool
    through: str | None  # ISO date the source is harvested through (or the running harvest started from)


@dataclass(frozen=True, slots=True)
class IngestProgress:
    checkpoints: list[CheckpointProgress]
    rows: dict[str, int]
    enrich_queue: int
    corrections: CorrectionCounts | None = None


async def fetch_ingest_progress(conn: Conn) -> IngestProgress:
    checkpoints = [
        CheckpointProgress(r["source"], r["updated_at"], r["pages"], r["running"], r["through"])
        for r in await conn.fetch(SELECT_CHECKPOINTS)
    ]
    rows = {r["kind"]: r["n"] for r in await conn.fetch(SELECT_ROW_ESTIMATES)}
    queue = await conn.fetchval(COUNT_ENRICH_QUEUE)
    return IngestProgress(checkpoints, rows, int(queue or 0), await fetch_correction_counts(conn))
