"""Paper analyses (summary, topics, type, field, novelty, score): writing one marks the paper analysed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from db.queries.paper_people import add_people_of_papers
from db.queries.writes.staging import stage
from db.records import Touched


@dataclass(frozen=True, slots=True)
class AnalysisRecord:
    """The analysis of one paper (summary, topics, ...); writing one marks the paper analysed."""

    arxiv_id: str
    summary: str | None
    topics: list[str] | None
    paper_type: str | None  # one of db.records.PAPER_TYPES
    research_field: str | None
    novelty: str | None
    significance_score: float | None  # 0 to 1
    model: str | None = None  # what made it
    # md5 (hex) of the title and abstract it was made from; None: the paper's text as stored now.
    source_md5: str | None = None


async def upsert_analyses(
    conn: asyncpg.Connection, analyses: Sequence[AnalysisRecord], *, touched: Touched | None = None
) -> Touched:
    """Store paper analyses (summary, topics, type, field, novelty, score) and mark the papers analysed."""
    rows = {
        a.arxiv_id: (
            a.arxiv_id,
            a.summary,
            a.topics,
            a.paper_type,
            a.research_field,
            a.novelty,
            a.significance_score,
            a.model,
            a.source_md5,
        )
        for a in analyses
    }
    await stage(conn, "stg_analyses", STG_ANALYSES, STG_ANALYSIS_COLUMNS, list(rows.values()))
    here = Touched(papers={r["id"] for r in await conn.fetch(UPDATE_ANALYSES_FROM_STAGING) if r["changed"]})
    await add_people_of_papers(conn, here.papers, here)
    if touched is not None:
        touched.update(here)
    return here


STG_ANALYSES = """
    arxiv_id text, summary text, topics text[], paper_type text, research_field text, novelty text,
    significance_score real, model text, source_md5 uuid
"""
STG_ANALYSIS_COLUMNS = (
    "arxiv_id",
    "summary",
    "topics",
    "paper_type",
    "research_field",
    "novelty",
    "significance_score",
    "model",
    "source_md5",
)
# A stored analysis is replaced whole, and a failure recorded for an earlier text is cleared with it. A paper
# whose served fields do not change keeps its modified_at (nothing for caches and sitemaps to pick up).
UPDATE_ANALYSES_FROM_STAGING = """
WITH s AS (
    SELECT st.*, p.id,
           coalesce(st.source_md5, md5(p.title || E'\\n' || p.abstract)::uuid) AS made_from,
           (p.summary, p.topics, p.paper_type, p.research_field, p.novelty, p.significance_score, p.analysed,
            p.analysis_model)
           IS DISTINCT FROM (st.summary, st.topics, st.paper_type, st.research_field, st.novelty,
                             st.significance_score, true, st.model) AS changed
    FROM stg_analyses st JOIN papers p ON p.arxiv_id = st.arxiv_id
)
UPDATE papers p SET summary = s.summary, topics = s.topics, paper_type = s.paper_type,
    research_field = s.research_field, novelty = s.novelty, significance_score = s.significance_score,
    analysed = true, analysis_model = s.model, analysis_error = NULL, analysis_source_md5 = s.made_from,
    analysed_at = CASE WHEN s.changed THEN now() ELSE p.analysed_at END,
    modified_at = CASE WHEN s.changed THEN now() ELSE p.modified_at END
FROM s
WHERE p.id = s.id
  AND (s.changed OR p.analysis_error IS NOT NULL OR p.analysis_source_md5 IS DISTINCT FROM s.made_from)
RETURNING p.id, s.changed
"""
