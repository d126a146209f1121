"""Reads of institutions: by id, ROR id or name, pages of a list, and their links to authorships."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from db.connection import Conn
from db.filters import Clause, Sort, compose
from db.slugs import entity_slug

INSTITUTION_COLUMNS = """i.id, i.ror_id, i.name, i.name_slug, i.aliases, i.country, i.type, i.openalex_id,
    i.paper_count, i.researcher_count, i.modified_at, wp_fold(i.name) AS fold_name, i.follower_count"""
INSTITUTION_WIDTH = 13


@dataclass(slots=True)
class InstitutionRow:
    id: int
    ror_id: str
    name: str
    name_slug: str
    aliases: list[str]
    country: str | None
    type: str | None
    openalex_id: str | None
    paper_count: int
    researcher_count: int
    modified_at: datetime
    fold_name: str
    # Signed-in readers following the institution (kept by a trigger on `institution_follows`).
    follower_count: int

    @property
    def slug(self) -> str:
        return entity_slug(self.id, self.name_slug)


def institution_from_record(record: asyncpg.Record, start: int = 0) -> InstitutionRow:
    return InstitutionRow(*record[start : start + INSTITUTION_WIDTH])


SELECT_INSTITUTIONS_BY_IDS = f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE i.id = any($1::bigint[])"
SELECT_INSTITUTION_BY_ROR = f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE i.ror_id = $1"
SELECT_INSTITUTION_BY_OPENALEX = f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE i.openalex_id = $1"
# The name, an alias or an acronym, ignoring case and diacritics (migration 0011's index). Two institutions
# may share an acronym: the one whose own name it is comes first, then the one with most papers.
SELECT_INSTITUTION_BY_NAME = f"""
SELECT {INSTITUTION_COLUMNS} FROM institutions i
WHERE wp_fold_names(i.name, i.aliases) @> ARRAY[wp_fold($1::text)]
ORDER BY wp_fold(i.name) = wp_fold($1::text) DESC, i.paper_count DESC, i.id
LIMIT 1
"""
# The most similar names (pg_trgm), for where a guess is asked for: a route a user typed, or the
# suggestions of an error message.
SELECT_INSTITUTIONS_BY_SIMILAR_NAME = f"""
SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE wp_fold(i.name) % wp_fold($1::text)
ORDER BY similarity(wp_fold(i.name), wp_fold($1::text)) DESC, i.paper_count DESC, i.id
LIMIT $2
"""
SELECT_INSTITUTIONS_BY_AUTHORSHIPS = f"""
SELECT ai.paper_id, ai.position, {INSTITUTION_COLUMNS}
FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
WHERE ai.paper_id = any($1::bigint[])
ORDER BY ai.paper_id, ai.position, i.name, i.id
"""
SELECT_INSTITUTIONS_BY_AUTHORSHIP_KEYS = f"""
SELECT ai.paper_id, ai.position, {INSTITUTION_COLUMNS}
FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
WHERE (ai.paper_id, ai.position) IN (SELECT * FROM unnest($1::bigint[], $2::int[]))
ORDER BY ai.paper_id, ai.position, i.name, i.id
"""
SELECT_INSTITUTIONS_BY_RESEARCHERS = f"""
SELECT ri.researcher_id, ri.first_year, ri.last_year, {INSTITUTION_COLUMNS}
FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id
WHERE ri.researcher_id = any($1::bigint[])
ORDER BY ri.researcher_id, ri.last_year DESC NULLS LAST, i.name, i.id
"""


async def fetch_institutions_by_ids(conn: Conn, ids: Sequence[int]) -> list[InstitutionRow]:
    return [institution_from_record(r) for r in await conn.fetch(SELECT_INSTITUTIONS_BY_IDS, list(ids))]


async def fetch_institution_by_ror(conn: Conn, ror_id: str) -> InstitutionRow | None:
    record = await conn.fetchrow(SELECT_INSTITUTION_BY_ROR, ror_id)
    return institution_from_record(record) if record else None


async def fetch_institution_by_openalex(conn: Conn, openalex_id: str) -> InstitutionRow | None:
    record = await conn.fetchrow(SELECT_INSTITUTION_BY_OPENALEX, openalex_id)
    return institution_from_record(record) if record else None


async def fetch_institution_by_name(conn: Conn, name: str) -> InstitutionRow | None:
    """The institution whose name, alias or acronym this is, ignoring case and diacritics; else None."""
    record = await conn.fetchrow(SELECT_INSTITUTION_BY_NAME, name)
    return institution_from_record(record) if record else None


async def fetch_institutions_by_similar_name(conn: Conn, name: str, *, limit: int) -> list[InstitutionRow]:
    """The institutions whose names are most like this one (pg_trgm similarity), most similar first."""
    return [institution_from_record(r) for r in await conn.fetch(SELECT_INSTITUTIONS_BY_SIMILAR_NAME, name, limit)]


async def fetch_institutions_by_paper_ids(
    conn: Conn, paper_ids: Sequence[int]
) -> list[tuple[int, int, InstitutionRow]]:
    """(paper_id, position, institution) for every authorship of these papers that has one."""
    rows = await conn.fetch(SELECT_INSTITUTIONS_BY_AUTHORSHIPS, list(paper_ids))
    return [(r[0], r[1], institution_from_record(r, 2)) for r in rows]


async def fetch_institutions_by_authorships(
    conn: Conn, keys: Sequence[tuple[int, int]]
) -> list[tuple[int, int, InstitutionRow]]:
    rows = await conn.fetch(SELECT_INSTITUTIONS_BY_AUTHORSHIP_KEYS, [k[0] for k in keys], [k[1] for k in keys])
    return [(r[0], r[1], institution_from_record(r, 2)) for r in rows]


@dataclass(slots=True)
class AffiliationRow:
    """A researcher's affiliation: the institution and the years of their papers there."""

    researcher_id: int
    first_year: int | None
    last_year: int | None
    institution: InstitutionRow


async def fetch_affiliations_by_researcher_ids(conn: Conn, researcher_ids: Sequence[int]) -> list[AffiliationRow]:
    """Each researcher's affiliations, most recent first."""
    rows = await conn.fetch(SELECT_INSTITUTIONS_BY_RESEARCHERS, list(researcher_ids))
    return [AffiliationRow(r[0], r[1], r[2], institution_from_record(r, 3)) for r in rows]


async def page_institutions(
    conn: Conn, clauses: Sequence[Clause], sort: Sort, *, limit: int, offset: int = 0
) -> list[InstitutionRow]:
    where, args = compose(clauses)
    n = len(args)
    sql = (
        f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE {where}"
        f" ORDER BY {sort.order_by} LIMIT ${n + 1} OFFSET ${n + 2}"
    )
    return [institution_from_record(r) for r in await conn.fetch(sql, *args, limit, offset)]


async def count_institutions(conn: Conn, clauses: Sequence[Clause]) -> int:
    where, args = compose(clauses)
    count: int = await conn.fetchval(f"SELECT count(*) FROM institutions i WHERE {where}", *args)
    return count
