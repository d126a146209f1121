"""Papers with their versions and authorships; an author list that changed keeps its matches by name."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from db.queries.paper_people import UPDATE_MATCHED_COUNTS, add_people_of_papers
from db.queries.writes.staging import ids_of, stage
from db.records import PaperRecord, Touched
from db.slugs import paper_slug


@dataclass(slots=True)
class PaperWriteResult:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    ids: dict[str, int] = field(default_factory=dict)  # arxiv_id -> papers.id, for every paper written
    touched: Touched = field(default_factory=Touched)


STG_PAPERS = """
    arxiv_id text, version integer, slug text, title text, abstract text, authors_text text, categories text[],
    primary_category text, published timestamptz, updated timestamptz, doi text, journal_ref text, comments text,
    license text, withdrawn boolean, author_count integer
"""
STG_PAPER_COLUMNS = (
    "arxiv_id",
    "version",
    "slug",
    "title",
    "abstract",
    "authors_text",
    "categories",
    "primary_category",
    "published",
    "updated",
    "doi",
    "journal_ref",
    "comments",
    "license",
    "withdrawn",
    "author_count",
)
_PAPER_VALUE_COLUMNS = STG_PAPER_COLUMNS[1:]

# The columns of a paper its researchers' and institutions' figures and aggregates count (db/queries/figures.py,
# db/queries/aggregates.py, institution_figures.py): a re-harvest that changes none of them (a title, an abstract, a
# new version) is a change of the paper alone. Re-harvested revisions of popular papers otherwise refreshed and
# dropped thousands of careers a page. The harvest writes these columns (a repair's recount aside), one page at a
# time for a paper, so the values before the upsert are the snapshot's.
_COUNTED_COLUMNS = ("categories", "primary_category", "published", "author_count", "doi", "withdrawn")

# A record older than the stored version never overwrites it; enrichment and analysis columns are
# not in the SET list at all, so a re-harvest cannot erase them. `counted`: a stored paper changed a counted column.
UPSERT_PAPERS_FROM_STAGING = f"""
WITH before AS (
    SELECT p.id, {", ".join(f"p.{c}" for c in _COUNTED_COLUMNS)} FROM papers p JOIN stg_papers s USING (arxiv_id)
), up AS (
    INSERT INTO papers AS t ({", ".join(STG_PAPER_COLUMNS)})
    SELECT {", ".join(STG_PAPER_COLUMNS)} FROM stg_papers
    ON CONFLICT (arxiv_id) DO UPDATE SET
        {", ".join(f"{c} = excluded.{c}" for c in _PAPER_VALUE_COLUMNS)},
        modified_at = now()
    WHERE excluded.version >= t.version
      AND ({", ".join(f"t.{c}" for c in _PAPER_VALUE_COLUMNS)})
          IS DISTINCT FROM ({", ".join(f"excluded.{c}" for c in _PAPER_VALUE_COLUMNS)})
    RETURNING t.id, t.arxiv_id, (t.xmax = 0) AS inserted, {", ".join(f"t.{c}" for c in _COUNTED_COLUMNS)}
)
SELECT up.id, up.arxiv_id, up.inserted,
       b.id IS NOT NULL AND ({", ".join(f"b.{c}" for c in _COUNTED_COLUMNS)})
                            IS DISTINCT FROM ({", ".join(f"up.{c}" for c in _COUNTED_COLUMNS)}) AS counted
FROM up LEFT JOIN before b ON b.id = up.id
"""

# The papers the upsert left alone (unchanged or stale) return nothing: their ids and stored versions.
SELECT_UNWRITTEN_PAPERS = """
SELECT p.id, p.arxiv_id, p.version FROM papers p WHERE p.arxiv_id = any($1::text[])
"""

STG_VERSIONS = "paper_id bigint, version integer, submitted_at timestamptz, size_kb integer, source_type text"
UPSERT_PAPER_VERSIONS_FROM_STAGING = """
INSERT INTO paper_versions AS t (paper_id, version, submitted_at, size_kb, source_type)
SELECT s.paper_id, s.version, s.submitted_at, s.size_kb, s.source_type
FROM stg_versions s
ON CONFLICT (paper_id, version) DO UPDATE SET
    submitted_at = excluded.submitted_at,
    size_kb = coalesce(excluded.size_kb, t.size_kb),
    source_type = coalesce(excluded.source_type, t.source_type)
WHERE (t.submitted_at, t.size_kb, t.source_type)
      IS DISTINCT FROM (excluded.submitted_at, coalesce(excluded.size_kb, t.size_kb),
                        coalesce(excluded.source_type, t.source_type))
RETURNING t.paper_id
"""

STG_AUTHORS = "paper_id bigint, position integer, name text, affiliation text, is_collaboration boolean"
STG_CHANGED = "paper_id bigint PRIMARY KEY"
STG_OLD_AUTHORS = "paper_id bigint, position integer, name text, researcher_id bigint, link_evidence text"
STG_OLD_AFFILIATIONS = "paper_id bigint, position integer, institution_id bigint"
STG_CARRY = "paper_id bigint, position integer, old_position integer, researcher_id bigint, link_evidence text"

# Papers whose author names by position differ from what is stored (or that have none stored yet).
INSERT_CHANGED_AUTHOR_LISTS = """
INSERT INTO stg_changed (paper_id)
WITH s AS (SELECT paper_id, array_agg(name ORDER BY position) AS names FROM stg_authors GROUP BY paper_id),
     e AS (SELECT a.paper_id, array_agg(a.name ORDER BY a.position) AS names
           FROM authorships a WHERE a.paper_id = any($1::bigint[]) GROUP BY a.paper_id)
SELECT b.id FROM unnest($1::bigint[]) AS b(id)
LEFT JOIN s ON s.paper_id = b.id
LEFT JOIN e ON e.paper_id = b.id
WHERE s.names IS DISTINCT FROM e.names
"""
SAVE_OLD_AUTHORS = """
INSERT INTO stg_old_authors (paper_id, position, name, researcher_id, link_evidence)
SELECT a.paper_id, a.position, a.name, a.researcher_id, a.link_evidence
FROM authorships a JOIN stg_changed c USING (paper_id)
"""
SAVE_OLD_AFFILIATIONS = """
INSERT INTO stg_old_affiliations (paper_id, position, institution_id)
SELECT ai.paper_id, ai.position, ai.institution_id FROM authorship_institutions ai JOIN stg_changed c USING (paper_id)
"""
DELETE_CHANGED_AUTHORSHIPS = "DELETE FROM authorships a USING stg_changed c WHERE a.paper_id = c.paper_id"
# A name that occurs once in the old list and once in the new one (compared folded, so `Muller`
# and `Müller` agree) is the same person: it keeps its researcher and institutions wherever it moved.
INSERT_CARRY = """
INSERT INTO stg_carry (paper_id, position, old_position, researcher_id, link_evidence)
SELECT n.paper_id, n.position, o.position, o.researcher_id, o.link_evidence
FROM (SELECT s.paper_id, s.position, s.is_collaboration, wp_fold(s.name) AS folded,
             count(*) OVER (PARTITION BY s.paper_id, wp_fold(s.name)) AS c
      FROM stg_authors s JOIN stg_changed USING (paper_id)) n
JOIN (SELECT o.paper_id, o.position, o.researcher_id, o.link_evidence, wp_fold(o.name) AS folded,
             count(*) OVER (PARTITION BY o.paper_id, wp_fold(o.name)) AS c
      FROM stg_old_authors o) o
  ON o.paper_id = n.paper_id AND o.folded = n.folded AND o.c = 1
WHERE n.c = 1
"""
INSERT_CHANGED_AUTHORSHIPS = """
INSERT INTO authorships (paper_id, position, name, researcher_id, link_evidence, affiliation, is_collaboration)
SELECT s.paper_id, s.position, s.name, CASE WHEN s.is_collaboration THEN NULL ELSE k.researcher_id END,
       CASE WHEN s.is_collaboration OR k.researcher_id IS NULL THEN NULL ELSE k.link_evidence END,
       s.affiliation, s.is_collaboration
FROM stg_authors s JOIN stg_changed USING (paper_id)
LEFT JOIN stg_carry k ON k.paper_id = s.paper_id AND k.position = s.position
"""
INSERT_CARRIED_AFFILIATIONS = """
INSERT INTO authorship_institutions (paper_id, position, institution_id)
SELECT k.paper_id, k.position, o.institution_id
FROM stg_carry k JOIN stg_old_affiliations o ON o.paper_id = k.paper_id AND o.position = k.old_position
ON CONFLICT DO NOTHING
"""
# A researcher a correction put on a paper whose author list changed stays on it: found again by the name the
# correction was made for (folded) when the carry-over above could not place them; when that name is not on the list
# once, the correction counts a conflict (`wovepaper ingest status`).
RELINK_PINNED = """
WITH lost AS (
    SELECT x.paper_id, x.researcher_id, x.author_name, x.correction_id
    FROM authorship_pins x JOIN stg_changed c ON c.paper_id = x.paper_id
    WHERE x.mine
      AND NOT EXISTS (SELECT 1 FROM authorships a WHERE a.paper_id = x.paper_id AND a.researcher_id = x.researcher_id)
), spot AS (
    SELECT l.paper_id, l.researcher_id, min(a.position) AS position
    FROM lost l
    JOIN authorships a ON a.paper_id = l.paper_id AND NOT a.is_collaboration
                      AND wp_fold(a.name) = wp_fold(l.author_name)
    GROUP BY l.paper_id, l.researcher_id
    HAVING count(*) = 1
), unplaced AS (
    UPDATE corrections c SET conflicts = c.conflicts + 1, last_conflict_at = now()
    FROM lost l
    WHERE c.id = l.correction_id
      AND NOT EXISTS (SELECT 1 FROM spot s WHERE s.paper_id = l.paper_id AND s.researcher_id = l.researcher_id)
)
UPDATE authorships a SET researcher_id = s.researcher_id
FROM spot s
WHERE a.paper_id = s.paper_id AND a.position = s.position
RETURNING a.researcher_id
"""
# Same names in the same places: keep every match, refresh what arXiv says about each authorship. `unlinked`: the
# authorship lost its researcher (it is now a collaboration's); an affiliation's text alone changes no figure.
UPDATE_KEPT_AUTHORSHIPS = """
WITH old AS (
    SELECT a.paper_id, a.position, a.researcher_id, s.is_collaboration AND a.researcher_id IS NOT NULL AS unlinked
    FROM authorships a JOIN stg_authors s ON s.paper_id = a.paper_id AND s.position = a.position
    WHERE NOT EXISTS (SELECT 1 FROM stg_changed c WHERE c.paper_id = s.paper_id)
      AND (a.affiliation, a.is_collaboration) IS DISTINCT FROM (s.affiliation, s.is_collaboration)
    FOR UPDATE OF a
), upd AS (
    UPDATE authorships a
    SET affiliation = s.affiliation, is_collaboration = s.is_collaboration,
        researcher_id = CASE WHEN s.is_collaboration THEN NULL ELSE a.researcher_id END,
        link_evidence = CASE WHEN s.is_collaboration THEN NULL ELSE a.link_evidence END
    FROM old JOIN stg_authors s ON s.paper_id = old.paper_id AND s.position = old.position
    WHERE a.paper_id = old.paper_id AND a.position = old.position
)
SELECT paper_id, researcher_id, unlinked FROM old
"""
SELECT_OLD_PEOPLE = """
SELECT 'r' AS kind, researcher_id AS id FROM stg_old_authors WHERE researcher_id IS NOT NULL
UNION
SELECT 'i', institution_id FROM stg_old_affiliations
"""


def _paper_row(p: PaperRecord) -> tuple[Any, ...]:
    return (
        p.arxiv_id,
        p.version,
        paper_slug(p.arxiv_id, p.title),
        p.title,
        p.abstract,
        p.authors_text,
        list(p.categories),
        p.primary_category,
        p.published,
        p.updated,
        p.doi,
        p.journal_ref,
        p.comments,
        p.license,
        p.withdrawn,
        len(p.authors),
    )


async def upsert_papers(
    conn: asyncpg.Connection, papers: Sequence[PaperRecord], *, touched: Touched | None = None
) -> PaperWriteResult:
    """Insert or update papers with their versions and authorships.

    When a paper's author names by position are unchanged, its authorships keep their researcher
    and institution links; when they changed, the list is replaced and each author whose name
    occurs once before and after keeps their links. Collaborations never get a researcher.
    A record with a lower version than the stored one does not overwrite it.
    """
    result = PaperWriteResult()
    latest: dict[str, PaperRecord] = {}
    for p in papers:
        if not p.categories:
            raise ValueError(f"paper {p.arxiv_id} has no category")
        latest[p.arxiv_id] = p  # the last record of a paper wins within a batch
    if not latest:
        return result
    recs = list(latest.values())

    await stage(conn, "stg_papers", STG_PAPERS, STG_PAPER_COLUMNS, [_paper_row(p) for p in recs], analyze=False)
    rows = await conn.fetch(UPSERT_PAPERS_FROM_STAGING)
    result.ids = {r["arxiv_id"]: r["id"] for r in rows}
    new = {r["id"] for r in rows if r["inserted"]}
    counted = {r["id"] for r in rows if r["counted"]}
    result.inserted = len(new)
    result.updated = len(rows) - result.inserted
    result.unchanged = len(recs) - len(rows)
    written = {r["id"] for r in rows}
    # A stale record (lower version than the stored one) writes nothing below: its authors are older.
    stale: set[str] = set()
    if result.unchanged:
        unwritten = [p.arxiv_id for p in recs if p.arxiv_id not in result.ids]
        for r in await conn.fetch(SELECT_UNWRITTEN_PAPERS, unwritten):
            result.ids[r["arxiv_id"]] = r["id"]
            if latest[r["arxiv_id"]].version < r["version"]:
                stale.add(r["arxiv_id"])
    fresh = [p for p in recs if p.arxiv_id in result.ids and p.arxiv_id not in stale]

    # Rows of papers new to the archive cannot conflict with anything: they are COPYed straight into their
    # tables. Those of stored papers go through staging, to be compared with what is there.
    new_versions: list[tuple[Any, ...]] = []
    stored_versions: list[tuple[Any, ...]] = []
    new_authors: list[tuple[Any, ...]] = []
    stored_authors: list[tuple[Any, ...]] = []
    stored: list[int] = []
    for p in fresh:
        paper_id = result.ids[p.arxiv_id]
        is_new = paper_id in new
        if not is_new:
            stored.append(paper_id)
        # A version listed twice in one record is written once.
        for v in {v.version: v for v in p.versions}.values():
            (new_versions if is_new else stored_versions).append(
                (paper_id, v.version, v.submitted_at, v.size_kb, v.source_type)
            )
        authors = new_authors if is_new else stored_authors
        for a in p.authors:
            authors.append((paper_id, a.position, a.name, a.affiliation, a.is_collaboration))
    if new_versions:
        await conn.copy_records_to_table("paper_versions", records=new_versions, columns=VERSION_COLUMNS)
    if new_authors:
        await conn.copy_records_to_table("authorships", records=new_authors, columns=AUTHORSHIP_COLUMNS)
    if stored_versions:
        await stage(conn, "stg_versions", STG_VERSIONS, VERSION_COLUMNS, stored_versions, analyze=False)
        written |= ids_of(await conn.fetch(UPSERT_PAPER_VERSIONS_FROM_STAGING), "paper_id")
    touched_here = Touched()
    relinked: set[int] = set()
    refreshed: set[int] = set()
    if stored:
        # Joins against the stored authorships need the staged rows' statistics.
        await stage(conn, "stg_authors", STG_AUTHORS, AUTHORSHIP_COLUMNS, stored_authors)
        relinked, refreshed = await _relink_stored_authorships(conn, sorted(stored), touched_here)
        if relinked:
            await conn.execute(UPDATE_MATCHED_COUNTS, sorted(relinked))

    touched_here.papers = written | relinked | refreshed
    touched_here.paper_keys = {aid for aid, pid in result.ids.items() if pid in touched_here.papers}
    touched_here.new_papers = {p.arxiv_id for p in fresh if result.ids[p.arxiv_id] in new}
    # A paper new to the archive has no researcher or institution linked yet. A stored one touches its people when
    # it changed what they count or who they are; its text or versions alone change the paper, whose own tag
    # drops every answer that shows it (a researcher's page listing it too).
    await add_people_of_papers(conn, counted | relinked, touched_here)
    result.touched = touched_here
    if touched is not None:
        touched.update(touched_here)
    return result


async def _relink_stored_authorships(
    conn: asyncpg.Connection, paper_ids: list[int], touched: Touched
) -> tuple[set[int], set[int]]:
    """Papers already stored: replace the author lists that changed, carrying matches over by name, and
    refresh the rest in place. Returns the papers whose links may have changed (adding the people they had) and
    those whose authorships changed only as the page shows them (an affiliation's text: no figure moves, and
    refreshing the figures of a well-cited paper's prolific authors for it cost a harvest page of 2,500 revisions
    19-144 s of PostgreSQL beside the site, 7-18 s without; bench/RESULTS.md, round 28)."""
    await stage(conn, "stg_changed", STG_CHANGED, ("paper_id",), [])
    await stage(conn, "stg_old_authors", STG_OLD_AUTHORS, (), [])
    await stage(conn, "stg_old_affiliations", STG_OLD_AFFILIATIONS, (), [])
    await stage(conn, "stg_carry", STG_CARRY, (), [])
    await conn.execute(INSERT_CHANGED_AUTHOR_LISTS, paper_ids)
    changed = ids_of(await conn.fetch("SELECT paper_id FROM stg_changed"), "paper_id")
    if changed:
        await conn.execute(SAVE_OLD_AUTHORS)
        await conn.execute(SAVE_OLD_AFFILIATIONS)
        await conn.execute(DELETE_CHANGED_AUTHORSHIPS)
        await conn.execute(INSERT_CARRY)
        await conn.execute(INSERT_CHANGED_AUTHORSHIPS)
        await conn.execute(INSERT_CARRIED_AFFILIATIONS)
        # Which papers are whose changes, not what names anyone (db/records.py Touched).
        touched.researcher_figures |= ids_of(await conn.fetch(RELINK_PINNED), "researcher_id")
        for r in await conn.fetch(SELECT_OLD_PEOPLE):
            (touched.researcher_figures if r["kind"] == "r" else touched.institution_figures).add(r["id"])
    kept = await conn.fetch(UPDATE_KEPT_AUTHORSHIPS)
    unlinked = [r for r in kept if r["unlinked"]]
    touched.researcher_figures |= ids_of(unlinked, "researcher_id")
    return changed | ids_of(unlinked, "paper_id"), ids_of(kept, "paper_id")


# Columns of paper_versions and authorships as the harvest writes them, directly or through staging.
VERSION_COLUMNS = ("paper_id", "version", "submitted_at", "size_kb", "source_type")
AUTHORSHIP_COLUMNS = ("paper_id", "position", "name", "affiliation", "is_collaboration")


async def count_papers(conn: asyncpg.Connection) -> int:
    """How many papers the database holds (`wovepaper demo --if-empty` loads only into an empty one)."""
    return int(await conn.fetchval("SELECT count(*) FROM papers"))
