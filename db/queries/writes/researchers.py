"""Researchers, keyed by their Semantic Scholar, OpenAlex or ORCID identifier, and their works lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from db.queries.writes.staging import ids_of, stage
from db.records import ResearcherRecord, Touched, WorkRecord
from db.slugs import slugify

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
SELECT_RESOLVED_KEYS = """
SELECT coalesce(s2_author_id, openalex_id, orcid) AS key, rid FROM stg_researchers WHERE rid IS NOT NULL
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
FROM stg_researchers s JOIN researchers o ON o.id = s.rid
WHERE t.id = s.rid
  AND (t.name, t.name_slug, t.s2_author_id, t.openalex_id, t.orcid,
       {", ".join(f"t.{c}" for c in _S2_FIGURES + _OA_FIGURES)})
      IS DISTINCT FROM
      ({_NEW_NAME.format(c="name")}, {_NEW_NAME.format(c="name_slug")},
       {_free_id("s2_author_id")}, {_free_id("openalex_id")}, {_free_id("orcid")},
       {_kept(_S2_FIGURES + _OA_FIGURES)})
RETURNING t.id, (o.name, o.name_slug) IS DISTINCT FROM (t.name, t.name_slug) AS renamed
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
# S2 ids of profiles a merge took away (researcher_redirects; the trigger of migration 0025 keeps them from being
# made again): the survivor, for the keys the batch found no researcher under.
SELECT_REDIRECTED_KEYS = """
SELECT DISTINCT ON (s.s2_author_id) s.s2_author_id AS key, d.survivor_id AS id
FROM stg_researchers s JOIN researcher_redirects d ON d.old_s2_author_id = s.s2_author_id
WHERE NOT EXISTS (SELECT 1 FROM researchers r WHERE r.s2_author_id = s.s2_author_id)
ORDER BY s.s2_author_id, d.merged_at DESC
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
    await stage(conn, "stg_researchers", STG_RESEARCHERS, STG_RESEARCHER_COLUMNS, rows)
    await conn.execute(RESOLVE_STAGED_RESEARCHERS)
    # A record found under another of its ids (its ORCID is a stored researcher's whose S2 id differs) is that
    # researcher: its key leads there, though the row keeps the S2 id it has.
    found = {r["key"]: r["rid"] for r in await conn.fetch(SELECT_RESOLVED_KEYS)}
    await conn.execute(DEDUPE_STAGED_RESEARCHERS)
    updated = await conn.fetch(UPDATE_RESEARCHERS_FROM_STAGING)
    inserted = ids_of(await conn.fetch(INSERT_RESEARCHERS_FROM_STAGING), "id")
    if touched is not None:
        # What names a researcher is their name (and its slug): one whose ids or figures alone changed, or who is
        # new, is shown by name as before (db/records.py Touched).
        touched.researchers |= {r["id"] for r in updated if r["renamed"]}
        touched.researcher_figures |= {r["id"] for r in updated if not r["renamed"]} | inserted
    ids = found | {r["key"]: r["id"] for r in await conn.fetch(SELECT_STAGED_RESEARCHER_IDS)}
    # A record under an S2 id whose profile was merged into another is the survivor's author: its papers go there,
    # and the survivor keeps its own name and figures (the record was not written).
    return {r["key"]: r["id"] for r in await conn.fetch(SELECT_REDIRECTED_KEYS)} | ids


async def fetch_researcher_ids_by_keys(conn: asyncpg.Connection, keys: Sequence[str]) -> dict[str, int]:
    """S2 ids, OpenAlex ids or ORCIDs -> researchers.id, for those that exist."""
    rows = await conn.fetch(SELECT_RESEARCHER_IDS_BY_KEYS, sorted(set(keys)))
    return {r["key"]: r["id"] for r in rows if r["id"] is not None}


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
        await stage(conn, "stg_works", STG_WORKS, STG_WORK_COLUMNS, list(rows.values()))
        here.researcher_figures = ids_of(await conn.fetch(DELETE_REPLACED_WORKS), "researcher_id")
        here.researcher_figures |= ids_of(await conn.fetch(UPSERT_WORKS_FROM_STAGING), "researcher_id")
    if touched is not None:
        touched.update(here)
    return here
