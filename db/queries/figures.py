"""Stored per-researcher and per-institution figures, and the career-works definitions behind them.

A researcher's whole career is their archive papers plus their external works (`researcher_works`),
each work counted once: an external work whose arXiv id or DOI is one of their archive papers is that
paper, and two sources listing the same work (same arXiv id or DOI) list it once. A work's citations
are the archive paper's count when it has one, else the largest count a source gives. Over those
works: the h-index is the largest h such that h works have at least h citations each; i10 counts works
with at least 10; the citation count sums them; the works count counts them. A work without any count
counts as a work with 0 citations.

The SQL fragments below define them once: the refresh stores them in the write's transaction (the career
figures on `researchers` for lists, every scope's in `researcher_scope_figures` for the researcher page), and
`SELECT_CAREER_FIGURES` computes them afresh. Migration 0017's backfill holds these definitions as they stood when it
was written: a migration is never edited once applied (db/migrate.py checks), so it is a record, not a second source.
tests/integration/test_scope_figures.py holds its backfill to today's definitions on the data it was written for. A
change of definition that must reach stored figures refreshes them through `refresh_researcher_figures(conn, None)`,
not through a copy in a new migration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from db.connection import Conn
from db.queries.institution_figures import refresh_stored_counts
from db.records import Touched

# Every researcher in scope; a statement defines `ids(id)` first, then appends these CTEs:
#   arch(rid, paper_id, arxiv_id, doi, c, withdrawn)  the researcher's archive papers, once each
#   ext(rid, source, external_id, k, c)          their external works with the key that identifies the work
#   career_works(rid, k, in_archive, c)         the whole career, each work once, with its citations
ARCH_CTE = """
arch AS (
    SELECT DISTINCT a.researcher_id AS rid, p.id AS paper_id, p.arxiv_id, lower(p.doi) AS doi, p.cited_by_count AS c,
           p.withdrawn
    FROM ids JOIN authorships a ON a.researcher_id = ids.id JOIN papers p ON p.id = a.paper_id
)"""
# The same career works over an `arch` a statement defines itself (from rows it also reads for other figures).
CAREER_WORKS_FROM_ARCH_CTES = """
ext_raw AS (
    SELECT w.researcher_id AS rid, w.source, w.external_id, w.arxiv_id, lower(w.doi) AS doi, w.citation_count AS c
    FROM ids JOIN researcher_works w ON w.researcher_id = ids.id
    -- A source listing a paper a correction took off the researcher (NOT_ME, a split) lists it wrongly too.
    WHERE NOT EXISTS (SELECT 1 FROM authorship_pins x JOIN papers xp ON xp.id = x.paper_id
                      WHERE x.researcher_id = w.researcher_id AND NOT x.mine
                        AND (xp.arxiv_id = w.arxiv_id OR lower(xp.doi) = lower(w.doi)))
),
-- What a DOI is on arXiv, learnt from the archive and from works that carry both identifiers.
doi_arxiv AS (
    SELECT rid, doi, min(arxiv_id) AS arxiv_id
    FROM (SELECT rid, doi, arxiv_id FROM arch WHERE doi IS NOT NULL
          UNION ALL
          SELECT rid, doi, arxiv_id FROM ext_raw WHERE doi IS NOT NULL AND arxiv_id IS NOT NULL) known
    GROUP BY rid, doi
),
ext AS (
    SELECT e.rid, e.source, e.external_id, e.c,
           coalesce('a:' || e.arxiv_id, 'a:' || d.arxiv_id, 'd:' || e.doi,
                    'x:' || e.source || ':' || e.external_id) AS k
    FROM ext_raw e LEFT JOIN doi_arxiv d ON d.rid = e.rid AND d.doi = e.doi
),
career_works AS (
    SELECT rid, k, bool_or(in_archive) AS in_archive, coalesce(max(archive_c), max(ext_c)) AS c
    FROM (SELECT rid, 'a:' || arxiv_id AS k, true AS in_archive, c AS archive_c, NULL::integer AS ext_c FROM arch
          UNION ALL
          SELECT rid, k, false, NULL, c FROM ext) keyed
    GROUP BY rid, k
)
"""
CAREER_WORKS_CTES = f"{ARCH_CTE},{CAREER_WORKS_FROM_ARCH_CTES}"

# After CAREER_WORKS_CTES: `figures` per (scope, researcher), for the scopes career, archive (papers here, with
# the archive's own counts only), and each source's list on its own (each work once within the source).
# The works are counted per citation count first (`tally`), so only a scope's distinct counts are sorted, not its
# works: with `at_least` the works cited at least as often as a count v, the h-index is the largest
# least(v, at_least) (h works with at least h citations each, and no h + 1). A work without a count counts as 0.
SCOPED_FIGURES_CTES = """scoped AS (
    SELECT 'career' AS scope, rid, c FROM career_works
    UNION ALL
    SELECT 'archive', rid, c FROM (SELECT DISTINCT rid, paper_id, c FROM arch WHERE NOT withdrawn) a
    UNION ALL
    SELECT source, rid, max(c) FROM ext GROUP BY source, rid, k
),
tally AS (SELECT scope, rid, c, count(*) AS n FROM scoped GROUP BY scope, rid, c),
cumulative AS (
    SELECT scope, rid, c, n, sum(n) OVER (PARTITION BY scope, rid ORDER BY coalesce(c, 0) DESC) AS at_least
    FROM tally
),
figures AS (
    SELECT scope, rid,
           sum(n)::integer AS works_count,
           coalesce(sum(c * n), 0)::bigint AS citation_count,
           coalesce(sum(n) FILTER (WHERE c >= 10), 0)::integer AS i10_index,
           max(least(coalesce(c, 0), at_least))::integer AS h_index,
           coalesce(sum(n) FILTER (WHERE c IS NOT NULL), 0)::integer AS with_counts
    FROM cumulative GROUP BY scope, rid
)"""

# The stored figures of researchers in `ids`, from the definitions above: the career figures researchers keeps for
# lists to sort and filter on, and every scope's figures (researcher_scope_figures, migration 0017) the researcher
# page reads. One statement computes both, so every write that refreshes the one refreshes the other.
REFRESH_RESEARCHER_FIGURES = f"""
WITH {{ids}},
{CAREER_WORKS_CTES},
{SCOPED_FIGURES_CTES},
-- Papers in this archive as the researcher's papers list counts them: withdrawn ones left out.
papers_per AS (
    SELECT rid, (count(DISTINCT paper_id) FILTER (WHERE NOT withdrawn))::integer AS n FROM arch GROUP BY rid
),
-- One row per researcher, gathered by grouping rather than joined: the planner cannot count a CTE's rows by
-- scope, and a nested loop over `figures` grows with the square of the researchers refreshed.
fresh AS (
    SELECT id, max(paper_count) AS paper_count, max(h_index) AS h_index, max(i10_index) AS i10_index,
           least(max(citation_count), 2147483647)::integer AS citation_count, max(works_count) AS works_count
    FROM (SELECT id, 0 AS paper_count, 0 AS h_index, 0 AS i10_index, 0::bigint AS citation_count, 0 AS works_count
          FROM ids
          UNION ALL
          SELECT rid, n, 0, 0, 0, 0 FROM papers_per
          UNION ALL
          SELECT rid, 0, h_index, i10_index, citation_count, works_count FROM figures WHERE scope = 'career') k
    GROUP BY id
),
updated AS (
    UPDATE researchers r
    SET paper_count = fresh.paper_count, h_index = fresh.h_index, i10_index = fresh.i10_index,
        citation_count = fresh.citation_count, works_count = fresh.works_count, modified_at = now()
    FROM fresh
    WHERE r.id = fresh.id
      AND (r.paper_count, r.h_index, r.i10_index, r.citation_count, r.works_count)
          IS DISTINCT FROM (fresh.paper_count, fresh.h_index, fresh.i10_index, fresh.citation_count, fresh.works_count)
    RETURNING r.id
),
-- Only rows that differ are written (an upsert would lock, and so write, every row it finds unchanged). A
-- researcher absorbed by a merge earlier in the transaction is gone: nothing is stored for it.
stored AS (
    INSERT INTO researcher_scope_figures AS s (researcher_id, scope, works_count, citation_count, i10_index, h_index,
                                             with_counts)
    SELECT f.rid, f.scope, f.works_count, f.citation_count, f.i10_index, f.h_index, f.with_counts
    FROM figures f
    JOIN researchers r ON r.id = f.rid
    LEFT JOIN researcher_scope_figures o ON o.researcher_id = f.rid AND o.scope = f.scope
    WHERE (o.works_count, o.citation_count, o.i10_index, o.h_index, o.with_counts)
          IS DISTINCT FROM (f.works_count, f.citation_count, f.i10_index, f.h_index, f.with_counts)
    ORDER BY f.rid, f.scope
    ON CONFLICT (researcher_id, scope) DO UPDATE
    SET works_count = excluded.works_count, citation_count = excluded.citation_count, i10_index = excluded.i10_index,
        h_index = excluded.h_index, with_counts = excluded.with_counts
    WHERE (s.works_count, s.citation_count, s.i10_index, s.h_index, s.with_counts)
          IS DISTINCT FROM (excluded.works_count, excluded.citation_count, excluded.i10_index, excluded.h_index,
                            excluded.with_counts)
    RETURNING s.researcher_id
),
-- A scope left without works has no row. The stored rows are found by researcher (the primary key) first.
emptied AS (
    DELETE FROM researcher_scope_figures s
    WHERE (s.researcher_id, s.scope) IN (SELECT o.researcher_id, o.scope
                                         FROM ids JOIN researcher_scope_figures o ON o.researcher_id = ids.id
                                         EXCEPT
                                         SELECT rid, scope FROM figures)
    RETURNING s.researcher_id
)
SELECT id FROM updated UNION SELECT researcher_id FROM stored UNION SELECT researcher_id FROM emptied
"""
_SOME_RESEARCHERS = "ids AS (SELECT DISTINCT unnest($1::bigint[]) AS id)"
_ALL_RESEARCHERS = "ids AS (SELECT id FROM researchers)"

# One researcher's figures in every scope.
SELECT_CAREER_FIGURES = f"""
WITH ids AS (SELECT $1::bigint AS id),
{CAREER_WORKS_CTES},
{SCOPED_FIGURES_CTES}
SELECT s.scope, coalesce(f.works_count, 0) AS works_count, coalesce(f.citation_count, 0) AS citation_count,
       coalesce(f.i10_index, 0) AS i10_index, coalesce(f.h_index, 0) AS h_index,
       coalesce(f.with_counts, 0) AS with_counts
FROM unnest(ARRAY['career', 'archive', 's2', 'openalex']) AS s(scope) LEFT JOIN figures f USING (scope)
"""

# The write path keeps papers' author and match counts as it goes; this recomputes them from the
# authorships (None: every paper), e.g. after a repair by hand.
REFRESH_PAPER_COUNTS = """
WITH {ids},
fresh AS (
    SELECT ids.id, count(a.position)::integer AS author_count, count(a.researcher_id)::integer AS matched_count
    FROM ids LEFT JOIN authorships a ON a.paper_id = ids.id GROUP BY ids.id
)
UPDATE papers p SET author_count = fresh.author_count, matched_count = fresh.matched_count, modified_at = now()
FROM fresh
WHERE p.id = fresh.id AND (p.author_count, p.matched_count) IS DISTINCT FROM (fresh.author_count, fresh.matched_count)
RETURNING p.id
"""
_SOME_PAPERS = "ids AS (SELECT DISTINCT unnest($1::bigint[]) AS id)"
_ALL_PAPERS = "ids AS (SELECT id FROM papers)"


@dataclass(frozen=True, slots=True)
class Figures:
    works_count: int
    citation_count: int
    i10_index: int
    h_index: int
    with_counts: int  # works that have a citation count at all


@dataclass(frozen=True, slots=True)
class CareerFigures:
    """A researcher's figures by scope, all computed by the same definitions."""

    career: Figures  # archive papers + external works, each work once
    archive: Figures  # archive papers only, with the archive's own citation counts (hIndexInArchive)
    s2: Figures  # the Semantic Scholar works list alone
    openalex: Figures  # the OpenAlex works list alone


async def refresh_researcher_figures(conn: Conn, researcher_ids: Sequence[int] | None) -> set[int]:
    """Recompute researchers' stored figures (None: all of them); return the ids whose figures changed."""
    if researcher_ids is None:
        rows = await conn.fetch(REFRESH_RESEARCHER_FIGURES.format(ids=_ALL_RESEARCHERS))
    elif not researcher_ids:
        return set()
    else:
        rows = await conn.fetch(REFRESH_RESEARCHER_FIGURES.format(ids=_SOME_RESEARCHERS), list(researcher_ids))
    return {r["id"] for r in rows}


async def refresh_institution_figures(conn: Conn, institution_ids: Sequence[int] | None) -> set[int]:
    """Bring institutions' stored paper and researcher counts up to the write (None: all of them); return the ids
    that changed. The figures are kept incrementally (migration 0027): this folds the transaction's changes and
    copies the counts, whatever the institutions' sizes."""
    return await refresh_stored_counts(conn, institution_ids)


async def refresh_paper_counts(conn: asyncpg.Connection, paper_ids: Sequence[int] | None) -> set[int]:
    """Recompute papers' author_count and matched_count (None: all of them); return the ids that changed."""
    if paper_ids is None:
        rows = await conn.fetch(REFRESH_PAPER_COUNTS.format(ids=_ALL_PAPERS))
    elif not paper_ids:
        return set()
    else:
        rows = await conn.fetch(REFRESH_PAPER_COUNTS.format(ids=_SOME_PAPERS), list(paper_ids))
    return {r["id"] for r in rows}


# What a write touched is what its pages show differently: its modification time (the site's Last-Modified, the
# changes feed) moves to the write's, where the write's own updates have not already moved it.
MARK_MODIFIED = {
    "papers": "UPDATE papers SET modified_at = now() WHERE id = any($1::bigint[]) AND modified_at < now()",
    "researchers": "UPDATE researchers SET modified_at = now() WHERE id = any($1::bigint[]) AND modified_at < now()",
    "institutions": "UPDATE institutions SET modified_at = now() WHERE id = any($1::bigint[]) AND modified_at < now()",
}


async def refresh_figures(conn: Conn, touched: Touched) -> None:
    """After a write, in the same transaction: refresh the figures of everything it touched, and stamp it
    modified."""
    researchers, institutions = touched.all_researchers(), touched.all_institutions()
    await refresh_researcher_figures(conn, sorted(researchers))
    await refresh_institution_figures(conn, sorted(institutions))
    for table, ids in (("papers", touched.papers), ("researchers", researchers), ("institutions", institutions)):
        if ids:
            await conn.execute(MARK_MODIFIED[table], sorted(ids))


async def fetch_career_figures(conn: asyncpg.Connection, researcher_id: int) -> CareerFigures:
    """One researcher's figures: whole career, archive only, and per source, in one statement."""
    rows = await conn.fetch(SELECT_CAREER_FIGURES, researcher_id)
    by_scope = {
        r["scope"]: Figures(
            works_count=r["works_count"],
            citation_count=int(r["citation_count"]),
            i10_index=r["i10_index"],
            h_index=r["h_index"],
            with_counts=r["with_counts"],
        )
        for r in rows
    }
    return CareerFigures(
        career=by_scope["career"], archive=by_scope["archive"], s2=by_scope["s2"], openalex=by_scope["openalex"]
    )
