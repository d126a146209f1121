"""Institutions' stored figures (migration 0027): their definitions computed live, the fold, and the rebuild.

Every write keeps an institution's papers, fields and members through triggers that note each statement's changes;
the changes are folded into the stored figures when the transaction commits, or earlier through `fold` (the write
path's refresh does, once the rows it shares with other writers may be taken). `LIVE_INSTITUTION_STATS` is what
the stored figures must always equal: the statement the institution page ran on every cache miss before them, kept
for checks (tests, `check_institution_figures`) and as the definition `wp_rebuild_institution_figures` follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from db.connection import Conn
from db.queries.aggregates import FIELDS_OF, InstitutionStatsRow, fetch_institution_stats, institution_stats_row

# paper_count = distinct non-withdrawn papers with an affiliation to the institution; researcher_count = its
# researcher_institutions rows and the researchers linked at its affiliated authorship positions, each once;
# fields as FIELDS_OF counts them; top researchers by stored h_index, citation_count, then id.
LIVE_INSTITUTION_STATS = f"""
WITH inst_papers AS MATERIALIZED (
    SELECT p.categories, p.primary_category
      FROM papers p
     WHERE p.id = ANY (ARRAY(SELECT ai.paper_id FROM authorship_institutions ai WHERE ai.institution_id = $1))
       AND NOT p.withdrawn
),
inst_researchers AS MATERIALIZED (
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
       (SELECT {FIELDS_OF.format(papers="inst_papers")}) AS fields,
       (SELECT coalesce(array_agg(t.id ORDER BY t.h_index DESC, t.citation_count DESC, t.id), '{{}}')
          FROM (SELECT r.id, r.h_index, r.citation_count
                  FROM researchers r WHERE r.id = ANY (ARRAY(SELECT ir.researcher_id FROM inst_researchers ir))
                 ORDER BY r.h_index DESC, r.citation_count DESC, r.id
                 LIMIT $2) t) AS top_researcher_ids
  FROM institutions i
 WHERE i.id = $1
"""

# The stored institutions.paper_count and researcher_count as they have always been counted (the latter is the
# institution's researcher_institutions rows, not the page's wider researcher count).
LIVE_STORED_COUNTS = """
SELECT i.id,
       (SELECT count(DISTINCT ai.paper_id)
          FROM authorship_institutions ai JOIN papers p ON p.id = ai.paper_id AND NOT p.withdrawn
         WHERE ai.institution_id = i.id)::integer AS paper_count,
       (SELECT count(*) FROM researcher_institutions ri WHERE ri.institution_id = i.id)::integer AS researcher_count
  FROM institutions i
 ORDER BY i.id
"""

# The refcounts the fold keeps, against their definitions: rows that differ (none when all is well).
LIVE_REFCOUNT_DIFFERENCES = """
(SELECT 'paper' AS what, institution_id, paper_id AS key, refs FROM institution_paper_refs
 EXCEPT
 SELECT 'paper', institution_id, paper_id, count(*)::integer FROM authorship_institutions GROUP BY 2, 3)
UNION ALL
(SELECT 'paper', institution_id, paper_id, count(*)::integer FROM authorship_institutions GROUP BY 2, 3
 EXCEPT
 SELECT 'paper', institution_id, paper_id, refs FROM institution_paper_refs)
UNION ALL
(SELECT 'member', institution_id, researcher_id, refs FROM institution_members
 EXCEPT
 SELECT 'member', institution_id, researcher_id, sum(n)::integer
   FROM (SELECT institution_id, researcher_id, 1 AS n FROM researcher_institutions
         UNION ALL
         SELECT ai.institution_id, a.researcher_id, 1
           FROM authorship_institutions ai JOIN authorships a ON a.paper_id = ai.paper_id AND a.position = ai.position
          WHERE a.researcher_id IS NOT NULL) m
  GROUP BY 2, 3)
"""

FOLD = "SELECT wp_fold_institution_figures()"
REBUILD = "SELECT wp_rebuild_institution_figures()"

# Stored institutions' counts from the folded figures: no institution counted again, whatever its size.
COPY_STORED_COUNTS = """
WITH {ids},
fresh AS (
    SELECT ids.id, coalesce(f.paper_count, 0) AS paper_count, coalesce(f.affiliated_count, 0) AS researcher_count
    FROM ids LEFT JOIN institution_figures f ON f.institution_id = ids.id
)
UPDATE institutions i
SET paper_count = fresh.paper_count, researcher_count = fresh.researcher_count, modified_at = now()
FROM fresh
WHERE i.id = fresh.id
  AND (i.paper_count, i.researcher_count) IS DISTINCT FROM (fresh.paper_count, fresh.researcher_count)
RETURNING i.id
"""
_SOME_INSTITUTIONS = "ids AS (SELECT DISTINCT unnest($1::bigint[]) AS id)"
_ALL_INSTITUTIONS = "ids AS (SELECT id FROM institutions)"


async def fold(conn: Conn) -> None:
    """Fold the transaction's noted changes into the stored figures now (rather than at commit)."""
    await conn.execute(FOLD)


async def rebuild(conn: Conn) -> None:
    """Every institution's figures from the live definitions, set-based (after a bulk load, or as a repair)."""
    await conn.execute(REBUILD)


async def refresh_stored_counts(conn: Conn, institution_ids: Sequence[int] | None) -> set[int]:
    """Fold, then copy institutions' paper and researcher counts (None: all of them); return the ids that changed."""
    await fold(conn)
    if institution_ids is None:
        rows = await conn.fetch(COPY_STORED_COUNTS.format(ids=_ALL_INSTITUTIONS))
    elif not institution_ids:
        return set()
    else:
        rows = await conn.fetch(COPY_STORED_COUNTS.format(ids=_SOME_INSTITUTIONS), list(institution_ids))
    return {r["id"] for r in rows}


@dataclass(frozen=True, slots=True)
class FigureMismatch:
    institution_id: int
    stored: object
    live: object


async def fetch_live_institution_stats(
    conn: asyncpg.Connection, *, institution_id: int, top: int
) -> InstitutionStatsRow | None:
    """An institution's stats computed from the base tables (slow on a large institution: for checks)."""
    return institution_stats_row(await conn.fetchrow(LIVE_INSTITUTION_STATS, institution_id, top))


async def check_institution_figures(conn: asyncpg.Connection, *, top: int = 100) -> list[FigureMismatch]:
    """Every institution's stored figures against the live ones; the differences (none when all is well)."""
    mismatches: list[FigureMismatch] = []
    for r in await conn.fetch("SELECT id FROM institutions ORDER BY id"):
        stored = await fetch_institution_stats(conn, institution_id=r["id"], top=top)
        live = await fetch_live_institution_stats(conn, institution_id=r["id"], top=top)
        if stored != live:
            mismatches.append(FigureMismatch(r["id"], stored, live))
    for row in await conn.fetch(LIVE_REFCOUNT_DIFFERENCES):
        mismatches.append(FigureMismatch(row["institution_id"], dict(row), None))
    return mismatches
