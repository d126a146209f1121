"""Rows nested as JSON in another statement (a page's authorships with their institutions, a researcher with its
affiliations) are the rows the statements of their own give, field for field."""

from __future__ import annotations

import asyncpg

from db.queries.institutions import fetch_affiliations_by_researcher_ids, fetch_institutions_by_authorships
from db.queries.papers import fetch_authorships
from db.queries.researchers import fetch_researchers_following_redirects, fetch_researchers_with_affiliations


async def _conn(dsn: str) -> asyncpg.Connection:
    # No json codec here (the pool has one): the nested rows read from their text as well.
    return await asyncpg.connect(dsn)


async def test_authorships_with_nested_institutions_equal_the_separate_reads(demo_database_url: str) -> None:
    conn = await _conn(demo_database_url)
    try:
        paper_ids = [
            r["paper_id"]
            for r in await conn.fetch(
                "SELECT DISTINCT paper_id FROM authorship_institutions ORDER BY paper_id LIMIT 40"
            )
        ]
        rows = await fetch_authorships(conn, paper_ids, with_researchers=True, with_institutions=True)
        keys = [(a.paper_id, a.position) for a in rows]
        separate: dict[tuple[int, int], list[object]] = {k: [] for k in keys}
        for paper_id, position, inst in await fetch_institutions_by_authorships(conn, keys):
            separate[(paper_id, position)].append(inst)
        by_id = dict(
            await fetch_researchers_following_redirects(conn, [a.researcher_id for a in rows if a.researcher_id])
        )
    finally:
        await conn.close()
    assert any(a.prefetched_institutions for a in rows)
    for a in rows:
        assert a.prefetched_institutions == separate[(a.paper_id, a.position)]
        assert a.prefetched_researcher == (by_id[a.researcher_id] if a.researcher_id else None)
    # One object per institution however often it appears.
    objects = {id(i) for a in rows for i in a.prefetched_institutions or []}
    assert len(objects) == len({i.id for a in rows for i in a.prefetched_institutions or []})


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
