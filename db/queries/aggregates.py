"""Researcher and institution aggregates: each one SQL statement, computed in PostgreSQL.

Whole-career figures are the ones `db.queries.figures` stores in the write's transaction (the same refresh
that keeps the figures lists sort and filter on), so a page and a list never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from db.connection import ConnOrPool
from db.queries.papers import PAPERS, PaperRow
from db.rows import select_list

# Papers per arXiv category over `papers` (rows with categories and primary_category): `count` those listed in the
# category at all (cross-lists too: what `papers(filter: {category})` lists), `primary_count` those whose primary
# category it is (what `primaryOnly: true` lists). Most first. (unnest in the select list: a lateral function call
# per paper costs half as much again over an institution's 200k papers.)
FIELDS_OF = """coalesce(jsonb_agg(jsonb_build_array(f.category, f.n, f.primary_n)
                                ORDER BY f.n DESC, f.primary_n DESC, f.category), '[]'::jsonb)
          FROM (SELECT c.category, count(*) AS n, count(*) FILTER (WHERE c.category = c.primary_category) AS primary_n
                  FROM (SELECT unnest(categories) AS category, primary_category FROM {papers}) c
                 GROUP BY c.category) f"""

SELECT_RESEARCHER_STATS = f"""
WITH
-- The researcher's distinct archive papers with their own position (a name listed twice counts once), read from
-- the covering index of migration 0016 and the papers. Withdrawn papers are left out, as the researcher's papers
-- list leaves them out by default.
mine AS MATERIALIZED (
    SELECT DISTINCT ON (a.paper_id)
           a.paper_id AS id, p.cited_by_count, p.primary_category, p.categories, p.published, p.author_count,
           p.matched_count, a.position
      FROM authorships a JOIN papers p ON p.id = a.paper_id
     WHERE a.researcher_id = $1 AND NOT p.withdrawn
     ORDER BY a.paper_id, a.position
),
-- Position is known only on papers where every author is matched (a collaboration never is).
positions AS (
    SELECT count(*) AS total,
           count(*) FILTER (WHERE full_match) AS matched,
           count(*) FILTER (WHERE full_match AND author_count = 1) AS solo,
           count(*) FILTER (WHERE full_match AND author_count > 1 AND position = 1) AS first,
           count(*) FILTER (WHERE full_match AND author_count > 1 AND position = author_count) AS last,
           count(*) FILTER (WHERE full_match AND position > 1 AND position < author_count) AS middle,
           coalesce(sum(cited_by_count), 0) AS citation_total,
           count(cited_by_count) AS papers_with_counts
      FROM (SELECT *, author_count > 0 AND matched_count >= author_count AS full_match FROM mine) m
)
SELECT r.id,
       pos.total AS paper_count,
       pos.first, pos.middle, pos.last, pos.solo, pos.matched AS matched_papers,
       pos.citation_total, pos.papers_with_counts,
       -- Every scope's figures as the write path stored them (db.queries.figures); a scope without works has none.
       (SELECT coalesce(jsonb_object_agg(f.scope, jsonb_build_array(
                   f.works_count, f.citation_count, f.i10_index, f.h_index, f.with_counts)), '{{}}'::jsonb)
          FROM researcher_scope_figures f WHERE f.researcher_id = r.id) AS figures,
       (SELECT {FIELDS_OF.format(papers="mine")}) AS fields,
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
  JOIN papers p ON p.id = a1.paper_id AND NOT p.withdrawn
 WHERE a1.researcher_id = $1
 GROUP BY a2.researcher_id
 ORDER BY shared_papers DESC, last_year DESC, a2.researcher_id
 LIMIT $2
"""

# Over live papers (withdrawn ones left out, as everywhere a researcher's papers are counted): the few withdrawn
# ids are read once (migration 0011's partial index) and each authorship is a hash probe, not a join to papers.
# Nodes: the centre, its co-authors with at least $2 shared papers, and at depth 2 the co-authors of
# those sharing at least $2 papers with one of them (ranked by papers shared with the first ring);
# at most $4 nodes. Edges: every pair of nodes with
# at least $2 shared papers. Node weight: the sum of its edges' shared papers in this network.
SELECT_RESEARCHER_NETWORK = """
WITH withdrawn AS MATERIALIZED (SELECT p.id FROM papers p WHERE p.withdrawn),
ring1 AS (
    SELECT a2.researcher_id AS id, count(DISTINCT a1.paper_id) AS shared
      FROM authorships a1
      JOIN authorships a2 ON a2.paper_id = a1.paper_id
                         AND a2.researcher_id IS NOT NULL AND a2.researcher_id <> a1.researcher_id
     WHERE a1.researcher_id = $1 AND a1.paper_id NOT IN (SELECT w.id FROM withdrawn w)
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
               AND a1.paper_id NOT IN (SELECT w.id FROM withdrawn w)
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
     WHERE a.researcher_id = ANY (SELECT id FROM nodes) AND a.paper_id NOT IN (SELECT w.id FROM withdrawn w)
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

# An institution's figures as every write keeps them (migration 0027, db/queries/institution_figures.py): a few
# index lookups, whatever its size; the top researchers walk its members in ranking order and stop at $2.
SELECT_INSTITUTION_STATS = """
SELECT i.id,
       coalesce(f.paper_count, 0) AS paper_count,
       coalesce(f.member_count, 0) AS researcher_count,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(x.category, x.papers, x.primary_papers)
                                  ORDER BY x.papers DESC, x.primary_papers DESC, x.category), '[]'::jsonb)
          FROM institution_fields x WHERE x.institution_id = i.id) AS fields,
       ARRAY(SELECT m.researcher_id FROM institution_members m WHERE m.institution_id = i.id
              ORDER BY m.h_index DESC, m.citation_count DESC, m.researcher_id LIMIT $2) AS top_researcher_ids
  FROM institutions i LEFT JOIN institution_figures f ON f.institution_id = i.id
 WHERE i.id = $1
"""

# Cap on co-authors kept per researcher (and on `coauthors(first:)`).
MAX_COAUTHORS = 100
# Cap on researchers kept for `topResearchers(first:)`.
MAX_TOP_RESEARCHERS = 100


@dataclass(frozen=True, slots=True)
class FieldCountRow:
    category: str
    count: int  # papers listed in the category, cross-lists included
    primary_count: int  # papers whose primary category it is


@dataclass(frozen=True, slots=True)
class WorkFiguresRow:
    """Figures over a set of works (see `db.queries.figures` for the definitions)."""

    works_count: int
    citation_count: int
    i10_index: int
    h_index: int
    with_counts: int  # works that have a citation count at all


NO_WORKS = WorkFiguresRow(0, 0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class ReportedFiguresRow:
    """A source's own figures for a researcher, as it reports them; None where it reports none."""

    h_index: int | None
    i10_index: int | None
    citation_count: int | None
    works_count: int | None
    as_of: datetime | None


@dataclass(frozen=True, slots=True)
class ResearcherStatsRow:
    researcher_id: int
    paper_count: int
    career: WorkFiguresRow  # archive papers and external works, each work once
    archive: WorkFiguresRow  # archive papers only
    s2_listed: WorkFiguresRow  # the Semantic Scholar works list we hold, on its own
    openalex_listed: WorkFiguresRow  # the OpenAlex works list we hold, on its own
    first: int
    middle: int
    last: int
    solo: int
    matched_papers: int
    citation_total: int
    papers_with_counts: int
    fields: list[FieldCountRow]
    most_cited_paper_id: int | None
    s2_reported: ReportedFiguresRow
    openalex_reported: ReportedFiguresRow
    computed_at: datetime

    @property
    def h_index(self) -> int:
        return self.career.h_index

    @property
    def i10_index(self) -> int:
        return self.career.i10_index

    @property
    def citation_count(self) -> int:
        return self.career.citation_count

    @property
    def works_count(self) -> int:
        return self.career.works_count

    @property
    def h_index_in_archive(self) -> int:
        return self.archive.h_index

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ResearcherStatsRow:
        return cls(
            **{
                **d,
                "career": WorkFiguresRow(**d["career"]),
                "archive": WorkFiguresRow(**d["archive"]),
                "s2_listed": WorkFiguresRow(**d["s2_listed"]),
                "openalex_listed": WorkFiguresRow(**d["openalex_listed"]),
                "fields": [FieldCountRow(**f) for f in d["fields"]],
                "s2_reported": _reported_from_json(d["s2_reported"]),
                "openalex_reported": _reported_from_json(d["openalex_reported"]),
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


def _reported_from_json(d: dict[str, Any]) -> ReportedFiguresRow:
    as_of = d["as_of"]
    return ReportedFiguresRow(**{**d, "as_of": datetime.fromisoformat(as_of) if as_of else None})


def _json(v: Any) -> Any:
    # Pools from db.pool decode json/jsonb; a bare connection hands over the text.
    return orjson.loads(v) if isinstance(v, str) else v


def _work_figures(raw: dict[str, list[int]], scope: str) -> WorkFiguresRow:
    v = raw.get(scope)
    return WorkFiguresRow(*(int(x) for x in v)) if v else NO_WORKS


def fields_from_json(raw: Any) -> list[FieldCountRow]:
    return [FieldCountRow(category=str(c), count=int(n), primary_count=int(pn)) for c, n, pn in _json(raw)]


# The same, with the most cited paper's row (columns `mc_*`): the page shows that paper, which would otherwise take
# a statement of its own once the figures are back.
SELECT_RESEARCHER_STATS_AND_MOST_CITED = f"""
SELECT s.*, {select_list("mc", PAPERS.fields, prefix="mc_")}
  FROM ({SELECT_RESEARCHER_STATS}) s LEFT JOIN papers mc ON mc.id = s.most_cited_paper_id
"""


async def fetch_researcher_stats(conn: ConnOrPool, *, researcher_id: int) -> ResearcherStatsRow | None:
    """Every figure of the researcher page in one statement; None when there is no such researcher."""
    return _researcher_stats_row(await conn.fetchrow(SELECT_RESEARCHER_STATS, researcher_id))


async def fetch_researcher_stats_and_most_cited(
    conn: ConnOrPool, *, researcher_id: int
) -> tuple[ResearcherStatsRow | None, PaperRow | None]:
    """fetch_researcher_stats, and the most cited paper's row (None when the researcher has none) in the same
    statement."""
    r = await conn.fetchrow(SELECT_RESEARCHER_STATS_AND_MOST_CITED, researcher_id)
    paper = PAPERS.build(r, prefix="mc_") if r is not None and r["mc_id"] is not None else None
    return _researcher_stats_row(r), paper


def _researcher_stats_row(r: Any) -> ResearcherStatsRow | None:
    if r is None:
        return None
    figures = _json(r["figures"])
    return ResearcherStatsRow(
        researcher_id=r["id"],
        paper_count=r["paper_count"],
        career=_work_figures(figures, "career"),
        archive=_work_figures(figures, "archive"),
        s2_listed=_work_figures(figures, "s2"),
        openalex_listed=_work_figures(figures, "openalex"),
        first=r["first"],
        middle=r["middle"],
        last=r["last"],
        solo=r["solo"],
        matched_papers=r["matched_papers"],
        citation_total=int(r["citation_total"]),
        papers_with_counts=r["papers_with_counts"],
        fields=fields_from_json(r["fields"]),
        most_cited_paper_id=r["most_cited_paper_id"],
        s2_reported=ReportedFiguresRow(
            h_index=r["s2_h_index"],
            i10_index=None,  # Semantic Scholar does not report one
            citation_count=r["s2_citation_count"],
            works_count=r["s2_paper_count"],
            as_of=r["s2_updated_at"],
        ),
        openalex_reported=ReportedFiguresRow(
            h_index=r["openalex_h_index"],
            i10_index=r["openalex_i10_index"],
            citation_count=r["openalex_cited_by_count"],
            works_count=r["openalex_works_count"],
            as_of=r["openalex_updated_at"],
        ),
        computed_at=r["computed_at"],
    )


async def fetch_researcher_coauthors(
    conn: ConnOrPool, *, researcher_id: int, limit: int = MAX_COAUTHORS
) -> list[CoauthorRow]:
    """Researchers sharing papers with this one, most shared first (ties: most recent, then id)."""
    rows = await conn.fetch(SELECT_RESEARCHER_COAUTHORS, researcher_id, limit)
    return [CoauthorRow(r["researcher_id"], r["shared_papers"], r["first_year"], r["last_year"]) for r in rows]


async def fetch_researcher_network(
    conn: ConnOrPool, *, researcher_id: int, depth: int, min_shared: int, limit: int
) -> NetworkRow | None:
    """The co-author graph around a researcher; None when there is no such researcher."""
    r = await conn.fetchrow(SELECT_RESEARCHER_NETWORK, researcher_id, min_shared, depth, limit)
    if r is None:
        return None
    return NetworkRow(
        nodes=[NetworkNodeRow(int(i), int(d), int(w)) for i, d, w in _json(r["nodes"])],
        edges=[NetworkEdgeRow(int(s), int(t), int(n)) for s, t, n in _json(r["edges"])],
    )


async def fetch_institution_stats(
    conn: ConnOrPool, *, institution_id: int, top: int = MAX_TOP_RESEARCHERS
) -> InstitutionStatsRow | None:
    """Papers, researchers, fields and top researchers (by career h-index) of an institution."""
    return institution_stats_row(await conn.fetchrow(SELECT_INSTITUTION_STATS, institution_id, top))


def institution_stats_row(r: Any) -> InstitutionStatsRow | None:
    """An institution's stats from a row of SELECT_INSTITUTION_STATS's columns (stored or live)."""
    if r is None:
        return None
    return InstitutionStatsRow(
        institution_id=r["id"],
        paper_count=r["paper_count"],
        researcher_count=r["researcher_count"],
        fields=fields_from_json(r["fields"]),
        top_researcher_ids=list(r["top_researcher_ids"]),
    )
