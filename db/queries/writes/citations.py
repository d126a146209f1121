"""Citation counts and external paper ids; papers taken off the enrichment queue."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from db.queries.paper_people import add_people_of_papers
from db.queries.writes.staging import ids_of, stage
from db.records import CitationRecord, Touched

STG_CITATIONS = (
    "arxiv_id text, cited_by_count integer, source text, s2_paper_id text, openalex_id text, s2_corpus_id bigint"
)
STG_CITATION_COLUMNS = ("arxiv_id", "cited_by_count", "source", "s2_paper_id", "openalex_id", "s2_corpus_id")


def _free_paper_id(col: str) -> str:
    return (
        f"CASE WHEN s.{col} IS NULL OR EXISTS (SELECT 1 FROM papers o WHERE o.{col} = s.{col} AND o.id <> p.id) "
        f"THEN p.{col} ELSE s.{col} END"
    )


UPDATE_CITATIONS_FROM_STAGING = f"""
UPDATE papers p SET cited_by_count = s.cited_by_count, cited_by_source = s.source,
    s2_paper_id = {_free_paper_id("s2_paper_id")}, openalex_id = {_free_paper_id("openalex_id")},
    s2_corpus_id = {_free_paper_id("s2_corpus_id")}, modified_at = now()
FROM stg_citations s
WHERE p.arxiv_id = s.arxiv_id
  AND (p.cited_by_count, p.cited_by_source, p.s2_paper_id, p.openalex_id, p.s2_corpus_id)
      IS DISTINCT FROM (s.cited_by_count, s.source, {_free_paper_id("s2_paper_id")}, {_free_paper_id("openalex_id")},
                        {_free_paper_id("s2_corpus_id")})
RETURNING p.id
"""
MARK_ENRICHED = "UPDATE papers SET enriched_at = now() WHERE arxiv_id = any($1::text[])"


async def update_citations(
    conn: asyncpg.Connection, recs: Sequence[CitationRecord], *, touched: Touched | None = None
) -> Touched:
    """Set papers' citation counts (and their S2 / OpenAlex ids); touches their researchers and institutions."""
    rows = {
        r.arxiv_id: (r.arxiv_id, r.cited_by_count, r.source, r.s2_paper_id, r.openalex_id, r.s2_corpus_id) for r in recs
    }
    here = Touched()
    if rows:
        await stage(conn, "stg_citations", STG_CITATIONS, STG_CITATION_COLUMNS, list(rows.values()))
        here.papers = ids_of(await conn.fetch(UPDATE_CITATIONS_FROM_STAGING), "id")
        await add_people_of_papers(conn, here.papers, here)
    if touched is not None:
        touched.update(here)
    return here


async def mark_enriched(conn: asyncpg.Connection, arxiv_ids: Sequence[str]) -> None:
    """Take papers off the enrichment queue (papers.enriched_at); not a visible change, so nothing is touched."""
    await conn.execute(MARK_ENRICHED, list(arxiv_ids))
