"""Reads of institutions: by id, ROR id or name, pages of a list, and their links to authorships."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import orjson

from db.connection import Conn
from db.filters import Clause, Sort, compose
from db.keys import Keyed
from db.rows import RowShape, select_list
from db.slugs import entity_slug


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
    # Signed-in readers following the institution (kept by a trigger on `institution_follows`).
    follower_count: int

    @property
    def slug(self) -> str:
        return entity_slug(self.id, self.name_slug)


INSTITUTIONS = RowShape(InstitutionRow)
# Every field of an InstitutionRow, named as the field.
INSTITUTION_COLUMNS = select_list("i", INSTITUTIONS.fields)


# An institution (`i`) as a JSON object named as InstitutionRow's fields, for statements that nest institutions
# in another row type's rows: one round trip fewer than reading them on their own.
INSTITUTION_JSON = "json_build_object(" + ", ".join(f"'{n}', i.{n}" for n in INSTITUTIONS.fields) + ")"
# One researcher's affiliations (`r`: the researcher), in the order SELECT_INSTITUTIONS_BY_RESEARCHERS gives them.
AFFILIATIONS_JSON_OF_RESEARCHER = f"""(
    SELECT json_agg(json_build_object('first_year', ri.first_year, 'last_year', ri.last_year,
                                      'institution', {INSTITUTION_JSON})
                    ORDER BY ri.last_year DESC NULLS LAST, i.name, i.id)
      FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id
     WHERE ri.researcher_id = r.id)"""

Json = str | list[Any] | None


def _json_list(value: Json) -> list[Any]:
    """A nested JSON array as the pool's json codec decodes it (or its text, on a plain connection)."""
    if value is None:
        return []
    return orjson.loads(value) if isinstance(value, str) else value


def institution_from_json(d: dict[str, Any], seen: dict[int, InstitutionRow]) -> InstitutionRow:
    """A row of INSTITUTION_JSON; one object per institution among calls sharing `seen`."""
    row = seen.get(d["id"])
    if row is None:
        d["modified_at"] = datetime.fromisoformat(d["modified_at"]).astimezone(UTC)
        row = seen[d["id"]] = InstitutionRow(**d)
    return row


def affiliations_from_json(researcher_id: int, value: Json, seen: dict[int, InstitutionRow]) -> list[AffiliationRow]:
    """Rows of AFFILIATIONS_JSON_OF_RESEARCHER."""
    return [
        AffiliationRow(researcher_id, d["first_year"], d["last_year"], institution_from_json(d["institution"], seen))
        for d in _json_list(value)
    ]


def institution_from_record(record: asyncpg.Record, prefix: str = "") -> InstitutionRow:
    """From a record with the columns of INSTITUTION_COLUMNS (each name after `prefix`), wherever they are."""
    return INSTITUTIONS.build(record, prefix)


SELECT_INSTITUTIONS_BY_IDS = Keyed.of(f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE i.id {{in_keys}}")
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
SELECT_INSTITUTIONS_BY_AUTHORSHIPS = Keyed.of(f"""
SELECT ai.paper_id, ai.position, {INSTITUTION_COLUMNS}
FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
WHERE ai.paper_id {{in_keys}}
ORDER BY ai.paper_id, ai.position, i.name, i.id
""")
SELECT_INSTITUTIONS_BY_AUTHORSHIP_KEYS = f"""
SELECT ai.paper_id, ai.position, {INSTITUTION_COLUMNS}
FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id
WHERE (ai.paper_id, ai.position) IN (SELECT * FROM unnest($1::bigint[], $2::int[]))
ORDER BY ai.paper_id, ai.position, i.name, i.id
"""
SELECT_INSTITUTIONS_BY_RESEARCHERS = Keyed.of(f"""
SELECT ri.researcher_id, ri.first_year, ri.last_year, {INSTITUTION_COLUMNS}
FROM researcher_institutions ri JOIN institutions i ON i.id = ri.institution_id
WHERE ri.researcher_id {{in_keys}}
ORDER BY ri.researcher_id, ri.last_year DESC NULLS LAST, i.name, i.id
""")


async def fetch_institutions_by_ids(conn: Conn, ids: Sequence[int]) -> list[InstitutionRow]:
    return INSTITUTIONS.build_all(await conn.fetch(*SELECT_INSTITUTIONS_BY_IDS.bind(ids)))


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
    return INSTITUTIONS.build_all(await conn.fetch(SELECT_INSTITUTIONS_BY_SIMILAR_NAME, name, limit))


async def fetch_institutions_by_paper_ids(
    conn: Conn, paper_ids: Sequence[int]
) -> list[tuple[int, int, InstitutionRow]]:
    """(paper_id, position, institution) for every authorship of these papers that has one."""
    return _linked(await conn.fetch(*SELECT_INSTITUTIONS_BY_AUTHORSHIPS.bind(paper_ids)))


async def fetch_institutions_by_authorships(
    conn: Conn, keys: Sequence[tuple[int, int]]
) -> list[tuple[int, int, InstitutionRow]]:
    return _linked(await conn.fetch(SELECT_INSTITUTIONS_BY_AUTHORSHIP_KEYS, [k[0] for k in keys], [k[1] for k in keys]))


def _linked(records: list[asyncpg.Record]) -> list[tuple[int, int, InstitutionRow]]:
    if not records:
        return []
    read = INSTITUTIONS.reader(records[0])
    # One object per institution however often it appears.
    seen: dict[int, InstitutionRow] = {}
    linked = []
    for r in records:
        found = seen.get(r["id"])
        linked.append((r["paper_id"], r["position"], found if found is not None else seen.setdefault(r["id"], read(r))))
    return linked


@dataclass(slots=True)
class AffiliationRow:
    """A researcher's affiliation: the institution and the years of their papers there."""

    researcher_id: int
    first_year: int | None
    last_year: int | None
    institution: InstitutionRow


async def fetch_affiliations_by_researcher_ids(conn: Conn, researcher_ids: Sequence[int]) -> list[AffiliationRow]:
    """Each researcher's affiliations, most recent first."""
    rows = await conn.fetch(*SELECT_INSTITUTIONS_BY_RESEARCHERS.bind(researcher_ids))
    if not rows:
        return []
    read = INSTITUTIONS.reader(rows[0])
    return [AffiliationRow(r["researcher_id"], r["first_year"], r["last_year"], read(r)) for r in rows]


async def page_institutions(
    conn: Conn, clauses: Sequence[Clause], sort: Sort, *, limit: int, offset: int = 0
) -> list[InstitutionRow]:
    where, args = compose(clauses)
    n = len(args)
    sql = (
        f"SELECT {INSTITUTION_COLUMNS} FROM institutions i WHERE {where}"
        f" ORDER BY {sort.order_by} LIMIT ${n + 1} OFFSET ${n + 2}"
    )
    return INSTITUTIONS.build_all(await conn.fetch(sql, *args, limit, offset))


async def count_institutions(conn: Conn, clauses: Sequence[Clause]) -> int:
    where, args = compose(clauses)
    count: int = await conn.fetchval(f"SELECT count(*) FROM institutions i WHERE {where}", *args)
    return count


# The same count as an expression of a page statement's owner (`k.owner_id`: db/filters.owner_keys).
STORED_RESEARCHER_COUNT = "(SELECT i.researcher_count FROM institutions i WHERE i.id = k.owner_id)"


async def fetch_researcher_counts(conn: Conn, institution_ids: Sequence[int]) -> dict[int, int]:
    """Each institution's researchers (its researcher_institutions rows), as stored and kept by every write
    (migration 0027): what counting them live takes a scan of the largest institution's 45,000 to give."""
    records = await conn.fetch(
        "SELECT id, researcher_count FROM institutions WHERE id = ANY($1::bigint[])", list(institution_ids)
    )
    return {record[0]: record[1] for record in records}
