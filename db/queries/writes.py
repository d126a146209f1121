"""The one bulk write path: COPY into a temp staging table, then upsert from it.

The ingest and `wovepaper demo` both write through these functions. Each takes a connection that is
already inside the caller's transaction, so a batch commits or rolls back as a whole, and each
reports the ids it touched (`Touched`) so the caller can invalidate the cache once it has committed.
Upserts change a row only when a value differs, so re-running the same input changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from db.ids import normalize_ror
from db.records import (
    AuthorshipMatch,
    CitationRecord,
    InstitutionRecord,
    PaperRecord,
    ResearcherRecord,
    Touched,
    WorkRecord,
)
from db.slugs import paper_slug, slugify

# Staging tables exist for one transaction: ON COMMIT DROP, and truncated when a transaction
# writes twice. Planner statistics matter once a batch is large, hence the ANALYZE.
_ANALYZE_FROM_ROWS = 1000


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


@dataclass(slots=True)
class PaperWriteResult:
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    ids: dict[str, int] = field(default_factory=dict)  # arxiv_id -> papers.id, for every paper written
    touched: Touched = field(default_factory=Touched)


async def _stage(
    conn: asyncpg.Connection,
    table: str,
    ddl: str,
    columns: Sequence[str],
    rows: list[tuple[Any, ...]],
    *,
    analyze: bool = True,
) -> None:
    """Fill a staging table. `analyze=False` where the statements reading it only look rows up by key:
    there the planner's row estimate from the table's size is enough, and ANALYZE costs more than it saves."""
    if not conn.is_in_transaction():
        raise RuntimeError("bulk writes must run inside the caller's transaction")
    await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({ddl}) ON COMMIT DROP")
    await conn.execute(f"TRUNCATE {table}")
    if rows:
        await conn.copy_records_to_table(table, records=rows, columns=list(columns))
        if analyze and len(rows) >= _ANALYZE_FROM_ROWS:
            await conn.execute(f"ANALYZE {table}")


def _ids(rows: Iterable[asyncpg.Record], column: str) -> set[int]:
    return {r[column] for r in rows if r[column] is not None}


# --------------------------------------------------------------------------------------------- papers

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

# A record older than the stored version never overwrites it; enrichment and analysis columns are
# not in the SET list at all, so a re-harvest cannot erase them.
UPSERT_PAPERS_FROM_STAGING = f"""
INSERT INTO papers AS t ({", ".join(STG_PAPER_COLUMNS)})
SELECT {", ".join(STG_PAPER_COLUMNS)} FROM stg_papers
ON CONFLICT (arxiv_id) DO UPDATE SET
    {", ".join(f"{c} = excluded.{c}" for c in _PAPER_VALUE_COLUMNS)},
    modified_at = now()
WHERE excluded.version >= t.version
  AND ({", ".join(f"t.{c}" for c in _PAPER_VALUE_COLUMNS)})
      IS DISTINCT FROM ({", ".join(f"excluded.{c}" for c in _PAPER_VALUE_COLUMNS)})
RETURNING t.id, t.arxiv_id, (t.xmax = 0) AS inserted
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
STG_OLD_AUTHORS = "paper_id bigint, position integer, name text, researcher_id bigint"
STG_OLD_AFFILIATIONS = "paper_id bigint, position integer, institution_id bigint"
STG_CARRY = "paper_id bigint, position integer, old_position integer, researcher_id bigint"

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
INSERT INTO stg_old_authors (paper_id, position, name, researcher_id)
SELECT a.paper_id, a.position, a.name, a.researcher_id FROM authorships a JOIN stg_changed c USING (paper_id)
"""
SAVE_OLD_AFFILIATIONS = """
INSERT INTO stg_old_affiliations (paper_id, position, institution_id)
SELECT ai.paper_id, ai.position, ai.institution_id FROM authorship_institutions ai JOIN stg_changed c USING (paper_id)
"""
DELETE_CHANGED_AUTHORSHIPS = "DELETE FROM authorships a USING stg_changed c WHERE a.paper_id = c.paper_id"
# A name that occurs once in the old list and once in the new one (compared folded, so `Muller`
# and `Müller` agree) is the same person: it keeps its researcher and institutions wherever it moved.
INSERT_CARRY = """
INSERT INTO stg_carry (paper_id, position, old_position, researcher_id)
SELECT n.paper_id, n.position, o.position, o.researcher_id
FROM (SELECT s.paper_id, s.position, s.is_collaboration, wp_fold(s.name) AS folded,
             count(*) OVER (PARTITION BY s.paper_id, wp_fold(s.name)) AS c
      FROM stg_authors s JOIN stg_changed USING (paper_id)) n
JOIN (SELECT o.paper_id, o.position, o.researcher_id, wp_fold(o.name) AS folded,
             count(*) OVER (PARTITION BY o.paper_id, wp_fold(o.name)) AS c
      FROM stg_old_authors o) o
  ON o.paper_id = n.paper_id AND o.folded = n.folded AND o.c = 1
WHERE n.c = 1
"""
INSERT_CHANGED_AUTHORSHIPS = """
INSERT INTO authorships (paper_id, position, name, researcher_id, affiliation, is_collaboration)
SELECT s.paper_id, s.position, s.name, CASE WHEN s.is_collaboration THEN NULL ELSE k.researcher_id END,
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
# Same names in the same places: keep every match, refresh what arXiv says about each authorship.
UPDATE_KEPT_AUTHORSHIPS = """
WITH old AS (
    SELECT a.paper_id, a.position, a.researcher_id
    FROM authorships a JOIN stg_authors s ON s.paper_id = a.paper_id AND s.position = a.position
    WHERE NOT EXISTS (SELECT 1 FROM stg_changed c WHERE c.paper_id = s.paper_id)
      AND (a.affiliation, a.is_collaboration) IS DISTINCT FROM (s.affiliation, s.is_collaboration)
    FOR UPDATE OF a
), upd AS (
    UPDATE authorships a
    SET affiliation = s.affiliation, is_collaboration = s.is_collaboration,
        researcher_id = CASE WHEN s.is_collaboration THEN NULL ELSE a.researcher_id END
    FROM old JOIN stg_authors s ON s.paper_id = old.paper_id AND s.position = old.position
    WHERE a.paper_id = old.paper_id AND a.position = old.position
)
SELECT paper_id, researcher_id FROM old
"""
UPDATE_MATCHED_COUNTS = """
UPDATE papers p SET matched_count = m.n, modified_at = now()
FROM (SELECT b.id, count(a.researcher_id)::integer AS n
      FROM unnest($1::bigint[]) AS b(id) LEFT JOIN authorships a ON a.paper_id = b.id GROUP BY b.id) m
WHERE p.id = m.id AND p.matched_count <> m.n
"""
# The people of papers, and the papers' arXiv ids (what their cached responses are tagged by).
SELECT_PEOPLE_OF_PAPERS = """
SELECT 'r' AS kind, researcher_id AS id, NULL AS key FROM authorships
WHERE paper_id = any($1::bigint[]) AND researcher_id IS NOT NULL
UNION
SELECT 'i', institution_id, NULL FROM authorship_institutions WHERE paper_id = any($1::bigint[])
UNION ALL
SELECT 'p', id, arxiv_id FROM papers WHERE id = any($1::bigint[])
"""
SELECT_OLD_PEOPLE = """
SELECT 'r' AS kind, researcher_id AS id FROM stg_old_authors WHERE researcher_id IS NOT NULL
UNION
SELECT 'i', institution_id FROM stg_old_affiliations
"""


async def add_people_of_papers(conn: asyncpg.Connection, paper_ids: Iterable[int], touched: Touched) -> None:
    """Add the researchers and institutions of these papers, and the papers' arXiv ids."""
    ids = sorted(set(paper_ids))
    if not ids:
        return
    for r in await conn.fetch(SELECT_PEOPLE_OF_PAPERS, ids):
        if r["kind"] == "p":
            touched.paper_keys.add(r["key"])
        else:
            (touched.researchers if r["kind"] == "r" else touched.institutions).add(r["id"])


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

    await _stage(conn, "stg_papers", STG_PAPERS, STG_PAPER_COLUMNS, [_paper_row(p) for p in recs], analyze=False)
    rows = await conn.fetch(UPSERT_PAPERS_FROM_STAGING)
    result.ids = {r["arxiv_id"]: r["id"] for r in rows}
    new = {r["id"] for r in rows if r["inserted"]}
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
        await _stage(conn, "stg_versions", STG_VERSIONS, VERSION_COLUMNS, stored_versions, analyze=False)
        written |= _ids(await conn.fetch(UPSERT_PAPER_VERSIONS_FROM_STAGING), "paper_id")
    touched_here = Touched()
    relinked: set[int] = set()
    if stored:
        # Joins against the stored authorships need the staged rows' statistics.
        await _stage(conn, "stg_authors", STG_AUTHORS, AUTHORSHIP_COLUMNS, stored_authors)
        relinked = await _relink_stored_authorships(conn, sorted(stored), touched_here)
        if relinked:
            await conn.execute(UPDATE_MATCHED_COUNTS, sorted(relinked))

    touched_here.papers = written | relinked
    touched_here.paper_keys = {aid for aid, pid in result.ids.items() if pid in new}
    touched_here.new_papers = {p.arxiv_id for p in fresh if result.ids[p.arxiv_id] in new}
    # A paper new to the archive has no researcher or institution linked yet.
    await add_people_of_papers(conn, touched_here.papers - new, touched_here)
    result.touched = touched_here
    if touched is not None:
        touched.update(touched_here)
    return result


async def _relink_stored_authorships(conn: asyncpg.Connection, paper_ids: list[int], touched: Touched) -> set[int]:
    """Papers already stored: replace the author lists that changed, carrying matches over by name, and
    refresh the rest in place. Returns the papers whose links may have changed; adds the people they had."""
    await _stage(conn, "stg_changed", STG_CHANGED, ("paper_id",), [])
    await _stage(conn, "stg_old_authors", STG_OLD_AUTHORS, (), [])
    await _stage(conn, "stg_old_affiliations", STG_OLD_AFFILIATIONS, (), [])
    await _stage(conn, "stg_carry", STG_CARRY, (), [])
    await conn.execute(INSERT_CHANGED_AUTHOR_LISTS, paper_ids)
    changed = _ids(await conn.fetch("SELECT paper_id FROM stg_changed"), "paper_id")
    if changed:
        await conn.execute(SAVE_OLD_AUTHORS)
        await conn.execute(SAVE_OLD_AFFILIATIONS)
        await conn.execute(DELETE_CHANGED_AUTHORSHIPS)
        await conn.execute(INSERT_CARRY)
        await conn.execute(INSERT_CHANGED_AUTHORSHIPS)
        await conn.execute(INSERT_CARRIED_AFFILIATIONS)
        for r in await conn.fetch(SELECT_OLD_PEOPLE):
            (touched.researchers if r["kind"] == "r" else touched.institutions).add(r["id"])
    kept = await conn.fetch(UPDATE_KEPT_AUTHORSHIPS)
    touched.researchers |= _ids(kept, "researcher_id")
    return changed | _ids(kept, "paper_id")


# Columns of paper_versions and authorships as the harvest writes them, directly or through staging.
VERSION_COLUMNS = ("paper_id", "version", "submitted_at", "size_kb", "source_type")
AUTHORSHIP_COLUMNS = ("paper_id", "position", "name", "affiliation", "is_collaboration")


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
    await _stage(conn, "stg_analyses", STG_ANALYSES, STG_ANALYSIS_COLUMNS, list(rows.values()))
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


# ---------------------------------------------------------------------------------------- researchers

STG_RESEARCHERS = """
    n integer, name text, name_slug text, s2_author_id text, openalex_id text, orcid text,
    s2_paper_count integer, s2_citation_count integer, s2_h_index integer,
    openalex_works_count integer, openalex_cited_by_count integer, openalex_h_index integer,
    openalex_i10_index integer, rid bigint
"""
STG_RESEARCHER_COLUMNS = (
    "n",
    "name",
    "name_slug",
    "s2_author_id",
    "openalex_id",
    "orcid",
    "s2_paper_count",
    "s2_citation_count",
    "s2_h_index",
    "openalex_works_count",
    "openalex_cited_by_count",
    "openalex_h_index",
    "openalex_i10_index",
)
# An identifier wins in this order: the Semantic Scholar id, then OpenAlex, then ORCID.
RESOLVE_STAGED_RESEARCHERS = """
UPDATE stg_researchers s SET rid = coalesce(
    (SELECT r.id FROM researchers r WHERE r.s2_author_id = s.s2_author_id),
    (SELECT r.id FROM researchers r WHERE r.openalex_id = s.openalex_id),
    (SELECT r.id FROM researchers r WHERE r.orcid = s.orcid))
"""
# Two records that turned out to be one researcher: the first of the batch speaks for both.
DEDUPE_STAGED_RESEARCHERS = """
DELETE FROM stg_researchers s USING stg_researchers o WHERE s.rid = o.rid AND s.n > o.n
"""
_S2_FIGURES = ("s2_paper_count", "s2_citation_count", "s2_h_index")
_OA_FIGURES = ("openalex_works_count", "openalex_cited_by_count", "openalex_h_index", "openalex_i10_index")


def _kept(cols: Sequence[str]) -> str:
    return ", ".join(f"coalesce(s.{c}, t.{c})" for c in cols)


def _free_id(col: str) -> str:
    # Adopt an identifier only when no other researcher already holds it (they are unique).
    return (
        f"coalesce(t.{col}, CASE WHEN NOT EXISTS (SELECT 1 FROM researchers o WHERE o.{col} = s.{col}) "
        f"THEN s.{col} END)"
    )


_NEW_NAME = "CASE WHEN s.s2_author_id IS NOT NULL OR t.s2_author_id IS NULL THEN s.{c} ELSE t.{c} END"
UPDATE_RESEARCHERS_FROM_STAGING = f"""
UPDATE researchers t SET
    name = {_NEW_NAME.format(c="name")},
    name_slug = {_NEW_NAME.format(c="name_slug")},
    s2_author_id = {_free_id("s2_author_id")},
    openalex_id = {_free_id("openalex_id")},
    orcid = {_free_id("orcid")},
    {", ".join(f"{c} = coalesce(s.{c}, t.{c})" for c in _S2_FIGURES + _OA_FIGURES)},
    s2_updated_at = CASE WHEN ({", ".join(f"t.{c}" for c in _S2_FIGURES)}) IS DISTINCT FROM ({_kept(_S2_FIGURES)})
                         THEN now() ELSE t.s2_updated_at END,
    openalex_updated_at = CASE WHEN ({", ".join(f"t.{c}" for c in _OA_FIGURES)}) IS DISTINCT FROM ({_kept(_OA_FIGURES)})
                               THEN now() ELSE t.openalex_updated_at END,
    modified_at = now()
FROM stg_researchers s
WHERE t.id = s.rid
  AND (t.name, t.name_slug, t.s2_author_id, t.openalex_id, t.orcid,
       {", ".join(f"t.{c}" for c in _S2_FIGURES + _OA_FIGURES)})
      IS DISTINCT FROM
      ({_NEW_NAME.format(c="name")}, {_NEW_NAME.format(c="name_slug")},
       {_free_id("s2_author_id")}, {_free_id("openalex_id")}, {_free_id("orcid")},
       {_kept(_S2_FIGURES + _OA_FIGURES)})
RETURNING t.id
"""
INSERT_RESEARCHERS_FROM_STAGING = f"""
INSERT INTO researchers (name, name_slug, s2_author_id, openalex_id, orcid,
                         {", ".join(_S2_FIGURES + _OA_FIGURES)}, s2_updated_at, openalex_updated_at)
SELECT name, name_slug, s2_author_id, openalex_id, orcid, {", ".join(_S2_FIGURES + _OA_FIGURES)},
       CASE WHEN coalesce({", ".join(_S2_FIGURES)}) IS NOT NULL THEN now() END,
       CASE WHEN coalesce({", ".join(_OA_FIGURES)}) IS NOT NULL THEN now() END
FROM stg_researchers WHERE rid IS NULL ORDER BY n
ON CONFLICT DO NOTHING
RETURNING id
"""
SELECT_STAGED_RESEARCHER_IDS = """
SELECT k.key, r.id
FROM stg_researchers s
CROSS JOIN LATERAL (VALUES (s.s2_author_id, 1), (s.openalex_id, 2), (s.orcid, 3)) AS k(key, rank)
JOIN researchers r ON (k.rank = 1 AND r.s2_author_id = k.key) OR (k.rank = 2 AND r.openalex_id = k.key)
                   OR (k.rank = 3 AND r.orcid = k.key)
WHERE k.key IS NOT NULL
"""
SELECT_RESEARCHER_IDS_BY_KEYS = """
SELECT k.key, coalesce(
    (SELECT r.id FROM researchers r WHERE r.s2_author_id = k.key),
    (SELECT r.id FROM researchers r WHERE r.openalex_id = k.key),
    (SELECT r.id FROM researchers r WHERE r.orcid = k.key)) AS id
FROM unnest($1::text[]) AS k(key)
"""


def researcher_key(rec: ResearcherRecord) -> str:
    """The identifier a researcher record is known by: S2 id, else OpenAlex id, else ORCID."""
    key = rec.s2_author_id or rec.openalex_id or rec.orcid
    if not key:
        raise ValueError(f"researcher {rec.name!r} has no identifier")
    return key


async def upsert_researchers(
    conn: asyncpg.Connection, recs: Sequence[ResearcherRecord], *, touched: Touched | None = None
) -> dict[str, int]:
    """Insert or update researchers; return every identifier of each record -> researchers.id.

    Each source's figures are kept side by side: a record that lacks a source's figures leaves
    the stored ones alone.
    """
    by_key: dict[str, ResearcherRecord] = {}
    for r in recs:
        by_key[researcher_key(r)] = r
    if not by_key:
        return {}
    rows = [
        (
            n,
            r.name,
            slugify(r.name),
            r.s2_author_id,
            r.openalex_id,
            r.orcid,
            r.s2_paper_count,
            r.s2_citation_count,
            r.s2_h_index,
            r.openalex_works_count,
            r.openalex_cited_by_count,
            r.openalex_h_index,
            r.openalex_i10_index,
        )
        for n, r in enumerate(by_key.values())
    ]
    await _stage(conn, "stg_researchers", STG_RESEARCHERS, STG_RESEARCHER_COLUMNS, rows)
    await conn.execute(RESOLVE_STAGED_RESEARCHERS)
    await conn.execute(DEDUPE_STAGED_RESEARCHERS)
    changed = _ids(await conn.fetch(UPDATE_RESEARCHERS_FROM_STAGING), "id")
    changed |= _ids(await conn.fetch(INSERT_RESEARCHERS_FROM_STAGING), "id")
    if touched is not None:
        touched.researchers |= changed
    return {r["key"]: r["id"] for r in await conn.fetch(SELECT_STAGED_RESEARCHER_IDS)}


async def fetch_researcher_ids_by_keys(conn: asyncpg.Connection, keys: Sequence[str]) -> dict[str, int]:
    """S2 ids, OpenAlex ids or ORCIDs -> researchers.id, for those that exist."""
    rows = await conn.fetch(SELECT_RESEARCHER_IDS_BY_KEYS, sorted(set(keys)))
    return {r["key"]: r["id"] for r in rows if r["id"] is not None}


# --------------------------------------------------------------------------------------- institutions

STG_INSTITUTIONS = """
    ror_id text, name text, name_slug text, aliases text[], country text, type text, openalex_id text
"""
STG_INSTITUTION_COLUMNS = ("ror_id", "name", "name_slug", "aliases", "country", "type", "openalex_id")
DROP_TAKEN_INSTITUTION_OPENALEX_IDS = """
UPDATE stg_institutions s SET openalex_id = NULL
WHERE EXISTS (SELECT 1 FROM institutions i WHERE i.openalex_id = s.openalex_id AND i.ror_id <> s.ror_id)
"""
# A record without aliases (a work's authorship names only the institution) keeps the stored ones.
_ALIASES = "CASE WHEN cardinality(excluded.aliases) > 0 THEN excluded.aliases ELSE t.aliases END"
UPSERT_INSTITUTIONS_FROM_STAGING = f"""
INSERT INTO institutions AS t (ror_id, name, name_slug, aliases, country, type, openalex_id)
SELECT ror_id, name, name_slug, aliases, country, type, openalex_id FROM stg_institutions
ON CONFLICT (ror_id) DO UPDATE SET
    name = excluded.name, name_slug = excluded.name_slug, aliases = {_ALIASES},
    country = coalesce(excluded.country, t.country), type = coalesce(excluded.type, t.type),
    openalex_id = coalesce(t.openalex_id, excluded.openalex_id), modified_at = now()
WHERE (t.name, t.name_slug, t.aliases, t.country, t.type, t.openalex_id)
      IS DISTINCT FROM (excluded.name, excluded.name_slug, {_ALIASES}, coalesce(excluded.country, t.country),
                        coalesce(excluded.type, t.type), coalesce(t.openalex_id, excluded.openalex_id))
RETURNING t.id
"""
SELECT_STAGED_INSTITUTION_IDS = "SELECT i.ror_id, i.id FROM institutions i JOIN stg_institutions s USING (ror_id)"


async def upsert_institutions(
    conn: asyncpg.Connection, recs: Sequence[InstitutionRecord], *, touched: Touched | None = None
) -> dict[str, int]:
    """Insert or update institutions keyed by their (bare, checksummed) ROR id; return ror_id -> id."""
    rows: dict[str, tuple[Any, ...]] = {}
    for r in recs:
        ror = normalize_ror(r.ror_id)
        if ror is None:
            raise ValueError(f"malformed ROR id {r.ror_id!r}")
        rows[ror] = (ror, r.name, slugify(r.name), list(r.aliases), r.country, r.type, r.openalex_id)
    if not rows:
        return {}
    await _stage(conn, "stg_institutions", STG_INSTITUTIONS, STG_INSTITUTION_COLUMNS, list(rows.values()))
    await conn.execute(DROP_TAKEN_INSTITUTION_OPENALEX_IDS)
    changed = _ids(await conn.fetch(UPSERT_INSTITUTIONS_FROM_STAGING), "id")
    if touched is not None:
        touched.institutions |= changed
    return {r["ror_id"]: r["id"] for r in await conn.fetch(SELECT_STAGED_INSTITUTION_IDS)}


# ---------------------------------------------------------------------------------------------- works

STG_WORKS = """
    researcher_id bigint, source text, external_id text, title text, year integer, citation_count integer,
    arxiv_id text, doi text
"""
STG_WORK_COLUMNS = ("researcher_id", "source", "external_id", "title", "year", "citation_count", "arxiv_id", "doi")
DELETE_REPLACED_WORKS = """
WITH k AS (SELECT DISTINCT researcher_id, source FROM stg_works)
DELETE FROM researcher_works w USING k
WHERE w.researcher_id = k.researcher_id AND w.source = k.source
  AND NOT EXISTS (SELECT 1 FROM stg_works s WHERE s.researcher_id = w.researcher_id AND s.source = w.source
                                              AND s.external_id = w.external_id)
RETURNING w.researcher_id
"""
UPSERT_WORKS_FROM_STAGING = """
INSERT INTO researcher_works AS t (researcher_id, source, external_id, title, year, citation_count, arxiv_id, doi)
SELECT researcher_id, source, external_id, title, year, citation_count, arxiv_id, doi FROM stg_works
ON CONFLICT (researcher_id, source, external_id) DO UPDATE SET
    title = excluded.title, year = excluded.year, citation_count = excluded.citation_count,
    arxiv_id = excluded.arxiv_id, doi = excluded.doi
WHERE (t.title, t.year, t.citation_count, t.arxiv_id, t.doi)
      IS DISTINCT FROM (excluded.title, excluded.year, excluded.citation_count, excluded.arxiv_id, excluded.doi)
RETURNING t.researcher_id
"""


async def replace_researcher_works(
    conn: asyncpg.Connection,
    researcher_id_to_works: Mapping[int, Sequence[WorkRecord]],
    *,
    touched: Touched | None = None,
) -> Touched:
    """For each researcher and each source present in their list, that list replaces the source's stored one.

    A source absent from a researcher's list keeps its stored works (an empty list changes nothing).
    """
    rows: dict[tuple[int, str, str], tuple[Any, ...]] = {}
    for rid, works in researcher_id_to_works.items():
        for w in works:
            if w.source not in ("s2", "openalex"):
                raise ValueError(f"unknown works source {w.source!r}")
            rows[(rid, w.source, w.external_id)] = (
                rid,
                w.source,
                w.external_id,
                w.title,
                w.year,
                w.citation_count,
                w.arxiv_id,
                w.doi,
            )
    here = Touched()
    if rows:
        await _stage(conn, "stg_works", STG_WORKS, STG_WORK_COLUMNS, list(rows.values()))
        here.researchers = _ids(await conn.fetch(DELETE_REPLACED_WORKS), "researcher_id")
        here.researchers |= _ids(await conn.fetch(UPSERT_WORKS_FROM_STAGING), "researcher_id")
    if touched is not None:
        touched.update(here)
    return here


# --------------------------------------------------------------------------------------------- matches

STG_MATCHES = "arxiv_id text, position integer, researcher_id bigint, institution_ids bigint[], paper_id bigint"
STG_MATCH_COLUMNS = ("arxiv_id", "position", "researcher_id", "institution_ids")
RESOLVE_STAGED_MATCHES = "UPDATE stg_matches s SET paper_id = p.id FROM papers p WHERE p.arxiv_id = s.arxiv_id"
# A collaboration is never a researcher, so a match naming one is ignored.
APPLY_RESEARCHER_MATCHES = """
WITH m AS (
    SELECT a.paper_id, a.position, a.researcher_id AS old_rid, s.researcher_id AS new_rid
    FROM stg_matches s JOIN authorships a ON a.paper_id = s.paper_id AND a.position = s.position
    WHERE NOT a.is_collaboration AND s.researcher_id IS NOT NULL AND a.researcher_id IS DISTINCT FROM s.researcher_id
    FOR UPDATE OF a
), u AS (
    UPDATE authorships a SET researcher_id = m.new_rid FROM m WHERE a.paper_id = m.paper_id AND a.position = m.position
)
SELECT paper_id, old_rid, new_rid FROM m
"""
# A match that names institutions replaces that authorship's set; one that names none keeps it.
APPLY_INSTITUTION_MATCHES = """
WITH want AS (
    SELECT DISTINCT s.paper_id, s.position, i.institution_id
    FROM stg_matches s
    JOIN authorships a ON a.paper_id = s.paper_id AND a.position = s.position AND NOT a.is_collaboration
    CROSS JOIN unnest(s.institution_ids) AS i(institution_id)
), del AS (
    -- Not an anti-join against `want`: a CTE has no index, and re-running a large batch would
    -- compare every stored link with every wanted one.
    DELETE FROM authorship_institutions ai USING stg_matches s
    WHERE ai.paper_id = s.paper_id AND ai.position = s.position AND cardinality(s.institution_ids) > 0
      AND ai.institution_id <> ALL (s.institution_ids)
    RETURNING ai.paper_id, ai.institution_id
), ins AS (
    INSERT INTO authorship_institutions (paper_id, position, institution_id)
    SELECT paper_id, position, institution_id FROM want
    ON CONFLICT DO NOTHING
    RETURNING paper_id, institution_id
)
SELECT paper_id, institution_id FROM del UNION SELECT paper_id, institution_id FROM ins
"""
UPSERT_RESEARCHER_INSTITUTIONS_FROM_MATCHES = """
INSERT INTO researcher_institutions AS t (researcher_id, institution_id, first_year, last_year)
SELECT s.researcher_id, i.institution_id,
       min(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer,
       max(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer
FROM stg_matches s
JOIN authorships a ON a.paper_id = s.paper_id AND a.position = s.position AND a.researcher_id = s.researcher_id
JOIN papers p ON p.id = s.paper_id
CROSS JOIN unnest(s.institution_ids) AS i(institution_id)
GROUP BY s.researcher_id, i.institution_id
ON CONFLICT (researcher_id, institution_id) DO UPDATE SET
    first_year = least(t.first_year, excluded.first_year), last_year = greatest(t.last_year, excluded.last_year)
WHERE (t.first_year, t.last_year)
      IS DISTINCT FROM (least(t.first_year, excluded.first_year), greatest(t.last_year, excluded.last_year))
RETURNING t.researcher_id, t.institution_id
"""


@dataclass(slots=True)
class MatchResult:
    applied: int = 0  # authorships whose researcher changed
    skipped: int = 0  # matches naming an unknown researcher or paper
    touched: Touched = field(default_factory=Touched)


async def apply_authorship_matches(
    conn: asyncpg.Connection,
    matches: Sequence[AuthorshipMatch],
    researcher_ids: Mapping[str, int],
    institution_ids: Mapping[str, int],
    *,
    touched: Touched | None = None,
) -> MatchResult:
    """Link authorships to researchers and institutions, and researchers to institutions.

    `researcher_ids` maps `AuthorshipMatch.researcher_key` to researchers.id (as `upsert_researchers`
    returns it) and `institution_ids` ROR ids to institutions.id; a match whose key is unknown is skipped. A match
    without a key links only the authorship's institutions (an author no source identifies).
    """
    result = MatchResult()
    rows: dict[tuple[str, int], tuple[Any, ...]] = {}
    for m in matches:
        rid = researcher_ids.get(m.researcher_key) if m.researcher_key is not None else None
        if rid is None and (m.researcher_key is not None or not m.institution_rors):
            result.skipped += 1
            continue
        insts = sorted(
            {institution_ids[r] for r in (normalize_ror(x) or x for x in m.institution_rors) if r in institution_ids}
        )
        rows[(m.arxiv_id, m.position)] = (m.arxiv_id, m.position, rid, insts)
    if not rows:
        return result
    await _stage(conn, "stg_matches", STG_MATCHES, STG_MATCH_COLUMNS, list(rows.values()))
    await conn.execute(RESOLVE_STAGED_MATCHES)
    result.skipped += await conn.fetchval("SELECT count(*) FROM stg_matches WHERE paper_id IS NULL")
    here = Touched()
    changed = await conn.fetch(APPLY_RESEARCHER_MATCHES)
    result.applied = len(changed)
    here.papers |= _ids(changed, "paper_id")
    here.researchers |= _ids(changed, "old_rid") | _ids(changed, "new_rid")
    links = await conn.fetch(APPLY_INSTITUTION_MATCHES)
    here.papers |= _ids(links, "paper_id")
    here.institutions |= _ids(links, "institution_id")
    ri = await conn.fetch(UPSERT_RESEARCHER_INSTITUTIONS_FROM_MATCHES)
    here.researchers |= _ids(ri, "researcher_id")
    here.institutions |= _ids(ri, "institution_id")
    if changed:
        await conn.execute(UPDATE_MATCHED_COUNTS, sorted(_ids(changed, "paper_id")))
    await add_people_of_papers(conn, here.papers, here)
    result.touched = here
    if touched is not None:
        touched.update(here)
    return result


# ------------------------------------------------------------------------------------------- citations

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
        await _stage(conn, "stg_citations", STG_CITATIONS, STG_CITATION_COLUMNS, list(rows.values()))
        here.papers = _ids(await conn.fetch(UPDATE_CITATIONS_FROM_STAGING), "id")
        await add_people_of_papers(conn, here.papers, here)
    if touched is not None:
        touched.update(here)
    return here


async def mark_enriched(conn: asyncpg.Connection, arxiv_ids: Sequence[str]) -> None:
    """Take papers off the enrichment queue (papers.enriched_at); not a visible change, so nothing is touched."""
    await conn.execute(MARK_ENRICHED, list(arxiv_ids))


async def count_papers(conn: asyncpg.Connection) -> int:
    """How many papers the database holds (`wovepaper demo --if-empty` loads only into an empty one)."""
    return int(await conn.fetchval("SELECT count(*) FROM papers"))
