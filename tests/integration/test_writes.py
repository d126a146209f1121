from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import asyncpg
import pytest

from db.migrate import migrate
from db.queries.writes.analyses import AnalysisRecord, upsert_analyses
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
    Touched,
    VersionRecord,
    WorkRecord,
)

T1 = datetime(2019, 11, 11, 9, 0, tzinfo=UTC)
T2 = datetime(2020, 2, 1, 9, 0, tzinfo=UTC)
ROR_A = "05gq02987"
ROR_B = "00f54p054"


@pytest.fixture(scope="module")
async def conn(make_database) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(await make_database("writes"))
    await migrate(c)
    yield c
    await c.close()


def paper(
    arxiv_id: str, names: list[str], *, version: int = 1, title: str = "Throughput prediction of SGD"
) -> PaperRecord:
    return PaperRecord(
        arxiv_id=arxiv_id,
        version=version,
        title=title,
        abstract="We study $\\alpha$.",
        categories=["cs.DC", "cs.LG"],
        published=T1,
        updated=T2 if version > 1 else T1,
        authors=[
            AuthorRecord(i, n, is_collaboration=n.endswith("Collaboration")) for i, n in enumerate(names, start=1)
        ],
        versions=[VersionRecord(v, T1 if v == 1 else T2) for v in range(1, version + 1)],
    )


async def researcher_ids_of(conn: asyncpg.Connection, arxiv_id: str) -> list[tuple[int, str, int | None]]:
    rows = await conn.fetch(
        "SELECT a.position, a.name, a.researcher_id FROM authorships a JOIN papers p ON p.id = a.paper_id"
        " WHERE p.arxiv_id = $1 ORDER BY a.position",
        arxiv_id,
    )
    return [(r["position"], r["name"], r["researcher_id"]) for r in rows]


async def snapshot(conn: asyncpg.Connection) -> list[list[asyncpg.Record]]:
    return [
        await conn.fetch(f"SELECT * FROM {t} ORDER BY 1, 2")
        for t in (
            "papers",
            "paper_versions",
            "authorships",
            "researchers",
            "institutions",
            "researcher_works",
            "authorship_institutions",
            "researcher_institutions",
        )
    ]


async def write_everything(conn: asyncpg.Connection, prefix: str) -> dict[str, object]:
    """One enrichment round for two papers: what the ingest writes, in its order."""
    touched = Touched()
    async with conn.transaction():
        papers = await upsert_papers(
            conn,
            [
                paper(f"{prefix}.00001", ["Wumo Yan", "Jana Müller", "ATLAS Collaboration"], version=2),
                paper(f"{prefix}.00002", ["Jana Müller"], title="On Hecke operators"),
            ],
            touched=touched,
        )
        rids = await upsert_researchers(
            conn,
            [
                ResearcherRecord("Wumo Yan", s2_author_id=f"{prefix}1", openalex_id=f"A{prefix}1", s2_h_index=2),
                ResearcherRecord("Jana Müller", s2_author_id=f"{prefix}2", openalex_h_index=7),
            ],
            touched=touched,
        )
        iids = await upsert_institutions(
            conn,
            [
                InstitutionRecord(ROR_A, "Université de Montréal", country="CA", type="education"),
                InstitutionRecord(ROR_B, "Universität Wien", country="AT"),
            ],
            touched=touched,
        )
        matches = await apply_authorship_matches(
            conn,
            [
                AuthorshipMatch(f"{prefix}.00001", 1, f"{prefix}1", [ROR_A]),
                AuthorshipMatch(f"{prefix}.00001", 2, f"{prefix}2", [ROR_A, ROR_B]),
                AuthorshipMatch(f"{prefix}.00002", 1, f"{prefix}2", [ROR_B]),
            ],
            rids,
            iids,
            touched=touched,
        )
        await replace_researcher_works(
            conn,
            {rids[f"{prefix}1"]: [WorkRecord("s2", "w1", "A", 2018, 4), WorkRecord("openalex", "W1", "A", 2018, 5)]},
            touched=touched,
        )
        await update_citations(
            conn, [CitationRecord(f"{prefix}.00001", 12, "s2", s2_paper_id=f"s2{prefix}")], touched=touched
        )
        await upsert_analyses(
            conn,
            [AnalysisRecord(f"{prefix}.00002", "A summary.", ["hecke"], "THEORY", "Mathematics", "A new bound.", 0.65)],
        )
    return {"papers": papers, "rids": rids, "iids": iids, "matches": matches, "touched": touched}


async def test_same_input_twice_changes_nothing_the_second_time(conn: asyncpg.Connection) -> None:
    first = await write_everything(conn, "2101")
    assert first["papers"].inserted == 2 and first["matches"].applied == 3
    before = await snapshot(conn)

    second = await write_everything(conn, "2101")

    assert (second["papers"].inserted, second["papers"].updated, second["papers"].unchanged) == (0, 0, 2)
    assert second["papers"].ids == first["papers"].ids
    assert second["rids"] == first["rids"] and second["iids"] == first["iids"]
    assert second["matches"].applied == 0
    assert not second["touched"], second["touched"]
    assert await snapshot(conn) == before


async def test_touched_ids_name_exactly_what_changed(conn: asyncpg.Connection) -> None:
    out = await write_everything(conn, "2102")
    pid1, pid2 = out["papers"].ids["2102.00001"], out["papers"].ids["2102.00002"]
    yan, muller = out["rids"]["21021"], out["rids"]["21022"]
    assert out["papers"].touched.papers == {pid1, pid2}
    assert out["touched"].papers == {pid1, pid2}
    # New researchers linked to papers: what names anyone stays as it was (only new institutions may be renamed).
    assert out["touched"].researcher_figures == {yan, muller} and not out["touched"].researchers
    assert out["touched"].all_institutions() >= set(out["iids"].values())

    # A citation update touches its paper and the people on it, and nothing else.
    async with conn.transaction():
        t = await update_citations(conn, [CitationRecord("2102.00002", 3, "openalex")])
    assert t.papers == {pid2} and t.researcher_figures == {muller} and t.institution_figures == {out["iids"][ROR_B]}
    assert not t.researchers and not t.institutions

    # Replacing one researcher's works touches that researcher only; the same list again touches none.
    works = {yan: [WorkRecord("s2", "w9", "Z", 2020, 1)]}
    async with conn.transaction():
        assert (await replace_researcher_works(conn, works)).researcher_figures == {yan}
        assert not await replace_researcher_works(conn, works)


async def test_reharvest_with_the_same_names_keeps_every_match(conn: asyncpg.Connection) -> None:
    out = await write_everything(conn, "2103")
    yan, muller = out["rids"]["21031"], out["rids"]["21032"]
    async with conn.transaction():
        res = await upsert_papers(
            conn,
            [paper("2103.00001", ["Wumo Yan", "Jana Müller", "ATLAS Collaboration"], version=3, title="New title")],
        )
    assert res.updated == 1
    assert await researcher_ids_of(conn, "2103.00001") == [
        (1, "Wumo Yan", yan),
        (2, "Jana Müller", muller),
        (3, "ATLAS Collaboration", None),
    ]
    row = await conn.fetchrow(
        "SELECT version, title, cited_by_count, s2_paper_id, matched_count, author_count FROM papers"
        " WHERE arxiv_id = $1",
        "2103.00001",
    )
    assert dict(row) == {
        "version": 3,
        "title": "New title",
        "cited_by_count": 12,  # enrichment survives a re-harvest
        "s2_paper_id": "s22103",
        "matched_count": 2,
        "author_count": 3,
    }
    inst = await conn.fetchval(
        "SELECT count(*) FROM authorship_institutions ai JOIN papers p ON p.id = ai.paper_id WHERE p.arxiv_id = $1",
        "2103.00001",
    )
    assert inst == 3


async def test_a_revision_naming_an_affiliation_touches_the_paper_and_no_ones_figures(
    conn: asyncpg.Connection,
) -> None:
    # arXivRaw's `Jana Müller (Wien)`: the text the page shows changes; no link, count or figure does, so no
    # researcher's figures are recomputed for it (a well-cited paper's authors are the most prolific).
    out = await write_everything(conn, "2109")
    yan, muller = out["rids"]["21091"], out["rids"]["21092"]
    revised = replace(
        paper("2109.00001", ["Wumo Yan", "Jana Müller", "ATLAS Collaboration"], version=3),
        authors=[
            AuthorRecord(1, "Wumo Yan"),
            AuthorRecord(2, "Jana Müller", "Universität Wien"),
            AuthorRecord(3, "ATLAS Collaboration", None, True),
        ],
    )
    async with conn.transaction():
        res = await upsert_papers(conn, [revised])
    pid = res.ids["2109.00001"]
    assert res.touched.papers == {pid} and res.touched.paper_keys == {"2109.00001"}
    assert not res.touched.researcher_figures and not res.touched.institution_figures
    assert await researcher_ids_of(conn, "2109.00001") == [
        (1, "Wumo Yan", yan),
        (2, "Jana Müller", muller),
        (3, "ATLAS Collaboration", None),
    ]
    assert await conn.fetchval("SELECT affiliation FROM authorships WHERE paper_id = $1 AND position = 2", pid) == (
        "Universität Wien"
    )

    # The same affiliation again, no new version: nothing to write, nothing touched.
    async with conn.transaction():
        res = await upsert_papers(conn, [revised])
    assert not res.touched


async def test_reharvest_with_changed_names_keeps_the_matches_it_can(conn: asyncpg.Connection) -> None:
    out = await write_everything(conn, "2104")
    yan, muller = out["rids"]["21041"], out["rids"]["21042"]
    # A new first author shifts everyone; Müller is now spelled without the umlaut; the collaboration left.
    async with conn.transaction():
        res = await upsert_papers(conn, [paper("2104.00001", ["Ada Obi", "Wumo Yan", "Jana Muller"], version=3)])
    assert await researcher_ids_of(conn, "2104.00001") == [
        (1, "Ada Obi", None),
        (2, "Wumo Yan", yan),
        (3, "Jana Muller", muller),
    ]
    pid = res.ids["2104.00001"]
    positions = await conn.fetch(
        "SELECT position, institution_id FROM authorship_institutions WHERE paper_id = $1 ORDER BY 1, 2", pid
    )
    assert [(r["position"], r["institution_id"]) for r in positions] == [
        (2, out["iids"][ROR_A]),
        (3, out["iids"][ROR_A]),
        (3, out["iids"][ROR_B]),
    ]
    assert await conn.fetchval("SELECT matched_count FROM papers WHERE id = $1", pid) == 2
    assert res.touched.papers == {pid} and {yan, muller} <= res.touched.researcher_figures

    # Dropping an author drops their match, and says so.
    async with conn.transaction():
        res = await upsert_papers(conn, [paper("2104.00001", ["Ada Obi", "Wumo Yan"], version=4)])
    assert await researcher_ids_of(conn, "2104.00001") == [(1, "Ada Obi", None), (2, "Wumo Yan", yan)]
    assert muller in res.touched.researcher_figures
    assert await conn.fetchval("SELECT matched_count FROM papers WHERE id = $1", pid) == 1


async def test_an_older_version_never_overwrites_a_newer_one(conn: asyncpg.Connection) -> None:
    await write_everything(conn, "2105")
    async with conn.transaction():
        res = await upsert_papers(conn, [paper("2105.00001", ["Someone Else"], version=1, title="Old title")])
    assert (res.inserted, res.updated, res.unchanged) == (0, 0, 1)
    assert not res.touched
    row = await conn.fetchrow("SELECT version, title FROM papers WHERE arxiv_id = '2105.00001'")
    assert (row["version"], row["title"]) == (2, "Throughput prediction of SGD")
    assert [n for _, n, _ in await researcher_ids_of(conn, "2105.00001")] == [
        "Wumo Yan",
        "Jana Müller",
        "ATLAS Collaboration",
    ]


async def test_a_collaboration_is_never_matched_to_a_researcher(conn: asyncpg.Connection) -> None:
    out = await write_everything(conn, "2106")
    async with conn.transaction():
        res = await apply_authorship_matches(
            conn, [AuthorshipMatch("2106.00001", 3, "21061", [ROR_A])], out["rids"], out["iids"]
        )
    assert res.applied == 0
    assert (await researcher_ids_of(conn, "2106.00001"))[2] == (3, "ATLAS Collaboration", None)

    # An authorship that turns out to be a collaboration (same name, now flagged) loses its researcher.
    flagged = replace(
        paper("2106.00002", ["Jana Müller"], title="On Hecke operators"),
        authors=[AuthorRecord(1, "Jana Müller", None, True)],
    )
    async with conn.transaction():
        res = await upsert_papers(conn, [flagged])
    assert await researcher_ids_of(conn, "2106.00002") == [(1, "Jana Müller", None)]
    assert out["rids"]["21062"] in res.touched.researcher_figures
    assert await conn.fetchval("SELECT matched_count FROM papers WHERE arxiv_id = '2106.00002'") == 0


async def test_researchers_merge_by_any_identifier_and_keep_both_sources_figures(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        first = await upsert_researchers(
            conn, [ResearcherRecord("Yuki Takahashi", openalex_id="A77", openalex_h_index=9, openalex_works_count=40)]
        )
        second = await upsert_researchers(
            conn, [ResearcherRecord("Yuki Takahashi", s2_author_id="77", openalex_id="A77", s2_h_index=8)]
        )
        third = await upsert_researchers(
            conn, [ResearcherRecord("Y. Takahashi", openalex_id="A77", openalex_h_index=10)]
        )
    assert first["A77"] == second["77"] == second["A77"] == third["A77"]
    row = await conn.fetchrow("SELECT * FROM researchers WHERE id = $1", first["A77"])
    assert (row["s2_author_id"], row["s2_h_index"], row["openalex_h_index"], row["openalex_works_count"]) == (
        "77",
        8,
        10,
        40,
    )
    # The S2 name is kept over another source's spelling; the slug follows the name.
    assert (row["name"], row["name_slug"]) == ("Yuki Takahashi", "yuki-takahashi")
    assert row["s2_updated_at"] is not None and row["openalex_updated_at"] is not None


async def test_a_source_list_replaces_only_that_sources_works(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        rid = (await upsert_researchers(conn, [ResearcherRecord("Ivan Petrov", s2_author_id="8801")]))["8801"]
        await replace_researcher_works(
            conn,
            {
                rid: [
                    WorkRecord("s2", "a", "A", 2001, 1),
                    WorkRecord("s2", "b", "B", 2002, 2),
                    WorkRecord("openalex", "W", "A", 2001, 1),
                ]
            },
        )
        await replace_researcher_works(
            conn, {rid: [WorkRecord("s2", "b", "B", 2002, 3), WorkRecord("s2", "c", "C", 2003, 0)]}
        )
    rows = await conn.fetch(
        "SELECT source, external_id, citation_count FROM researcher_works WHERE researcher_id = $1 ORDER BY 1, 2", rid
    )
    assert [tuple(r) for r in rows] == [("openalex", "W", 1), ("s2", "b", 3), ("s2", "c", 0)]


async def test_writes_refuse_to_run_outside_a_transaction(conn: asyncpg.Connection) -> None:
    with pytest.raises(RuntimeError, match="transaction"):
        await upsert_papers(conn, [paper("2107.00001", ["A B"])])
    assert await conn.fetchval("SELECT count(*) FROM papers WHERE arxiv_id = '2107.00001'") == 0


async def test_malformed_ror_is_refused(conn: asyncpg.Connection) -> None:
    with pytest.raises(ValueError, match="ROR"):
        async with conn.transaction():
            await upsert_institutions(conn, [InstitutionRecord("05gq02988", "Bad checksum")])


async def test_a_match_naming_institutions_replaces_that_authorships_set(conn: asyncpg.Connection) -> None:
    out = await write_everything(conn, "2108")
    pid = out["papers"].ids["2108.00001"]
    a, b = out["iids"][ROR_A], out["iids"][ROR_B]
    async with conn.transaction():
        res = await apply_authorship_matches(
            conn,
            [AuthorshipMatch("2108.00001", 2, "21082", [ROR_B]), AuthorshipMatch("2108.00001", 1, "21081", [])],
            out["rids"],
            out["iids"],
        )
    links = await conn.fetch(
        "SELECT position, institution_id FROM authorship_institutions WHERE paper_id = $1 ORDER BY 1, 2", pid
    )
    # Position 2 loses A and keeps B; position 1's match names none, so it keeps A.
    assert [tuple(r) for r in links] == [(1, a), (2, b)]
    assert res.applied == 0 and res.touched.papers == {pid} and a in res.touched.institution_figures


async def test_a_batch_of_new_and_stored_papers_writes_each_kind_whole(conn: asyncpg.Connection) -> None:
    # New papers' versions and authorships are COPYed straight in; stored papers' are compared with what is there.
    out = await write_everything(conn, "2111")
    yan = out["rids"]["21111"]
    new = paper("2111.00003", ["Ada Lovelace", "Alan Turing"], version=2)
    new.versions.append(VersionRecord(2, T2, 120, "D"))  # a record that lists a version twice
    async with conn.transaction():
        res = await upsert_papers(
            conn,
            [paper("2111.00001", ["Wumo Yan", "Grace Hopper"], version=3), new],
        )
    assert (res.inserted, res.updated) == (1, 1)
    assert await researcher_ids_of(conn, "2111.00001") == [(1, "Wumo Yan", yan), (2, "Grace Hopper", None)]
    assert await researcher_ids_of(conn, "2111.00003") == [(1, "Ada Lovelace", None), (2, "Alan Turing", None)]
    versions = await conn.fetch(
        "SELECT p.arxiv_id, v.version, v.size_kb FROM paper_versions v JOIN papers p ON p.id = v.paper_id"
        " WHERE p.arxiv_id LIKE '2111.%' ORDER BY 1, 2"
    )
    assert [tuple(r) for r in versions] == [
        ("2111.00001", 1, None),
        ("2111.00001", 2, None),
        ("2111.00001", 3, None),
        ("2111.00002", 1, None),
        ("2111.00003", 1, None),
        ("2111.00003", 2, 120),  # the last listing of a version wins
    ]
