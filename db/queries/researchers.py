"""Reads of researchers: by id, by external id, pages of a list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import asyncpg

from db.connection import Conn
from db.filters import Clause, Fragment, Sort, compose
from db.keys import Keyed
from db.queries.institutions import (
    AFFILIATIONS_JSON_OF_RESEARCHER,
    AffiliationRow,
    InstitutionRow,
    affiliations_from_json,
)
from db.queries.owners import count_of_owners, page_of_owners
from db.rows import CountedRows, RowShape, select_list
from db.slugs import entity_slug

ExternalIdKind = Literal["s2", "openalex", "orcid"]


@dataclass(slots=True)
class ResearcherRow:
    id: int
    name: str
    name_slug: str
    s2_author_id: str | None
    openalex_id: str | None
    orcid: str | None
    paper_count: int
    h_index: int
    i10_index: int
    citation_count: int
    works_count: int
    modified_at: datetime
    # Signed-in readers following the researcher (kept by a trigger on `follows`).
    follower_count: int
    # Whether a reader owns the profile (kept by a trigger on `researcher_owners`; who never leaves the database).
    claimed: bool

    @property
    def slug(self) -> str:
        return entity_slug(self.id, self.name_slug)


RESEARCHERS = RowShape(ResearcherRow)
# Every field of a ResearcherRow, named as the field; `R_`: each name prefixed, beside another row type's columns.
RESEARCHER_COLUMNS = select_list("r", RESEARCHERS.fields)
RESEARCHER_COLUMNS_R_ = select_list("r", RESEARCHERS.fields, prefix="r_")


def researcher_from_record(record: asyncpg.Record, prefix: str = "") -> ResearcherRow:
    """From a record with the columns of RESEARCHER_COLUMNS (each name after `prefix`), wherever they are."""
    return RESEARCHERS.build(record, prefix)


SELECT_RESEARCHERS_BY_IDS = Keyed.of(f"SELECT {RESEARCHER_COLUMNS} FROM researchers r WHERE r.id {{in_keys}}")
# An id merged into another researcher leads to the survivor (migration 0011's redirects).
SELECT_RESEARCHERS_BY_IDS_OR_REDIRECTS = Keyed.of(f"""
SELECT k.id AS asked, {RESEARCHER_COLUMNS}
FROM {{keys}} AS k(id)
LEFT JOIN researcher_redirects d ON d.old_id = k.id
JOIN researchers r ON r.id = coalesce(d.survivor_id, k.id)
""")
# The same with each researcher's affiliations nested (a researcher's page shows both): one round trip.
SELECT_RESEARCHERS_WITH_AFFILIATIONS = Keyed.of(f"""
SELECT k.id AS asked, {RESEARCHER_COLUMNS}, {AFFILIATIONS_JSON_OF_RESEARCHER} AS affiliations
FROM {{keys}} AS k(id)
LEFT JOIN researcher_redirects d ON d.old_id = k.id
JOIN researchers r ON r.id = coalesce(d.survivor_id, k.id)
""")
SELECT_MERGED_IDS = """
SELECT survivor_id, old_id FROM researcher_redirects WHERE survivor_id = any($1::bigint[]) ORDER BY survivor_id, old_id
"""
_SELECT_BY_EXTERNAL = {
    # An S2 id S2 merged into another leads to the survivor (s2_author_redirects), as does one whose researcher
    # was merged by hand (researcher_redirects).
    "s2": f"""(SELECT {RESEARCHER_COLUMNS} FROM researchers r WHERE r.s2_author_id = $1)
        UNION ALL
        (SELECT {RESEARCHER_COLUMNS} FROM s2_author_redirects x JOIN researchers r ON r.s2_author_id = x.s2_author_id
         WHERE x.old_s2_author_id = $1)
        UNION ALL
        (SELECT {RESEARCHER_COLUMNS} FROM researcher_redirects d JOIN researchers r ON r.id = d.survivor_id
         WHERE d.old_s2_author_id = $1 ORDER BY d.merged_at DESC LIMIT 1)
        LIMIT 1""",
    "openalex": f"SELECT {RESEARCHER_COLUMNS} FROM researchers r WHERE r.openalex_id = $1",
    "orcid": f"SELECT {RESEARCHER_COLUMNS} FROM researchers r WHERE r.orcid = $1",
}


async def fetch_researchers_by_ids(conn: Conn, ids: Sequence[int]) -> list[ResearcherRow]:
    return RESEARCHERS.build_all(await conn.fetch(*SELECT_RESEARCHERS_BY_IDS.bind(ids)))


async def fetch_researchers_following_redirects(conn: Conn, ids: Sequence[int]) -> list[tuple[int, ResearcherRow]]:
    """(asked id, researcher): an id merged into another researcher answers with the survivor."""
    rows = await conn.fetch(*SELECT_RESEARCHERS_BY_IDS_OR_REDIRECTS.bind(ids))
    if not rows:
        return []
    read = RESEARCHERS.reader(rows[0])
    return [(r["asked"], read(r)) for r in rows]


@dataclass(slots=True)
class ResearcherWithAffiliations:
    asked: int  # the id asked for: the researcher's own, or one merged into it
    researcher: ResearcherRow
    affiliations: list[AffiliationRow]


async def fetch_researchers_with_affiliations(conn: Conn, ids: Sequence[int]) -> list[ResearcherWithAffiliations]:
    """As fetch_researchers_following_redirects, each with its affiliations (most recent first)."""
    rows = await conn.fetch(*SELECT_RESEARCHERS_WITH_AFFILIATIONS.bind(ids))
    if not rows:
        return []
    read = RESEARCHERS.reader(rows[0])
    seen: dict[int, InstitutionRow] = {}
    found = []
    for r in rows:
        researcher = read(r)
        affiliations = affiliations_from_json(researcher.id, r["affiliations"], seen)
        found.append(ResearcherWithAffiliations(r["asked"], researcher, affiliations))
    return found


async def fetch_merged_ids(conn: Conn, researcher_ids: Sequence[int]) -> list[tuple[int, int]]:
    """(survivor, absorbed id) for every researcher merged into one of these."""
    return [(r[0], r[1]) for r in await conn.fetch(SELECT_MERGED_IDS, list(researcher_ids))]


async def fetch_researcher_by_external_id(conn: Conn, kind: ExternalIdKind, value: str) -> ResearcherRow | None:
    record = await conn.fetchrow(_SELECT_BY_EXTERNAL[kind], value)
    return researcher_from_record(record) if record else None


async def page_researchers(
    conn: Conn, clauses: Sequence[Clause], sort: Sort, *, limit: int, offset: int = 0
) -> list[ResearcherRow]:
    where, args = compose(clauses)
    n = len(args)
    sql = (
        f"SELECT {RESEARCHER_COLUMNS} FROM researchers r WHERE {where}"
        f" ORDER BY {sort.order_by} LIMIT ${n + 1} OFFSET ${n + 2}"
    )
    return RESEARCHERS.build_all(await conn.fetch(sql, *args, limit, offset))


async def page_researchers_of_owners(
    conn: Conn,
    owner: Fragment,
    owner_ids: Sequence[int],
    clauses: Sequence[Clause],
    sort: Sort,
    *,
    limit: int,
    offset: int = 0,
    total: str | None = None,
) -> dict[int, CountedRows[ResearcherRow]]:
    """The same page of researchers for each owner (an institution), in one statement; `total`: each owner's count
    with it (an expression of `k.owner_id`, such as institutions.STORED_RESEARCHER_COUNT)."""
    return await page_of_owners(
        conn,
        RESEARCHERS,
        owner,
        owner_ids,
        clauses,
        sort,
        columns=RESEARCHER_COLUMNS,
        source="researchers r",
        limit=limit,
        offset=offset,
        total=total,
    )


async def count_researchers_of_owners(
    conn: Conn, owner: Fragment, owner_ids: Sequence[int], clauses: Sequence[Clause]
) -> dict[int, int]:
    return await count_of_owners(conn, owner, owner_ids, clauses, source="researchers r")


async def count_researchers(conn: Conn, clauses: Sequence[Clause]) -> int:
    where, args = compose(clauses)
    count: int = await conn.fetchval(f"SELECT count(*) FROM researchers r WHERE {where}", *args)
    return count
