"""The nearest papers of a paper, by cosine similarity of their vectors (pgvector's HNSW index)."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from db.connection import Conn, read_only
from db.queries.papers import PAPER_COLUMNS, PaperRow, paper_from_record
from db.queries.search.papers import SemanticSearchUnavailable
from db.queries.search.statement import SEMANTIC_SESSION

# For each source paper, its nearest neighbours through the HNSW index (the LATERAL's ORDER BY operand is
# the source's vector, a parameter of the inner scan, so the index serves it).
SELECT_SIMILAR_PAPERS = f"""
SELECT {PAPER_COLUMNS}, n.source_id, n.similarity
FROM (
    SELECT s.paper_id AS source_id, x.paper_id, x.similarity
    FROM unnest($1::bigint[]) AS s (paper_id)
    JOIN paper_embeddings e ON e.paper_id = s.paper_id
    CROSS JOIN LATERAL (
        SELECT o.paper_id, (1 - (o.embedding <=> e.embedding))::float8 AS similarity
        FROM paper_embeddings o
        WHERE o.paper_id <> s.paper_id
        ORDER BY o.embedding <=> e.embedding
        LIMIT $2::int
    ) x
) n
JOIN papers p ON p.id = n.paper_id
ORDER BY n.source_id, n.similarity DESC, p.id
"""


async def fetch_similar_papers(
    conn: Conn, paper_ids: Sequence[int], *, limit: int
) -> dict[int, list[tuple[PaperRow, float]]]:
    """For each paper, up to `limit` of its nearest papers with their cosine similarity, most similar first;
    a paper without a vector has none. Raises SemanticSearchUnavailable without pgvector."""
    out: dict[int, list[tuple[PaperRow, float]]] = {pid: [] for pid in paper_ids}
    try:
        async with read_only(conn, SEMANTIC_SESSION):
            rows = await conn.fetch(SELECT_SIMILAR_PAPERS, list(paper_ids), limit)
    except (asyncpg.UndefinedTableError, asyncpg.UndefinedObjectError) as exc:
        raise SemanticSearchUnavailable(str(exc)) from exc
    for r in rows:
        out[r["source_id"]].append((paper_from_record(r), r["similarity"]))
    return out


async def fetch_similar_papers_by_keys(conn: Conn, keys: list[tuple[int, int]]) -> list[list[PaperRow]]:
    """A loader batch: keys are (paper id, how many); one statement per distinct count (usually one).
    Without pgvector every list is empty: a paper page must not fail for want of the optional index."""
    out: dict[tuple[int, int], list[PaperRow]] = {}
    for limit in sorted({k[1] for k in keys}):
        ids = [k[0] for k in keys if k[1] == limit]
        try:
            found = await fetch_similar_papers(conn, ids, limit=limit)
        except SemanticSearchUnavailable:
            found = {}
        for pid in ids:
            out[(pid, limit)] = [row for row, _ in found.get(pid, [])]
    return [out[k] for k in keys]
