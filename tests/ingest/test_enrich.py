from __future__ import annotations

import asyncpg
import httpx

from ingest.clients.http import RetryPolicy
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.pacing import DutyCycle
from ingest.pipeline import enrich, harvest_arxiv
from ingest.progress import Summary
from tests.ingest.conftest import FIXTURES, FakeClock, FakeOAI
from tests.ingest.upstreams import LALA, SAM_COX, WHITE, FakeScholarly, enrich_archive_page

OA_BUDGET = (FIXTURES / "openalex/error_429_REPORTED_insufficient-budget_2026.json").read_bytes()


async def harvest(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock))


def clients(fake: FakeScholarly, clock: FakeClock) -> tuple[SemanticScholarClient, OpenAlexClient]:
    transport = httpx.MockTransport(fake)
    policy = RetryPolicy(max_attempts=4)
    s2 = SemanticScholarClient("https://s2.test/graph/v1", transport=transport, clock=clock, policy=policy)  # type: ignore[arg-type]
    oa = OpenAlexClient("https://api.openalex.test", transport=transport, clock=clock, policy=policy)  # type: ignore[arg-type]
    return s2, oa


async def run_enrich(conn: asyncpg.Connection, fake: FakeScholarly, clock: FakeClock, **kw: object) -> Summary:
    s2, oa = clients(fake, clock)
    try:
        return await enrich(conn, s2, oa, **kw)  # type: ignore[arg-type]
    finally:
        await s2.aclose()
        await oa.aclose()


async def authorships(conn: asyncpg.Connection) -> list[tuple[object, ...]]:
    rows = await conn.fetch(
        "SELECT p.arxiv_id, a.position, a.name, r.s2_author_id, a.is_collaboration,"
        " array(SELECT i.ror_id FROM authorship_institutions ai JOIN institutions i ON i.id = ai.institution_id"
        "       WHERE ai.paper_id = a.paper_id AND ai.position = a.position ORDER BY 1) AS rors"
        " FROM authorships a JOIN papers p ON p.id = a.paper_id LEFT JOIN researchers r ON r.id = a.researcher_id"
        " ORDER BY p.arxiv_id, a.position"
    )
    return [tuple(r) for r in rows]


async def snapshot(conn: asyncpg.Connection) -> dict[str, list[tuple[object, ...]]]:
    return {
        "authorships": await authorships(conn),
        "researchers": [
            tuple(r)
            for r in await conn.fetch(
                "SELECT id, name, s2_author_id, openalex_id, orcid, s2_paper_count, s2_citation_count, s2_h_index,"
                " openalex_works_count, openalex_h_index, paper_count, h_index, citation_count"
                " FROM researchers ORDER BY id"
            )
        ],
        "works": [tuple(r) for r in await conn.fetch("SELECT * FROM researcher_works ORDER BY 1, 2, 3")],
        "papers": [
            tuple(r)
            for r in await conn.fetch(
                "SELECT arxiv_id, cited_by_count, cited_by_source, s2_paper_id, openalex_id, matched_count"
                " FROM papers ORDER BY arxiv_id"
            )
        ],
        "institutions": [
            tuple(r) for r in await conn.fetch("SELECT id, ror_id, name, country, type FROM institutions")
        ],
        "links": [tuple(r) for r in await conn.fetch("SELECT * FROM researcher_institutions ORDER BY 1, 2")],
    }


async def test_enrich_matches_researchers_citations_and_institutions(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest(conn, clock)
    fake = FakeScholarly()
    summary = await run_enrich(conn, fake, clock)
    assert summary.seen == 3 and summary.failed == 0 and summary.stopped is None

    rows = {(r[0], r[1]): r for r in await authorships(conn)}
    # The same S2 author on two papers is one researcher.
    assert rows[("2312.07559", 4)][3] == SAM_COX and rows[("2304.05376", 2)][3] == SAM_COX
    assert await conn.fetchval("SELECT count(*) FROM researchers WHERE s2_author_id = $1", SAM_COX) == 1
    # TeX name `L\'ala` against S2's "Jakub L'ala".
    assert rows[("2312.07559", 1)][2] == "Jakub Lála" and rows[("2312.07559", 1)][3] == LALA
    # S2 has no identity for Baldassari (authorId null): unmatched, raw name kept.
    assert rows[("2304.05376", 4)][2] == "Carlo Baldassari" and rows[("2304.05376", 4)][3] is None
    # Collaborations are never matched; an author S2 knows only by a null id stays unmatched.
    assert rows[("2401.00001", 1)][4] is True and rows[("2401.00001", 1)][3] is None
    assert rows[("2401.00001", 2)][3] is None
    assert await conn.fetchval("SELECT count(*) FROM researchers WHERE s2_author_id = '9999'") == 0

    # OpenAlex ids and ORCIDs attach where OpenAlex's authorship agrees.
    lala = await conn.fetchrow("SELECT openalex_id, orcid FROM researchers WHERE s2_author_id = $1", LALA)
    assert lala is not None and tuple(lala) == ("A5092171854", "0000-0002-5424-5260")
    white = await conn.fetchrow(
        "SELECT openalex_id, orcid, openalex_h_index, s2_h_index FROM researchers WHERE s2_author_id = $1", WHITE
    )
    assert white is not None and tuple(white) == ("A5103115676", "0000-0002-6647-3965", 5, 2)

    # The journal duplicate never replaces the preprint: the paper's OpenAlex id is the preprint's.
    paper = await conn.fetchrow(
        "SELECT openalex_id, cited_by_count, cited_by_source, matched_count FROM papers WHERE arxiv_id = '2304.05376'"
    )
    assert paper is not None and tuple(paper) == ("W4365597205", 500, "s2", 5)
    # S2's corpus id is kept: `paper(id: "CorpusId:...")` finds the paper.
    corpus = "SELECT arxiv_id, s2_corpus_id FROM papers WHERE s2_corpus_id IS NOT NULL ORDER BY 1"
    assert [tuple(r) for r in await conn.fetch(corpus)] == [("2304.05376", 258059792), ("2312.07559", 266191420)]
    # Institutions by ROR, kept with OpenAlex's type (`funder` for a university), linked to
    # authorships and researchers; the preprint lists none, so the journal version's fill in.
    assert rows[("2304.05376", 2)][5] == ["022kthw22"]
    assert rows[("2304.05376", 1)][5] == ["02s376052"]
    rochester = await conn.fetchrow("SELECT name, country, type FROM institutions WHERE ror_id = '022kthw22'")
    assert rochester is not None and tuple(rochester) == ("University of Rochester", "US", "funder")
    linked = await conn.fetchval(
        "SELECT count(*) FROM researcher_institutions ri JOIN researchers r ON r.id = ri.researcher_id"
        " JOIN institutions i ON i.id = ri.institution_id WHERE r.s2_author_id = $1 AND i.ror_id = '022kthw22'",
        SAM_COX,
    )
    assert linked == 1

    # Whole-career works, paged by offset/next.
    works = await conn.fetch(
        "SELECT w.arxiv_id, w.citation_count FROM researcher_works w JOIN researchers r ON r.id = w.researcher_id"
        " WHERE r.s2_author_id = $1 AND w.source = 's2' ORDER BY w.citation_count DESC",
        SAM_COX,
    )
    assert [tuple(w) for w in works] == [("2304.05376", 500), ("2312.07559", 111), (None, 7), (None, 1)]
    author_pages = [r for r in fake.s2_requests if r.url.path.endswith(f"/author/{SAM_COX}/papers")]
    assert [r.url.params["offset"] for r in author_pages] == ["0", "2"]
    # Only the fields the ingest uses are asked for.
    batch = next(r for r in fake.s2_requests if r.url.path.endswith("/paper/batch"))
    assert batch.url.params["fields"] == "externalIds,citationCount,authors"
    assert await conn.fetchval("SELECT count(*) FROM papers WHERE enriched_at IS NULL") == 0


async def test_enrich_is_idempotent(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest(conn, clock)
    await run_enrich(conn, FakeScholarly(), clock)
    first = await snapshot(conn)
    again = await run_enrich(conn, FakeScholarly(), clock)
    assert again.seen == 0  # nothing left in the queue
    await conn.execute("UPDATE papers SET enriched_at = NULL")
    await run_enrich(conn, FakeScholarly(), clock)
    assert await snapshot(conn) == first
    # Re-harvesting the same pages keeps every match.
    await harvest(conn, clock)
    assert await snapshot(conn) == first


async def test_newest_first_and_limit(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest(conn, clock)
    fake = FakeScholarly()
    summary = await run_enrich(conn, fake, clock, limit=2, batch_size=1)
    assert summary.seen == 2
    asked = [r.content for r in fake.s2_requests if r.url.path.endswith("/paper/batch")]
    assert asked == [b'{"ids":["ARXIV:2401.00001"]}', b'{"ids":["ARXIV:2312.07559"]}']
    left = await conn.fetch("SELECT arxiv_id FROM papers WHERE enriched_at IS NULL")
    assert [r[0] for r in left] == ["2304.05376"]


async def test_a_paced_enrichment_pauses_after_each_batch(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest(conn, clock)
    pauses: list[float] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    summary = await run_enrich(conn, FakeScholarly(), clock, batch_size=1, pacing=DutyCycle(0.5, sleep=pause))
    assert summary.seen == 3 and summary.failed == 0
    # One pause a batch, as long as its writes took (half the time writing).
    assert len(pauses) == 3 and all(p > 0 for p in pauses)
    assert await conn.fetchval("SELECT count(*) FROM papers WHERE enriched_at IS NULL") == 0


async def test_s2_429_without_retry_after_backs_off(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest(conn, clock)
    body = (FIXTURES / "s2/error_429_REPORTED_2024-2026.json").read_bytes()
    fake = FakeScholarly(s2_script={0: httpx.Response(429, content=body), 1: httpx.Response(429, content=body)})
    summary = await run_enrich(conn, fake, clock)
    assert summary.retries == 2 and summary.failed == 0
    assert len(clock.sleeps) >= 2 and clock.sleeps[1] > clock.sleeps[0] / 2  # growing, jittered waits
    assert await conn.fetchval("SELECT count(*) FROM papers WHERE enriched_at IS NULL") == 0


async def test_openalex_budget_exhausted_stops_cleanly_keeping_work(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest(conn, clock)
    # Batch 1 (the newest paper): works + no authors. Batch 2's works request hits the spent budget.
    fake = FakeScholarly(
        oa_script={
            1: httpx.Response(
                429, content=OA_BUDGET, headers={"X-RateLimit-Remaining-USD": "0", "Retry-After": "30000"}
            )
        }
    )
    summary = await run_enrich(conn, fake, clock, batch_size=1)
    assert summary.stopped and "budget" in summary.stopped
    assert all(s <= 1.0 for s in clock.sleeps)  # only S2 pacing: no wait until midnight, no retry loop
    assert len(fake.oa_requests) == 2
    enriched = await conn.fetch("SELECT arxiv_id FROM papers WHERE enriched_at IS NOT NULL")
    assert [r[0] for r in enriched] == ["2401.00001"]
    # The next run (budget back) picks up the rest.
    summary = await run_enrich(conn, FakeScholarly(), clock)
    assert summary.seen == 2 and summary.stopped is None


async def test_malformed_upstream_answer_fails_the_batch_not_the_run(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest(conn, clock)
    html = (FIXTURES / "openalex/error_404_work_not_found_HTML_2025-11-04.html").read_bytes()
    fake = FakeScholarly(s2_script={0: httpx.Response(404, content=html, headers={"Content-Type": "text/html"})})
    summary = await run_enrich(conn, fake, clock, batch_size=1)
    assert summary.failed == 1 and summary.stopped is None
    left = await conn.fetch("SELECT arxiv_id FROM papers WHERE enriched_at IS NULL")
    assert [r[0] for r in left] == ["2401.00001"]  # stays queued for the next run


async def test_papers_the_sources_do_not_know_yet_stay_queued(conn: asyncpg.Connection, clock: FakeClock) -> None:
    from datetime import UTC, datetime, timedelta

    from tests.ingest.conftest import list_records_page
    from tests.ingest.upstreams import arxiv_raw

    now = datetime.now(UTC).replace(microsecond=0)
    page = list_records_page(
        [
            arxiv_raw("2611.00001", "Brand new", "New Author", now - timedelta(days=1)),
            arxiv_raw("2101.00001", "Long ignored", "Old Author", now - timedelta(days=700)),
        ],
        "",
    )
    await harvest_arxiv(conn, FakeOAI(first=page).client(clock))
    summary = await run_enrich(conn, FakeScholarly(), clock)
    assert summary.seen == 2 and summary.skipped == 2
    queued = await conn.fetch("SELECT arxiv_id FROM papers WHERE enriched_at IS NULL")
    # S2 and OpenAlex index new papers days later: the new one is tried again next run; the old one is given up.
    assert [r[0] for r in queued] == ["2611.00001"]


async def test_reharvest_that_drops_an_author_refreshes_their_paper_count(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    from datetime import UTC, datetime

    from tests.ingest.conftest import list_records_page
    from tests.ingest.upstreams import arxiv_raw

    await harvest(conn, clock)
    await run_enrich(conn, FakeScholarly(), clock)
    count = "SELECT paper_count FROM researchers WHERE s2_author_id = $1"
    assert await conn.fetchval(count, SAM_COX) == 2  # PaperQA and ChemCrow
    # arXiv's new version of ChemCrow lists its authors without Sam Cox.
    revised = arxiv_raw(
        "2304.05376",
        "ChemCrow: Augmenting large-language models with chemistry tools",
        "Andres M. Bran, Oliver Schilter, Carlo Baldassari, Andrew D. White, Philippe Schwaller",
        datetime(2023, 4, 11, 12, 0, tzinfo=UTC),
    )
    await harvest_arxiv(conn, FakeOAI(first=list_records_page([revised], "")).client(clock))
    assert await conn.fetchval(count, SAM_COX) == 1
    assert await conn.fetchval(count, WHITE) == 2  # still on both, at a new position


async def test_an_author_no_source_identifies_still_counts_for_their_institution(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest(conn, clock)
    await run_enrich(conn, FakeScholarly(), clock)
    rows = {(r[0], r[1]): r for r in await authorships(conn)}
    # Baldassari: S2 has no id for him, OpenAlex's journal version places him at IBM Research - Zurich.
    assert rows[("2304.05376", 4)][3] is None and rows[("2304.05376", 4)][5] == ["02js37d36"]
    ibm = await conn.fetchrow("SELECT name, paper_count, researcher_count FROM institutions WHERE ror_id = '02js37d36'")
    assert ibm is not None and tuple(ibm) == ("IBM Research - Zurich", 1, 0)


async def test_new_institutions_come_with_their_acronyms_and_other_names(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest(conn, clock)
    fake = FakeScholarly()
    await run_enrich(conn, fake, clock)
    rochester = await conn.fetchrow("SELECT aliases, openalex_id FROM institutions WHERE ror_id = '022kthw22'")
    assert rochester is not None and tuple(rochester) == (["UR"], "I5388228")
    asked = [r for r in fake.oa_requests if r.url.path == "/institutions"]
    assert len(asked) == 1 and "display_name_acronyms" in asked[0].url.params["select"]
    # Institutions already stored are not asked for again, and a later record without aliases keeps them.
    await conn.execute("UPDATE papers SET enriched_at = NULL")
    again = FakeScholarly()
    await run_enrich(conn, again, clock)
    assert not [r for r in again.oa_requests if r.url.path == "/institutions"]
    assert await conn.fetchval("SELECT aliases FROM institutions WHERE ror_id = '022kthw22'") == ["UR"]


async def test_authors_s2_merged_become_one_researcher_and_the_old_one_redirects(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest(conn, clock)
    # S2 first knows Sam Cox twice: ChemCrow names a duplicate profile.
    await run_enrich(conn, FakeScholarly(author_ids={("2304.05376", 1): "5555"}), clock)
    duplicate = await conn.fetchval("SELECT id FROM researchers WHERE s2_author_id = '5555'")
    survivor = await conn.fetchval("SELECT id FROM researchers WHERE s2_author_id = $1", SAM_COX)
    assert duplicate is not None and survivor is not None and duplicate != survivor
    # Then S2 merges the duplicate into Sam Cox: it answers the old id with his record. ChemCrow is read again.
    await conn.execute("UPDATE papers SET enriched_at = NULL WHERE arxiv_id = '2304.05376'")
    merged = FakeScholarly(author_ids={("2304.05376", 1): "5555"}, merged={"5555": SAM_COX})
    await run_enrich(conn, merged, clock)
    assert await conn.fetchval("SELECT count(*) FROM researchers WHERE id = $1", duplicate) == 0
    redirect = await conn.fetchrow(
        "SELECT survivor_id, old_s2_author_id FROM researcher_redirects WHERE old_id = $1", duplicate
    )
    assert redirect is not None and tuple(redirect) == (survivor, "5555")
    rows = {(r[0], r[1]): r for r in await authorships(conn)}
    assert rows[("2304.05376", 2)][3] == SAM_COX and rows[("2312.07559", 4)][3] == SAM_COX
    assert await conn.fetchval("SELECT paper_count FROM researchers WHERE id = $1", survivor) == 2
