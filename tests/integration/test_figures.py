"""The figures' exact definitions, on hand-made data whose answers are worked out by hand below."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from db.migrate import migrate
from db.queries.figures import (
    Figures,
    fetch_career_figures,
    refresh_institution_figures,
    refresh_paper_counts,
    refresh_researcher_figures,
)
from db.queries.writes.citations import update_citations
from db.queries.writes.institutions import upsert_institutions
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import replace_researcher_works, upsert_researchers
from db.records import (
    AuthorRecord,
    AuthorshipMatch,
    CitationRecord,
    InstitutionRecord,
    PaperRecord,
    ResearcherRecord,
    WorkRecord,
)

T = datetime(2021, 3, 1, tzinfo=UTC)
ROR_A, ROR_B = "05gq02987", "00f54p054"


def paper(arxiv_id: str, names: list[str], doi: str | None = None) -> PaperRecord:
    authors = [AuthorRecord(i, n) for i, n in enumerate(names, 1)]
    return PaperRecord(arxiv_id, 1, f"Paper {arxiv_id}", "", ["hep-th"], T, T, authors, doi=doi)


@pytest.fixture(scope="module")
async def db(make_database) -> AsyncIterator[tuple[asyncpg.Connection, dict[str, int], dict[str, int]]]:
    """Researcher R ("r") and a few small ones, with the works described in each test."""
    conn = await asyncpg.connect(await make_database("figures"))
    await migrate(conn)
    async with conn.transaction():
        await upsert_papers(
            conn,
            [
                paper("2101.00001", ["R One", "S Two"]),
                # R at two positions of one paper: still one paper.
                paper("2101.00002", ["R One", "R One"]),
                paper("2101.00003", ["R One"], doi="10.5/P3"),
                paper("2101.00004", ["R One", "S Two"]),
                paper("2101.00005", ["Not R"]),
            ],
        )
        rids = await upsert_researchers(
            conn,
            [
                ResearcherRecord("R One", s2_author_id="r"),
                ResearcherRecord("S Two", s2_author_id="s"),
                ResearcherRecord("Tie Three", s2_author_id="tie"),
                ResearcherRecord("Zero Four", s2_author_id="zero"),
                ResearcherRecord("Nobody Five", s2_author_id="none"),
            ],
        )
        iids = await upsert_institutions(conn, [InstitutionRecord(ROR_A, "A"), InstitutionRecord(ROR_B, "B")])
        await apply_authorship_matches(
            conn,
            [
                AuthorshipMatch("2101.00001", 1, "r", [ROR_A]),
                AuthorshipMatch("2101.00001", 2, "s", [ROR_A]),
                AuthorshipMatch("2101.00002", 1, "r", [ROR_A]),
                AuthorshipMatch("2101.00002", 2, "r", [ROR_A]),
                AuthorshipMatch("2101.00003", 1, "r", [ROR_B]),
                AuthorshipMatch("2101.00004", 1, "r"),
                AuthorshipMatch("2101.00004", 2, "s"),
            ],
            rids,
            iids,
        )
        # Archive counts: P1 10, P2 3, P3 none, P4 0.
        await update_citations(
            conn,
            [
                CitationRecord("2101.00001", 10, "s2"),
                CitationRecord("2101.00002", 3, "openalex"),
                CitationRecord("2101.00004", 0, "s2"),
                CitationRecord("2101.00005", 99, "s2"),
            ],
        )
        await replace_researcher_works(
            conn,
            {
                rids["r"]: [
                    WorkRecord("s2", "a", "P1", 2021, 50, arxiv_id="2101.00001"),  # is P1: P1's own 10 wins
                    WorkRecord("s2", "p3", "P3", 2021, 7, arxiv_id="2101.00003"),  # is P3, which has no count
                    WorkRecord("openalex", "P3", "P3", 2021, 9, doi="10.5/p3"),  # is P3 by DOI: max(7, 9) = 9
                    WorkRecord("s2", "b", "B", 2019, 12, doi="10.1/x"),
                    WorkRecord("openalex", "B", "B", 2019, 15, doi="10.1/X"),  # same DOI: one work, 15
                    WorkRecord("s2", "c", "C", 2018, 5),  # no shared id: two works
                    WorkRecord("openalex", "C", "C", 2018, 5),
                    WorkRecord("openalex", "D", "D", 2017, None),  # a work without a count: 0
                    WorkRecord("s2", "e", "E", 2016, 4, arxiv_id="2101.00005"),  # not R's paper here
                    WorkRecord("openalex", "E", "E", 2016, 6, arxiv_id="2101.00005"),  # same work: 6
                    WorkRecord("s2", "e2", "E", 2016, 4, arxiv_id="2101.00005"),  # listed twice by S2
                ],
                rids["tie"]: [WorkRecord("s2", str(k), "T", 2020, 3) for k in range(4)],
                rids["zero"]: [WorkRecord("openalex", str(k), "Z", 2020, 0) for k in range(3)],
            },
        )
    yield conn, rids, iids
    await conn.close()


async def test_whole_career_counts_each_work_once(db) -> None:
    conn, rids, _ = db
    figures = await fetch_career_figures(conn, rids["r"])
    # Works: P1 10, P2 3, P3 9, P4 0, B 15, C(s2) 5, C(openalex) 5, D 0, E 6
    # sorted 15 10 9 6 5 5 3 0 0: five works with >= 5 citations, not six with >= 6.
    assert figures.career == Figures(works_count=9, citation_count=53, i10_index=2, h_index=5, with_counts=8)
    # The archive alone, with its own counts: 10, 3, none, 0.
    assert figures.archive == Figures(works_count=4, citation_count=13, i10_index=1, h_index=2, with_counts=3)
    # Each source's list on its own: S2 50, 12, 7, 5, 4 (E twice counts once).
    assert figures.s2 == Figures(works_count=5, citation_count=78, i10_index=2, h_index=4, with_counts=5)
    # OpenAlex 15, 9, 6, 5, none.
    assert figures.openalex == Figures(works_count=5, citation_count=35, i10_index=1, h_index=4, with_counts=4)


async def test_ties_zeros_and_nothing(db) -> None:
    conn, rids, _ = db
    tie = await fetch_career_figures(conn, rids["tie"])
    assert (tie.career.h_index, tie.career.works_count, tie.career.citation_count) == (3, 4, 12)
    zero = await fetch_career_figures(conn, rids["zero"])
    assert (zero.career.h_index, zero.career.works_count, zero.career.i10_index) == (0, 3, 0)
    nothing = await fetch_career_figures(conn, rids["none"])
    assert nothing.career == Figures(0, 0, 0, 0, 0)


async def test_stored_figures_match_the_definitions(db) -> None:
    conn, rids, iids = db
    async with conn.transaction():
        changed = await refresh_researcher_figures(conn, [rids["r"], rids["tie"]])
    assert changed == {rids["r"], rids["tie"]}
    async with conn.transaction():
        await refresh_researcher_figures(conn, None)
        again = await refresh_researcher_figures(conn, None)
    assert again == set()  # nothing left to change: the refresh is idempotent

    rows = {
        r["s2_author_id"]: tuple(r)[1:]
        for r in await conn.fetch(
            "SELECT s2_author_id, paper_count, h_index, i10_index, citation_count, works_count FROM researchers"
        )
    }
    assert rows["r"] == (4, 5, 2, 53, 9)
    assert rows["s"] == (2, 1, 1, 10, 2)  # P1 10 and P4 0, no external works
    assert rows["tie"] == (0, 3, 0, 12, 4)
    assert rows["zero"] == (0, 0, 0, 0, 3)
    assert rows["none"] == (0, 0, 0, 0, 0)

    async with conn.transaction():
        assert await refresh_institution_figures(conn, None) == set(iids.values())
    inst = {
        r["ror_id"]: (r["paper_count"], r["researcher_count"]) for r in await conn.fetch("SELECT * FROM institutions")
    }
    assert inst[ROR_A] == (2, 2)  # P1 and P2; R and S
    assert inst[ROR_B] == (1, 1)  # P3; R


async def test_a_citation_change_moves_the_stored_figures(db) -> None:
    conn, rids, _ = db
    async with conn.transaction():
        await refresh_researcher_figures(conn, None)
        touched = await update_citations(conn, [CitationRecord("2101.00004", 20, "s2")])
        changed = await refresh_researcher_figures(conn, sorted(touched.researcher_figures))
    assert changed == {rids["r"], rids["s"]}
    # R: 20 15 10 9 6 5 5 3 0 -> h 5 still (6th is 5 < 6), i10 3, citations 73.
    row = await conn.fetchrow("SELECT h_index, i10_index, citation_count FROM researchers WHERE id = $1", rids["r"])
    assert tuple(row) == (5, 3, 73)
    async with conn.transaction():
        await update_citations(conn, [CitationRecord("2101.00004", 0, "s2")])
        await refresh_researcher_figures(conn, None)


async def test_stored_and_fetched_figures_agree_on_the_demo_data(demo_database_url: str) -> None:
    conn = await asyncpg.connect(demo_database_url)
    try:
        rows = await conn.fetch(
            "(SELECT * FROM researchers ORDER BY paper_count DESC, id LIMIT 3)"
            " UNION ALL (SELECT * FROM researchers ORDER BY works_count, id LIMIT 3)"
        )
        for r in rows:
            f = await fetch_career_figures(conn, r["id"])
            assert (f.career.h_index, f.career.i10_index, f.career.works_count, f.archive.works_count) == (
                r["h_index"],
                r["i10_index"],
                r["works_count"],
                r["paper_count"],
            )
            assert f.career.citation_count == r["citation_count"]
            # Each source alone never has more works than the whole career.
            assert f.s2.works_count <= f.career.works_count and f.openalex.works_count <= f.career.works_count
        assert rows[0]["works_count"] > 5000
    finally:
        await conn.close()


async def test_the_write_path_keeps_paper_counts_that_a_recount_confirms(db) -> None:
    conn, _, _ = db
    async with conn.transaction():
        assert await refresh_paper_counts(conn, None) == set()
        await conn.execute("UPDATE papers SET matched_count = 0, author_count = 9 WHERE arxiv_id = '2101.00002'")
        fixed = await refresh_paper_counts(conn, None)
    assert len(fixed) == 1
    row = await conn.fetchrow("SELECT author_count, matched_count FROM papers WHERE arxiv_id = '2101.00002'")
    assert tuple(row) == (2, 2)
