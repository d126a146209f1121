"""Researcher and institution aggregates: each one SQL statement, computed in PostgreSQL.

Whole-career figures count every distinct work once: an archive paper, and the external works that
Semantic Scholar and OpenAlex list, joined by arXiv id (also through the arXiv DOI 10.48550/arXiv.<id>),
then by DOI; a work listed by both sources keeps the higher citation count.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

Conn = asyncpg.Connection | asyncpg.Pool

# The researcher's distinct archive papers with their own position (a name listed twice counts once).
_MY_PAPERS = """
mine AS (
    SELECT DISTINCT ON (p.id)
           p.id, lower(p.arxiv_id) AS arxiv_key, lower(p.doi) AS doi, p.cited_by_count, p.primary_category,
           p.published, p.author_count, p.matched_count, a.position
      FROM authorships a
      JOIN papers p ON p.id = a.paper_id
     WHERE a.researcher_id = $1
     ORDER BY p.id, a.position
)"""

# One row per distinct work of the whole career, with its best known citation count.
_CAREER_WORKS = """
career AS (
    SELECT max(u.c) AS c
      FROM (
            SELECT 'arxiv:' || m.arxiv_key AS k, m.cited_by_count AS c FROM mine m
            UNION ALL
            SELECT coalesce(
                       'arxiv:' || lower(w.arxiv_id),
                       'arxiv:' || substring(lower(w.doi) FROM '^10\\.48550/arxiv\\.(.+)$'),
                       'arxiv:' || md.arxiv_key,
                       'doi:' || lower(w.doi),
                       w.source || ':' || w.external_id),
                   w.citation_count
              FROM researcher_works w
              LEFT JOIN (SELECT DISTINCT ON (doi) doi, arxiv_key FROM mine WHERE doi IS NOT NULL
                          ORDER BY doi, arxiv_key) md ON md.doi = lower(w.doi)
             WHERE w.researcher_id = $1
           ) u
     GROUP BY u.k
)"""

SELECT_RESEARCHER_STATS = f"""
WITH {_MY_PAPERS},
{_CAREER_WORKS},
career_ranked AS (
    SELECT c, row_number() OVER (ORDER BY c DESC NULLS LAST) AS rn FROM career
),
archive_ranked AS (
    SELECT cited_by_count AS c, row_number() OVER (ORDER BY cited_by_count DESC NULLS LAST) AS rn FROM mine
),
positions AS (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE author_count > 0 AND matched_count >= author_count) AS matched,
           count(*) FILTER (WHERE author_count > 0 AND matched_count >= author_count
                              AND author_count = 1) AS solo,
           count(*) FILTER (WHERE author_count > 0 AND matched_count >= author_count
                              AND author_count > 1 AND position = 1) AS first,
           count(*) FILTER (WHERE author_count > 0 AND matched_count >= author_count
                              AND author_count > 1 AND position = author_count) AS last,
           count(*) FILTER (WHERE author_count > 0 AND matched_count >= author_count
                              AND author_count > 1 AND position > 1 AND position < author_count) AS middle,
           coalesce(sum(cited_by_count), 0) AS citation_total,
           count(cited_by_count) AS papers_with_counts
      FROM mine
)
SELECT r.id,
       pos.total AS paper_count,
       (SELECT count(*) FROM career_ranked WHERE c >= rn) AS h_index,
       (SELECT count(*) FROM career WHERE c >= 10) AS i10_index,
       (SELECT coalesce(sum(c), 0) FROM career) AS citation_count,
       (SELECT count(*) FROM career) AS works_count,
       (SELECT count(*) FROM archive_ranked WHERE c >= rn) AS h_index_in_archive,
       (SELECT count(*) FROM mine WHERE cited_by_count >= 10) AS i10_index_in_archive,
       pos.first, pos.middle, pos.last, pos.solo, pos.matched AS matched_papers,
       pos.citation_total, pos.papers_with_counts,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(f.primary_category, f.n)
                                  ORDER BY f.n DESC, f.primary_category), '[]'::jsonb)
          FROM (SELECT primary_category, count(*) AS n FROM mine GROUP BY primary_category) f) AS fields,
       (SELECT m.id FROM mine m WHERE m.cited_by_count IS NOT NULL
         ORDER BY m.cited_by_count DESC, m.published DESC, m.id LIMIT 1) AS most_cited_paper_id,
       r.s2_paper_count, r.s2_citation_count, r.s2_h_index, r.s2_updated_at,
       r.openalex_works_count, r.openalex_cited_by_count, r.openalex_h_index, r.openalex_i10_index,
       r.openalex_updated_at,
       now() AS computed_at
  FROM researchers r, positions pos
 WHERE r.id = $1
"""

SELECT_RESEARCHER_COAUTHORS = """
SELECT a2.researcher_id,
       count(DISTINCT a1.paper_id) AS shared_papers,
       min(extract(year FROM p.published))::int AS first_year,
       max(extract(year FROM p.published))::int AS last_year
  FROM authorships a1
  JOIN authorships a2 ON a2.paper_id = a1.paper_id
                     AND a2.researcher_id IS NOT NULL
                     AND a2.researcher_id <> a1.researcher_id
  JOIN papers p ON p.id = a1.paper_id
 WHERE a1.researcher_id = $1
 GROUP BY a2.researcher_id
 ORDER BY shared_papers DESC, last_year DESC, a2.researcher_id
 LIMIT $2
"""

# Nodes: the centre, its co-authors with at least $2 shared papers, and at depth 2 the co-authors of
# those sharing at least $2 papers with one of them (ranked by papers shared with the first ring);
# at most $4 nodes. Edges: every pair of nodes with
# at least $2 shared papers. Node weight: the sum of its edges' shared papers in this network.
SELECT_RESEARCHER_NETWORK = """
WITH ring1 AS (
    SELECT a2.researcher_id AS id, count(DISTINCT a1.paper_id) AS shared
      FROM authorships a1
      JOIN authorships a2 ON a2.paper_id = a1.paper_id
                         AND a2.researcher_id IS NOT NULL AND a2.researcher_id <> a1.researcher_id
     WHERE a1.researcher_id = $1
     GROUP BY a2.researcher_id
    HAVING count(DISTINCT a1.paper_id) >= $2
     ORDER BY shared DESC, id
     LIMIT $4 - 1
),
ring2 AS (
    SELECT pair.id, sum(pair.shared) AS shared
      FROM (SELECT a1.researcher_id AS via, a2.researcher_id AS id, count(DISTINCT a1.paper_id) AS shared
              FROM ring1
              JOIN authorships a1 ON a1.researcher_id = ring1.id
              JOIN authorships a2 ON a2.paper_id = a1.paper_id
                                 AND a2.researcher_id IS NOT NULL AND a2.researcher_id <> a1.researcher_id
             WHERE $3 >= 2
               AND a2.researcher_id <> $1
               AND a2.researcher_id NOT IN (SELECT id FROM ring1)
             GROUP BY a1.researcher_id, a2.researcher_id
            HAVING count(DISTINCT a1.paper_id) >= $2) pair
     GROUP BY pair.id
     ORDER BY shared DESC, pair.id
     LIMIT greatest($4 - 1 - (SELECT count(*) FROM ring1), 0)
),
nodes AS (
    SELECT $1::bigint AS id, 0 AS depth
    UNION ALL SELECT id, 1 FROM ring1
    UNION ALL SELECT id, 2 FROM ring2
),
node_papers AS (
    SELECT DISTINCT a.paper_id, a.researcher_id
      FROM authorships a
     WHERE a.researcher_id = ANY (SELECT id FROM nodes)
),
edges AS (
    SELECT x.researcher_id AS source, y.researcher_id AS target, count(*) AS shared
      FROM node_papers x
      JOIN node_papers y ON y.paper_id = x.paper_id AND y.researcher_id > x.researcher_id
     GROUP BY x.researcher_id, y.researcher_id
    HAVING count(*) >= $2
)
SELECT (SELECT coalesce(jsonb_agg(jsonb_build_array(n.id, n.depth,
                                   coalesce((SELECT sum(e.shared) FROM edges e
                                              WHERE e.source = n.id OR e.target = n.id), 0))
                                  ORDER BY n.depth, n.id), '[]'::jsonb)
          FROM nodes n) AS nodes,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(e.source, e.target, e.shared)
                                  ORDER BY e.shared DESC, e.source, e.target), '[]'::jsonb)
          FROM edges e) AS edges
  FROM researchers r
 WHERE r.id = $1
"""

SELECT_INSTITUTION_STATS = """
WITH inst_papers AS (
    SELECT DISTINCT ai.paper_id FROM authorship_institutions ai WHERE ai.institution_id = $1
),
inst_researchers AS (
    SELECT ri.researcher_id FROM researcher_institutions ri WHERE ri.institution_id = $1
    UNION
    SELECT a.researcher_id
      FROM authorship_institutions ai
      JOIN authorships a ON a.paper_id = ai.paper_id AND a.position = ai.position
     WHERE ai.institution_id = $1 AND a.researcher_id IS NOT NULL
)
SELECT i.id,
       (SELECT count(*) FROM inst_papers) AS paper_count,
       (SELECT count(*) FROM inst_researchers) AS researcher_count,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(f.primary_category, f.n)
                                  ORDER BY f.n DESC, f.primary_category), '[]'::jsonb)
          FROM (SELECT p.primary_category, count(*) AS n
                  FROM inst_papers ip JOIN papers p ON p.id = ip.paper_id
                 GROUP BY p.primary_category) f) AS fields,
       (SELECT coalesce(array_agg(t.id ORDER BY t.h_index DESC, t.citation_count DESC, t.id), '{}')
          FROM (SELECT r.id, r.h_index, r.citation_count
                  FROM inst_researchers ir JOIN researchers r ON r.id = ir.researcher_id
                 ORDER BY r.h_index DESC, r.citation_count DESC, r.id
                 LIMIT $2) t) AS top_researcher_ids
  FROM institutions i
 WHERE i.id = $1
"""

# Cap on co-authors kept per researcher (and on `coauthors(first:)`).
MAX_COAUTHORS = 100
# Cap on researchers kept for `topResearchers(first:)`.
MAX_TOP_RESEARCHERS = 100


@dataclass(frozen=True, slots=True)
class FieldCountRow:
    category: str
    count: int


@dataclass(frozen=True, slots=True)
class SourceFiguresRow:
    """One source's figures for a researcher; None where the source does not report one."""

    h_index: int | None
    i10_index: int | None
    citation_count: int | None
    works_count: int | None
    as_of: datetime | None


@dataclass(frozen=True, slots=True)
class ResearcherStatsRow:
    researcher_id: int
    paper_count: int
    h_index: int
    i10_index: int
    citation_count: int
    works_count: int
    h_index_in_archive: int
    i10_index_in_archive: int
    first: int
    middle: int
    last: int
    solo: int
    matched_papers: int
    citation_total: int
    papers_with_counts: int
    fields: list[FieldCountRow]
    most_cited_paper_id: int | None
    semantic_scholar: SourceFiguresRow
    open_alex: SourceFiguresRow
    computed_at: datetime

    @property
    def computed(self) -> SourceFiguresRow:
        return SourceFiguresRow(self.h_index, self.i10_index, self.citation_count, self.works_count, self.computed_at)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ResearcherStatsRow:
        return cls(
            **{
                **d,
                "fields": [FieldCountRow(**f) for f in d["fields"]],
                "semantic_scholar": _source_from_json(d["semantic_scholar"]),
                "open_alex": _source_from_json(d["open_alex"]),
                "computed_at": datetime.fromisoformat(d["computed_at"]),
            }
        )


@dataclass(frozen=True, slots=True)
class CoauthorRow:
    researcher_id: int
    shared_papers: int
    first_year: int
    last_year: int

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CoauthorRow:
        return cls(**d)


@dataclass(frozen=True, slots=True)
class NetworkNodeRow:
    researcher_id: int
    depth: int  # 0 for the centre
    weight: int


@dataclass(frozen=True, slots=True)
class NetworkEdgeRow:
    source: int
    target: int
    shared_papers: int


@dataclass(frozen=True, slots=True)
class NetworkRow:
    nodes: list[NetworkNodeRow]
    edges: list[NetworkEdgeRow]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> NetworkRow:
        return cls(
            nodes=[NetworkNodeRow(**n) for n in d["nodes"]],
            edges=[NetworkEdgeRow(**e) for e in d["edges"]],
        )


@dataclass(frozen=True, slots=True)
class InstitutionStatsRow:
    institution_id: int
    paper_count: int
    researcher_count: int
    fields: list[FieldCountRow]
    top_researcher_ids: list[int]

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> InstitutionStatsRow:
        return cls(**{**d, "fields": [FieldCountRow(**f) for f in d["fields"]]})


def _source_from_json(d: dict[str, Any]) -> SourceFiguresRow:
    as_of = d["as_of"]
    return SourceFiguresRow(**{**d, "as_of": datetime.fromisoformat(as_of) if as_of else None})


def _fields(raw: list[list[Any]]) -> list[FieldCountRow]:
    return [FieldCountRow(category=str(c), count=int(n)) for c, n in raw]


async def fetch_researcher_stats(conn: Conn, *, researcher_id: int) -> ResearcherStatsRow | None:
    """Every figure of the researcher page in one statement; None when there is no such researcher."""
    r = await conn.fetchrow(SELECT_RESEARCHER_STATS, researcher_id)
    if r is None:
        return None
    return ResearcherStatsRow(
        researcher_id=r["id"],
        paper_count=r["paper_count"],
        h_index=r["h_index"],
        i10_index=r["i10_index"],
        citation_count=int(r["citation_count"]),
        works_count=r["works_count"],
        h_index_in_archive=r["h_index_in_archive"],
        i10_index_in_archive=r["i10_index_in_archive"],
        first=r["first"],
        middle=r["middle"],
        last=r["last"],
        solo=r["solo"],
        matched_papers=r["matched_papers"],
        citation_total=int(r["citation_total"]),
        papers_with_counts=r["papers_with_counts"],
        fields=_fields(r["fields"]),
        most_cited_paper_id=r["most_cited_paper_id"],
        semantic_scholar=SourceFiguresRow(
            h_index=r["s2_h_index"],
            i10_index=None,  # Semantic Scholar does not report one
            citation_count=r["s2_citation_count"],
            works_count=r["s2_paper_count"],
            as_of=r["s2_updated_at"],
        ),
        open_alex=SourceFiguresRow(
            h_index=r["openalex_h_index"],
            i10_index=r["openalex_i10_index"],
            citation_count=r["openalex_cited_by_count"],
            works_count=r["openalex_works_count"],
            as_of=r["openalex_updated_at"],
        ),
        computed_at=r["computed_at"],
    )


async def fetch_researcher_coauthors(
    conn: Conn, *, researcher_id: int, limit: int = MAX_COAUTHORS
) -> list[CoauthorRow]:
    """Researchers sharing papers with this one, most shared first (ties: most recent, then id)."""
    rows = await conn.fetch(SELECT_RESEARCHER_COAUTHORS, researcher_id, limit)
    return [CoauthorRow(r["researcher_id"], r["shared_papers"], r["first_year"], r["last_year"]) for r in rows]


async def fetch_researcher_network(
    conn: Conn, *, researcher_id: int, depth: int, min_shared: int, limit: int
) -> NetworkRow | None:
    """The co-author graph around a researcher; None when there is no such researcher."""
    r = await conn.fetchrow(SELECT_RESEARCHER_NETWORK, researcher_id, min_shared, depth, limit)
    if r is None:
        return None
    return NetworkRow(
        nodes=[NetworkNodeRow(int(i), int(d), int(w)) for i, d, w in r["nodes"]],
        edges=[NetworkEdgeRow(int(s), int(t), int(n)) for s, t, n in r["edges"]],
    )


async def fetch_institution_stats(
    conn: Conn, *, institution_id: int, top: int = MAX_TOP_RESEARCHERS
) -> InstitutionStatsRow | None:
    """Papers, researchers, fields and top researchers (by career h-index) of an institution."""
    r = await conn.fetchrow(SELECT_INSTITUTION_STATS, institution_id, top)
    if r is None:
        return None
    return InstitutionStatsRow(
        institution_id=r["id"],
        paper_count=r["paper_count"],
        researcher_count=r["researcher_count"],
        fields=_fields(r["fields"]),
        top_researcher_ids=list(r["top_researcher_ids"]),
    )
