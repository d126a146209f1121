"""Paper embeddings (pgvector): which papers need one, storing them, and whether this database has them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

# The table exists only where migration 0003 found pgvector.
SELECT_HAS_EMBEDDINGS = "SELECT to_regclass('paper_embeddings') IS NOT NULL"

# Keyset walk by id: one pass over papers per run however many batches, and a paper whose title or
# abstract changed since it was embedded (md5 differs) is picked up again.
SELECT_PAPERS_TO_EMBED = """
SELECT p.id, p.title, p.abstract
FROM papers p
LEFT JOIN paper_embeddings e ON e.paper_id = p.id
WHERE p.id > $1::bigint
  AND (e.paper_id IS NULL OR e.source_md5 <> md5(p.title || E'\\n' || p.abstract)::uuid)
ORDER BY p.id
LIMIT $2::int
"""

# Vectors travel as pgvector's text form ('[0.1,0.2,...]'), so no client-side codec is needed.
UPSERT_EMBEDDINGS = """
INSERT INTO paper_embeddings (paper_id, embedding, source_md5, model)
SELECT u.paper_id, u.embedding::vector, u.source_md5::uuid, $4::text
FROM unnest($1::bigint[], $2::text[], $3::text[]) AS u (paper_id, embedding, source_md5)
JOIN papers p ON p.id = u.paper_id
ON CONFLICT (paper_id) DO UPDATE
    SET embedding = excluded.embedding, source_md5 = excluded.source_md5, model = excluded.model,
        embedded_at = now()
"""

COUNT_EMBEDDINGS = """
SELECT (SELECT count(*) FROM papers) AS papers, (SELECT count(*) FROM paper_embeddings) AS embedded
"""


@dataclass(frozen=True, slots=True)
class PaperText:
    id: int
    title: str
    abstract: str


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


async def has_embeddings(conn: asyncpg.Connection | asyncpg.Pool) -> bool:
    """True when this database has pgvector and the paper_embeddings table."""
    return bool(await conn.fetchval(SELECT_HAS_EMBEDDINGS))


async def fetch_papers_to_embed(
    conn: asyncpg.Connection | asyncpg.Pool, *, after_id: int, limit: int
) -> list[PaperText]:
    rows = await conn.fetch(SELECT_PAPERS_TO_EMBED, after_id, limit)
    return [PaperText(r["id"], r["title"], r["abstract"]) for r in rows]


async def upsert_embeddings(
    conn: asyncpg.Connection | asyncpg.Pool,
    *,
    paper_ids: Sequence[int],
    vectors: Sequence[Sequence[float]],
    source_md5s: Sequence[str],
    model: str,
) -> int:
    """Store vectors (unit length, 384 dimensions); a paper deleted meanwhile is skipped. Returns rows written."""
    status = await conn.execute(
        UPSERT_EMBEDDINGS, list(paper_ids), [vector_literal(v) for v in vectors], list(source_md5s), model
    )
    return int(status.rsplit(" ", 1)[-1])


async def count_embeddings(conn: asyncpg.Connection | asyncpg.Pool) -> tuple[int, int]:
    """(papers, papers with a vector)."""
    row = await conn.fetchrow(COUNT_EMBEDDINGS)
    assert row is not None
    return int(row["papers"]), int(row["embedded"])
