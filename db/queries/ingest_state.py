"""SQL the ingest needs besides the bulk write path: checkpoints, the enrichment queue, tombstones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
import orjson

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
# this run is not picked again by the same run.
SELECT_ENRICH_QUEUE = """
SELECT id, arxiv_id, doi, published FROM papers
WHERE enriched_at IS NULL AND ($1::timestamptz IS NULL OR (published, id) < ($1::timestamptz, $2::bigint))
ORDER BY published DESC, id DESC
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
