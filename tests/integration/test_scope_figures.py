"""The researcher page reads each scope's figures (whole career, archive, each source's list) as the write path
stores them. After every kind of write the ingest makes, refreshed as the ingest refreshes them (in the write's
transaction, for what the write touched), every researcher's stored figures equal the ones the definitions
compute afresh; so does the migration that first stored them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import astuple
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from db.migrate import migrate
from db.queries.aggregates import fetch_researcher_stats
from db.queries.figures import fetch_career_figures, refresh_figures
from db.queries.ingest_state import tombstone_papers
from db.queries.merges import merge_researchers
from db.queries.paper_people import add_people_of_papers
from db.queries.writes.citations import update_citations
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import replace_researcher_works, upsert_researchers
from db.records import AuthorRecord, AuthorshipMatch, CitationRecord, PaperRecord, ResearcherRecord, Touched, WorkRecord

T = datetime(2022, 5, 1, tzinfo=UTC)
Write = Callable[[Touched], Awaitable[Any]]


def paper(
    arxiv_id: str, names: list[str], *, version: int = 1, doi: str | None = None, withdrawn: bool = False
) -> PaperRecord:
    authors = [AuthorRecord(i, n) for i, n in enumerate(names, 1)]
    return PaperRecord(
        arxiv_id, version, f"Paper {arxiv_id}", "", ["hep-th"], T, T, authors, doi=doi, withdrawn=withdrawn
    )


async def write(conn: asyncpg.Connection, step: Write, *, refresh: bool = True) -> Touched:
    """One write as the ingest makes it: the write, then the figures of what it touched, in one transaction."""
    touched = Touched()
    async with conn.transaction():
        await step(touched)
        if refresh:
            await refresh_figures(conn, touched)
    return touched


async def page_figures(conn: asyncpg.Connection, rid: int) -> tuple[tuple[int, ...], ...]:
    s = await fetch_researcher_stats(conn, researcher_id=rid)
    assert s is not None
    return tuple(astuple(x) for x in (s.career, s.archive, s.s2_listed, s.openalex_listed))


async def fresh_figures(conn: asyncpg.Connection, rid: int) -> tuple[tuple[int, ...], ...]:
    f = await fetch_career_figures(conn, rid)
    return tuple(astuple(x) for x in (f.career, f.archive, f.s2, f.openalex))


async def assert_every_page_true(conn: asyncpg.Connection, *, career_columns: bool = True) -> None:
    """Every researcher's page shows the figures the definitions give now; so do the career figures lists sort
    on. No figures are stored for a researcher that is gone."""
    for r in await conn.fetch("SELECT * FROM researchers ORDER BY id"):
        fresh = await fresh_figures(conn, r["id"])
        assert await page_figures(conn, r["id"]) == fresh, r["id"]
        if career_columns:
            works_count, citation_count, i10_index, h_index, _ = fresh[0]
            stored = (r["works_count"], r["citation_count"], r["i10_index"], r["h_index"])
            assert stored == (works_count, citation_count, i10_index, h_index), r["id"]
    orphans = """SELECT count(*) FROM researcher_scope_figures f
                 WHERE NOT EXISTS (SELECT FROM researchers r WHERE r.id = f.researcher_id)"""
    assert await conn.fetchval(orphans) == 0


async def build_world(conn: asyncpg.Connection, yymm: str, *, refresh: bool = True) -> dict[str, int]:
    """Researchers R and S with papers here and works lists, each step a write of its own; the ids by name.

    Papers: P1 (R, S) cited 10, P2 (R) 3, P3 (R, with a DOI) no count, P4 (S) 7.
    R's works: S2 lists P1 (50) and P3 by DOI (7) and B (12); OpenAlex P3 by DOI (9), B by the same DOI (15), C (5).
    S's works: OpenAlex S1 (4).
    """
    ids: dict[str, int] = {}
    p = {n: f"{yymm}.0000{n}" for n in "1234"}

    async def papers(t: Touched) -> None:
        result = await upsert_papers(
            conn,
            [
                paper(p["1"], ["R One", "S Two"]),
                paper(p["2"], ["R One"]),
                paper(p["3"], ["R One"], doi=f"10.5/{yymm}p3"),
                paper(p["4"], ["S Two"]),
            ],
            touched=t,
        )
        ids.update({f"P{n}": result.ids[a] for n, a in p.items()})

    async def researchers(t: Touched) -> None:
        rids = await upsert_researchers(
            conn,
            [ResearcherRecord("R One", s2_author_id=f"{yymm}r"), ResearcherRecord("S Two", s2_author_id=f"{yymm}s")],
        )
        ids.update(R=rids[f"{yymm}r"], S=rids[f"{yymm}s"])
        t.researchers |= {ids["R"], ids["S"]}
        await apply_authorship_matches(
            conn,
            [
                AuthorshipMatch(p["1"], 1, f"{yymm}r"),
                AuthorshipMatch(p["1"], 2, f"{yymm}s"),
                AuthorshipMatch(p["2"], 1, f"{yymm}r"),
                AuthorshipMatch(p["3"], 1, f"{yymm}r"),
                AuthorshipMatch(p["4"], 1, f"{yymm}s"),
            ],
            rids,
            {},
            touched=t,
        )

    async def citations(t: Touched) -> None:
        await update_citations(
            conn,
            [CitationRecord(p["1"], 10, "s2"), CitationRecord(p["2"], 3, "openalex"), CitationRecord(p["4"], 7, "s2")],
            touched=t,
        )

    async def works(t: Touched) -> None:
        await replace_researcher_works(
            conn,
            {
                ids["R"]: [
                    WorkRecord("s2", f"{yymm}a", "P1", 2022, 50, arxiv_id=p["1"]),
                    WorkRecord("s2", f"{yymm}p3", "P3", 2022, 7, doi=f"10.5/{yymm}P3"),
                    WorkRecord("s2", f"{yymm}b", "B", 2020, 12, doi=f"10.1/{yymm}x"),
                    WorkRecord("openalex", f"{yymm}P3", "P3", 2022, 9, doi=f"10.5/{yymm}p3"),
                    WorkRecord("openalex", f"{yymm}B", "B", 2020, 15, doi=f"10.1/{yymm}X"),
                    WorkRecord("openalex", f"{yymm}C", "C", 2019, 5),
                ],
                ids["S"]: [WorkRecord("openalex", f"{yymm}S1", "S1", 2021, 4)],
            },
            touched=t,
        )

    for step in (papers, researchers, citations, works):
        await write(conn, step, refresh=refresh)
        if refresh:
            await assert_every_page_true(conn)
    return ids


@pytest.fixture(scope="module")
async def conn(make_database) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(await make_database("scope_figures"))
    await migrate(c)
    yield c
    await c.close()


async def test_new_papers_authorships_citations_and_works(conn) -> None:
    ids = await build_world(conn, "1101")
    # R: P1 10, P2 3, P3 9 (the larger source count, no archive count), B 15, C 5.
    assert (await page_figures(conn, ids["R"]))[0] == (5, 42, 2, 4, 5)
    # S: P1 10, P4 7, S1 4; archive alone P1 and P4.
    assert (await page_figures(conn, ids["S"]))[:2] == ((3, 21, 1, 3, 3), (2, 17, 1, 2, 2))


async def test_a_citation_change(conn) -> None:
    ids = await build_world(conn, "1102")
    before = await page_figures(conn, ids["R"]), await page_figures(conn, ids["S"])
    # P2 is R's alone, P1 is R's and S's: both researchers' pages move.
    await write(
        conn,
        lambda t: update_citations(
            conn, [CitationRecord("1102.00002", 40, "s2"), CitationRecord("1102.00001", 0, "s2")], touched=t
        ),
    )
    await assert_every_page_true(conn)
    assert (await page_figures(conn, ids["R"]), await page_figures(conn, ids["S"])) != before


async def test_a_works_list_replaced(conn) -> None:
    ids = await build_world(conn, "1103")
    before = await page_figures(conn, ids["R"])
    # S2's list is replaced: P1 gone, B cited more, a new work that is P2 by its arXiv id.
    await write(
        conn,
        lambda t: replace_researcher_works(
            conn,
            {
                ids["R"]: [
                    WorkRecord("s2", "1103b", "B", 2020, 30, doi="10.1/1103x"),
                    WorkRecord("s2", "1103p2", "P2", 2022, 8, arxiv_id="1103.00002"),
                ]
            },
            touched=t,
        ),
    )
    await assert_every_page_true(conn)
    after = await page_figures(conn, ids["R"])
    assert after != before and after[2][0] == 2


async def test_a_doi_or_arxiv_id_change(conn) -> None:
    ids = await build_world(conn, "1104")
    before = await page_figures(conn, ids["R"])
    # P3's DOI changes: the works that were P3 by its old DOI are a work of their own now.
    await write(
        conn, lambda t: upsert_papers(conn, [paper("1104.00003", ["R One"], version=2, doi="10.5/other")], touched=t)
    )
    await assert_every_page_true(conn)
    moved = await page_figures(conn, ids["R"])
    assert moved[0][0] == before[0][0] + 1
    # A work's arXiv id appears: OpenAlex's C is P2.
    await write(
        conn,
        lambda t: replace_researcher_works(
            conn,
            {
                ids["R"]: [
                    WorkRecord("openalex", "1104P3", "P3", 2022, 9, doi="10.5/1104p3"),
                    WorkRecord("openalex", "1104B", "B", 2020, 15, doi="10.1/1104X"),
                    WorkRecord("openalex", "1104C", "C", 2019, 5, arxiv_id="1104.00002"),
                ]
            },
            touched=t,
        ),
    )
    await assert_every_page_true(conn)
    assert (await page_figures(conn, ids["R"]))[0][0] == moved[0][0] - 1


async def test_withdrawals(conn) -> None:
    ids = await build_world(conn, "1105")
    before = await page_figures(conn, ids["S"])

    # As the harvest takes a deleted record: the paper is tombstoned, its people touched.
    async def tombstone(t: Touched) -> None:
        await add_people_of_papers(conn, await tombstone_papers(conn, ["1105.00001"]), t)

    await write(conn, tombstone)
    await assert_every_page_true(conn)
    # A new version that says withdrawn: S has no live archive paper left, so no archive figures at all.
    await write(
        conn, lambda t: upsert_papers(conn, [paper("1105.00004", ["S Two"], version=2, withdrawn=True)], touched=t)
    )
    await assert_every_page_true(conn)
    after = await page_figures(conn, ids["S"])
    assert after != before and after[1] == (0, 0, 0, 0, 0)
    rows = "SELECT scope FROM researcher_scope_figures WHERE researcher_id = $1 ORDER BY scope"
    assert [r["scope"] for r in await conn.fetch(rows, ids["S"])] == ["career", "openalex"]


async def test_an_author_list_change(conn) -> None:
    ids = await build_world(conn, "1106")
    before = await page_figures(conn, ids["S"])
    # P1's new version lists another second author: S loses the paper.
    await write(conn, lambda t: upsert_papers(conn, [paper("1106.00001", ["R One", "T Three"], version=2)], touched=t))
    await assert_every_page_true(conn)
    assert await page_figures(conn, ids["S"]) != before


async def test_a_merge(conn) -> None:
    ids = await build_world(conn, "1107")
    before = await page_figures(conn, ids["R"])
    await write(conn, lambda t: merge_researchers(conn, ids["S"], ids["R"], t))
    await assert_every_page_true(conn)
    assert await page_figures(conn, ids["R"]) != before
    assert await conn.fetchval("SELECT count(*) FROM researcher_scope_figures WHERE researcher_id = $1", ids["S"]) == 0


async def test_the_migration_stores_every_researchers_figures(make_database) -> None:
    c = await asyncpg.connect(await make_database("scope_figures_migration"))
    try:
        # The schema as it was before the figures were stored, with researchers written through the ingest.
        await migrate(c, before="0017")
        # Today's ingest writes the reason of each link (migration 0021's column): the one column it needs.
        await c.execute("ALTER TABLE authorships ADD COLUMN link_evidence text")
        ids = await build_world(c, "1108", refresh=False)
        assert await migrate(c, before="0018") == ["0017_researcher_scope_figures"]
        # Today's definitions read tables of later migrations (0025's pins), which leave the stored figures alone;
        # 0021 adds the column again.
        await c.execute("ALTER TABLE authorships DROP COLUMN link_evidence")
        await migrate(c)
        await assert_every_page_true(c, career_columns=False)
        assert (await page_figures(c, ids["R"]))[0] == (5, 42, 2, 4, 5)
    finally:
        await c.close()
