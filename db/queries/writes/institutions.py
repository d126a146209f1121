"""Institutions, keyed by their ROR id."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from db.ids import normalize_ror
from db.queries.writes.staging import ids_of, stage
from db.records import InstitutionRecord, Touched
from db.slugs import slugify

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
    await stage(conn, "stg_institutions", STG_INSTITUTIONS, STG_INSTITUTION_COLUMNS, list(rows.values()))
    await conn.execute(DROP_TAKEN_INSTITUTION_OPENALEX_IDS)
    changed = ids_of(await conn.fetch(UPSERT_INSTITUTIONS_FROM_STAGING), "id")
    if touched is not None:
        touched.institutions |= changed
    return {r["ror_id"]: r["id"] for r in await conn.fetch(SELECT_STAGED_INSTITUTION_IDS)}
