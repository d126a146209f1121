"""The ingest never undoes an applied correction: corrections applied to a harvested and enriched archive (recorded
upstream bodies), then the archive harvested and enriched again from scratch, with Semantic Scholar merging two of
its author ids meanwhile: every correction holds, and the writes it was kept from count as conflicts. A new version
whose author list no longer carries a corrected author over by name finds them again by the corrected name."""

from __future__ import annotations

from datetime import UTC, datetime

import asyncpg

from db.queries.corrections import CorrectionRow
from db.queries.ingest_state import fetch_ingest_status
from db.queries.writes.corrections import (
    CorrectionLimits,
    CorrectionRequest,
    decide_correction,
    submit_correction,
)
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import upsert_researchers
from db.records import AuthorRecord, PaperRecord, ResearcherRecord, Touched, VersionRecord
from ingest.pipeline import harvest_arxiv
from tests.ingest.conftest import FakeClock, FakeOAI
from tests.ingest.test_enrich import run_enrich
from tests.ingest.upstreams import CAREERS, S2_CHEMCROW, S2_PAPERQA, SAM_COX, WHITE, FakeScholarly, enrich_archive_page

PAPERQA, CHEMCROW = "2312.07559", "2304.05376"
LALA = S2_PAPERQA["authors"][0]["authorId"]
SCHILTER = S2_CHEMCROW["authors"][2]["authorId"]


async def ids_by_s2(conn: asyncpg.Connection) -> dict[str, int]:
    return {
        r[0]: r[1] for r in await conn.fetch("SELECT s2_author_id, id FROM researchers WHERE s2_author_id IS NOT NULL")
    }


async def linked(conn: asyncpg.Connection, arxiv_id: str) -> list[int | None]:
    rows = await conn.fetch(
        "SELECT a.researcher_id FROM authorships a JOIN papers p ON p.id = a.paper_id"
        " WHERE p.arxiv_id = $1 ORDER BY a.position",
        arxiv_id,
    )
    return [r[0] for r in rows]


async def paper_id(conn: asyncpg.Connection, arxiv_id: str) -> int:
    found: int = await conn.fetchval("SELECT id FROM papers WHERE arxiv_id = $1", arxiv_id)
    return found


async def correct(
    conn: asyncpg.Connection,
    kind: str,
    researchers: list[int],
    papers: list[int] = (),  # type: ignore[assignment]
    *,
    position: int | None = None,
    author_name: str | None = None,
) -> CorrectionRow:
    """A reader asks (owning nothing: it waits), an operator approves."""
    request = CorrectionRequest(
        kind, f"{kind}:{researchers}:{papers}", tuple(researchers), tuple(papers), position, author_name
    )
    submitted = await submit_correction(conn, "reader-1", request, orcid=None, limits=CorrectionLimits(100, 100))
    assert submitted.correction is not None and submitted.correction.status == "PENDING"
    decided = await decide_correction(conn, submitted.correction.id, approve=True, operator="test")
    assert decided.correction.status == "APPLIED"
    return decided.correction


def h_index(citations: list[int]) -> int:
    ranked = sorted(citations, reverse=True)
    return sum(1 for i, c in enumerate(ranked) if c >= i + 1)


async def test_harvest_and_enrichment_again_keep_every_correction(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock))
    assert (await run_enrich(conn, FakeScholarly(), clock)).failed == 0
    s2 = await ids_by_s2(conn)
    chemcrow = await paper_id(conn, CHEMCROW)
    white_at = next(i for i, a in enumerate(S2_CHEMCROW["authors"]) if a["authorId"] == WHITE)

    # Sam Cox is not ChemCrow's author; White's ChemCrow is another White's; Lála and Schilter are one person.
    await correct(conn, "NOT_ME", [s2[SAM_COX]], [chemcrow])
    split = await correct(conn, "SPLIT", [s2[WHITE]], [chemcrow])
    merge = await correct(conn, "MERGE", [s2[LALA], s2[SCHILTER]])
    other_white, survivor = split.new_researcher_id, merge.new_researcher_id
    assert other_white is not None and survivor is not None
    absorbed = ({s2[LALA], s2[SCHILTER]} - {survivor}).pop()
    absorbed_s2 = LALA if absorbed == s2[LALA] else SCHILTER
    kept = {CHEMCROW: await linked(conn, CHEMCROW)}
    assert s2[SAM_COX] not in kept[CHEMCROW] and kept[CHEMCROW][white_at] == other_white
    researchers = await conn.fetchval("SELECT count(*) FROM researchers")

    # Everything again, from scratch: the same records harvested, every paper enriched anew; and S2 has merged
    # White's author id into Sam Cox's meanwhile (it answers White's id with Sam Cox's record).
    await conn.execute("UPDATE papers SET enriched_at = NULL")
    await conn.execute("DELETE FROM ingest_checkpoints")
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(FakeClock()))
    assert (await run_enrich(conn, FakeScholarly(merged={WHITE: SAM_COX}), clock)).failed == 0

    after = await linked(conn, CHEMCROW)
    sam = (await ids_by_s2(conn))[SAM_COX]
    assert sam == s2[SAM_COX]  # White's profile went into Sam Cox's
    assert sam not in after, "NOT_ME: ChemCrow is never Sam Cox's again, whichever id S2 gives"
    assert after[white_at] == other_white, "SPLIT: ChemCrow's White stays the other White"
    # MERGE: the id merged away is never made a profile again; its paper stays with the survivor.
    assert absorbed_s2 not in await ids_by_s2(conn)
    merged_papers = {PAPERQA if absorbed_s2 == LALA else CHEMCROW}
    for arxiv_id in merged_papers:
        assert survivor in await linked(conn, arxiv_id)
    assert await conn.fetchval("SELECT count(*) FROM researchers") == researchers - 1  # White's, merged by S2

    # Sam Cox's figures leave ChemCrow out, S2's list of his works included; White's works came with his profile.
    figures = await conn.fetchrow("SELECT paper_count, h_index, works_count FROM researchers WHERE id = $1", sam)
    works = {pid: c for who in (SAM_COX, WHITE) for pid, ax, _, c in CAREERS[who] if ax != CHEMCROW}
    assert (figures["paper_count"], figures["works_count"]) == (1, len(works))
    assert figures["h_index"] == h_index(list(works.values()))

    # The writes kept from undoing them are counted, per correction and in the ingest's status (whether the matching
    # proposes a link the correction refuses depends on S2's merged list: the next test counts one for sure).
    counts = {r["id"]: r["conflicts"] for r in await conn.fetch("SELECT id, conflicts FROM corrections")}
    status = await fetch_ingest_status(conn)
    assert status.corrections is not None and status.corrections.conflicts == sum(counts.values())


async def test_a_semantic_scholar_merge_never_puts_a_not_me_paper_back(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock))
    await run_enrich(conn, FakeScholarly(), clock)
    s2 = await ids_by_s2(conn)
    not_me = await correct(conn, "NOT_ME", [s2[SAM_COX]], [await paper_id(conn, CHEMCROW)])
    white_at = next(i for i, a in enumerate(S2_CHEMCROW["authors"]) if a["authorId"] == WHITE)
    # Enriched again as it was: S2 still lists Sam Cox on ChemCrow; the link it proposes is kept out, and counted.
    await conn.execute("UPDATE papers SET enriched_at = NULL")
    await run_enrich(conn, FakeScholarly(), clock)
    assert s2[SAM_COX] not in await linked(conn, CHEMCROW)
    assert await conn.fetchval("SELECT conflicts FROM corrections WHERE id = $1", not_me.id) >= 1
    # S2 merges White into Sam Cox: White's ChemCrow would become Sam Cox's, which a correction said it is not.
    await conn.execute("UPDATE papers SET enriched_at = NULL")
    await run_enrich(conn, FakeScholarly(merged={WHITE: SAM_COX}), clock)
    after = await linked(conn, CHEMCROW)
    assert s2[SAM_COX] not in after and after[white_at] is None
    assert s2[SAM_COX] in await linked(conn, PAPERQA)


def _record(arxiv_id: str, version: int, names: list[str]) -> PaperRecord:
    when = datetime(2024, 5, 1, tzinfo=UTC)
    return PaperRecord(
        arxiv_id,
        version,
        "A paper",
        "An abstract.",
        ["cs.LG"],
        when,
        when,
        [AuthorRecord(i, n) for i, n in enumerate(names, 1)],
        [VersionRecord(v, when) for v in range(1, version + 1)],
    )


async def test_a_new_version_finds_the_corrected_author_again_by_name(conn: asyncpg.Connection) -> None:
    # Two authors named J. Smith: carrying links over by name cannot tell them apart in a new version.
    async with conn.transaction():
        written = await upsert_papers(conn, [_record("2405.00001", 1, ["J. Smith", "A. Bee", "J. Smith"])])
    pid = written.ids["2405.00001"]
    smith = await conn.fetchval(
        "INSERT INTO researchers (name, name_slug) VALUES ('Jane Smith', 'jane-smith') RETURNING id"
    )
    await correct(conn, "IS_ME", [smith], [pid], position=3, author_name="J. Smith")
    assert await linked(conn, "2405.00001") == [None, None, smith]
    # Version 2 drops the other J. Smith: the corrected one is found again where their name now is.
    async with conn.transaction():
        await upsert_papers(conn, [_record("2405.00001", 2, ["A. Bee", "J. Smith"])], touched=Touched())
    assert await linked(conn, "2405.00001") == [None, smith]
    # A version without the name at all cannot place them: the correction counts a conflict.
    async with conn.transaction():
        await upsert_papers(conn, [_record("2405.00001", 3, ["A. Bee", "Q. Other"])], touched=Touched())
    assert await linked(conn, "2405.00001") == [None, None]
    assert await conn.fetchval("SELECT conflicts FROM corrections WHERE kind = 'IS_ME'") == 1


async def test_a_record_under_an_s2_id_merged_away_leads_to_the_survivor(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    """After a reader's merge, S2 still names the profile merged away on new papers: they go to the survivor, whose
    name and figures stay its own."""
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock))
    await run_enrich(conn, FakeScholarly(), clock)
    s2 = await ids_by_s2(conn)
    survivor = (await correct(conn, "MERGE", [s2[LALA], s2[SCHILTER]])).new_researcher_id
    assert survivor is not None
    absorbed_s2 = LALA if survivor == s2[SCHILTER] else SCHILTER
    before = await conn.fetchrow("SELECT name, s2_h_index FROM researchers WHERE id = $1", survivor)
    async with conn.transaction():
        record = ResearcherRecord("Another Spelling", s2_author_id=absorbed_s2, s2_h_index=99)
        ids = await upsert_researchers(conn, [record])
    assert ids[absorbed_s2] == survivor
    assert await conn.fetchrow("SELECT name, s2_h_index FROM researchers WHERE id = $1", survivor) == before
    assert absorbed_s2 not in await ids_by_s2(conn)
