"""Rows read by name in page-shaped statements (a page's authorships with their researchers and institutions, a
researcher with its affiliations nested as JSON) are the rows the look-ups by key give, field for field."""

from __future__ import annotations

import asyncpg

from db.queries.institutions import (
    fetch_affiliations_by_researcher_ids,
    fetch_institutions_by_authorships,
    fetch_institutions_by_paper_ids,
)
from db.queries.papers import fetch_authorships
from db.queries.researchers import fetch_researchers_following_redirects, fetch_researchers_with_affiliations


async def _conn(dsn: str) -> asyncpg.Connection:
    # No json codec here (the pool has one): the nested rows read from their text as well.
    return await asyncpg.connect(dsn)


async def test_a_pages_authors_read_by_name_equal_the_reads_by_key(demo_database_url: str) -> None:
    conn = await _conn(demo_database_url)
    try:
        paper_ids = [
            r["paper_id"]
            for r in await conn.fetch(
                "SELECT DISTINCT paper_id FROM authorship_institutions ORDER BY paper_id LIMIT 40"
            )
        ]
        rows = await fetch_authorships(conn, paper_ids, with_researchers=True)
        links = await fetch_institutions_by_paper_ids(conn, paper_ids)
        keys = [(a.paper_id, a.position) for a in rows]
        by_key = await fetch_institutions_by_authorships(conn, keys)
        ids = [a.researcher_id for a in rows if a.researcher_id]
        by_id = dict(await fetch_researchers_following_redirects(conn, ids))
    finally:
        await conn.close()
    assert links and links == by_key
    for a in rows:
        assert a.prefetched_researcher == (by_id[a.researcher_id] if a.researcher_id else None)
    # One object per institution and per researcher however often they appear.
    assert len({id(i) for _, _, i in links}) == len({i.id for _, _, i in links})
    people = [a.prefetched_researcher for a in rows if a.prefetched_researcher]
    assert len({id(p) for p in people}) == len({p.id for p in people})


async def test_a_researcher_with_nested_affiliations_equals_the_separate_reads(demo_database_url: str) -> None:
    conn = await _conn(demo_database_url)
    try:
        ids = [
            r["researcher_id"]
            for r in await conn.fetch(
                "SELECT researcher_id FROM researcher_institutions GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 10"
            )
        ]
        nested = await fetch_researchers_with_affiliations(conn, ids)
        researchers = dict(await fetch_researchers_following_redirects(conn, ids))
        affiliations = await fetch_affiliations_by_researcher_ids(conn, ids)
    finally:
        await conn.close()
    assert sorted(n.asked for n in nested) == sorted(ids)
    for n in nested:
        assert n.researcher == researchers[n.asked]
        assert n.affiliations == [a for a in affiliations if a.researcher_id == n.researcher.id]
        assert n.affiliations
