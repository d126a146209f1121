"""Reads of institutions: by id, ROR id or name, pages of a list, and their links to authorships."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from db.filters import Clause, Sort, compose
from db.paging import encode_global_id
from db.slugs import entity_slug

# A plain connection or one acquired from the pool.
Conn = asyncpg.Connection | PoolConnectionProxy

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

    @property
    def node_id(self) -> str:
        return encode_global_id("Institution", self.id)

    @property
    def ror_url(self) -> str:
        return f"https://ror.org/{self.ror_id}"


def institution_from_record(record: asyncpg.Record, start: int = 0) -> InstitutionRow:
    return InstitutionRow(*record[start : start + INSTITUTION_WIDTH])


SELECT_INSTITUTIONS_BY_IDS = f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE i.id = any($1::bigint[])"
SELECT_INSTITUTION_BY_ROR = f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE i.ror_id = $1"
# Exact folded name first; only when none matches does the trigram branch run (Append stops at LIMIT 1).
SELECT_INSTITUTION_BY_NAME = f"""
(SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE wp_fold(i.name) = wp_fold($1::text)
 ORDER BY i.paper_count DESC, i.id LIMIT 1)
UNION ALL
(SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE wp_fold(i.name) % wp_fold($1::text)
 ORDER BY similarity(wp_fold(i.name), wp_fold($1::text)) DESC, i.paper_count DESC, i.id LIMIT 1)
LIMIT 1
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
SELECT ri.researcher_id, {INSTITUTION_COLUMNS}
FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id
WHERE ri.researcher_id = any($1::bigint[])
ORDER BY ri.researcher_id, ri.last_year DESC NULLS LAST, i.name, i.id
"""


async def fetch_institutions_by_ids(conn: Conn, ids: Sequence[int]) -> list[InstitutionRow]:
    return [institution_from_record(r) for r in await conn.fetch(SELECT_INSTITUTIONS_BY_IDS, list(ids))]


async def fetch_institution_by_ror(conn: Conn, ror_id: str) -> InstitutionRow | None:
    record = await conn.fetchrow(SELECT_INSTITUTION_BY_ROR, ror_id)
    return institution_from_record(record) if record else None


async def fetch_institution_by_name(conn: Conn, name: str) -> InstitutionRow | None:
    """Exact match ignoring case and diacritics, else the most similar name (pg_trgm), else None."""
    record = await conn.fetchrow(SELECT_INSTITUTION_BY_NAME, name)
    return institution_from_record(record) if record else None


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


async def fetch_institutions_by_researcher_ids(
    conn: Conn, researcher_ids: Sequence[int]
) -> list[tuple[int, InstitutionRow]]:
    rows = await conn.fetch(SELECT_INSTITUTIONS_BY_RESEARCHERS, list(researcher_ids))
    return [(r[0], institution_from_record(r, 1)) for r in rows]


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
