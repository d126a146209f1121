"""One bad upstream value or one paper that cannot be written never stops the enrichment of the others."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest

from tests.ingest.conftest import FakeClock
from tests.ingest.test_enrich import authorships, harvest, run_enrich
from tests.ingest.upstreams import S2_PAPERQA, SAM_COX, WHITE, FakeScholarly

CHEMCROW = "2304.05376"
PAPERQA = "2312.07559"
COLLAB = "2401.00001"


async def queued(conn: asyncpg.Connection) -> list[str]:
    return [r[0] for r in await conn.fetch("SELECT arxiv_id FROM papers WHERE enriched_at IS NULL ORDER BY 1")]


async def figures(conn: asyncpg.Connection) -> list[tuple[object, ...]]:
    rows = await conn.fetch(
        "SELECT s2_author_id, name, paper_count, h_index, citation_count, works_count FROM researchers ORDER BY 1"
    )
    return [tuple(r) for r in rows]


async def test_nul_characters_and_integers_past_int32_are_cleaned_where_they_are_parsed(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest(conn, clock)

    def s2_papers(body: list[Any]) -> None:
        for paper in body:
            if paper and paper["paperId"] == S2_PAPERQA["paperId"]:
                paper["citationCount"] = 3_000_000_000
                for a in paper["authors"]:
                    a["name"] = a["name"].replace(" ", "\u0000 ")

    def s2_authors(body: list[Any]) -> None:
        for a in body:
            if a:
                a["name"] += "\u0000"
                a["hIndex"] = 2**40

    def oa_works(body: dict[str, Any]) -> None:
        for w in body["results"]:
            w["cited_by_count"] = 2**31
            for a in w["authorships"]:
                for inst in a["institutions"]:
                    inst["display_name"] = "\u0000" + inst["display_name"]

    def tamper(request: httpx.Request, body: Any) -> None:
        path = request.url.path
        change = s2_papers if path.endswith("/paper/batch") else s2_authors if path.endswith("/author/batch") else None
        if path == "/works":
            change = oa_works
        if change is not None:
            change(body)

    summary = await run_enrich(conn, FakeScholarly(tamper=tamper), clock)
    assert summary.failed == 0 and summary.stopped is None
    assert await queued(conn) == []
    names = {r[1] for r in await figures(conn)}
    assert {"Sam Cox", "Andrew D. White"} <= names
    assert all("\x00" not in n for n in names)
    assert await conn.fetchval("SELECT max(s2_h_index) FROM researchers") is None  # 2**40 is no h-index
    # S2's impossible count is dropped, OpenAlex's too: the paper has no count rather than a wrong one.
    assert await conn.fetchval("SELECT cited_by_count FROM papers WHERE arxiv_id = $1", PAPERQA) is None
    institutions = [r[0] for r in await conn.fetch("SELECT name FROM institutions")]
    assert institutions and all("\x00" not in n and not n.startswith(" ") for n in institutions)


Refuse = Callable[[str, str, str], Awaitable[None]]


@pytest.fixture
async def refuse(conn: asyncpg.Connection) -> AsyncIterator[Refuse]:
    """`refuse(table, condition, errcode)`: a trigger fails the writes of some rows, as a value PostgreSQL refuses
    would; gone after the test."""

    async def install(table: str, condition: str, errcode: str) -> None:
        await conn.execute(
            "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF {condition} THEN RAISE EXCEPTION 'refused' USING ERRCODE = '{errcode}'; END IF; RETURN NEW; END $$"
        )
        await conn.execute(
            f"CREATE OR REPLACE TRIGGER refuse BEFORE INSERT OR UPDATE ON {table}"
            " FOR EACH ROW EXECUTE FUNCTION refuse()"
        )

    yield install
    await conn.execute("DROP FUNCTION IF EXISTS refuse() CASCADE")


async def test_a_paper_that_cannot_be_written_is_set_aside_and_the_rest_written(
    conn: asyncpg.Connection, clock: FakeClock, refuse: Refuse
) -> None:
    # What a clean run gives, to compare with at the end.
    await harvest(conn, clock)
    await run_enrich(conn, FakeScholarly(), clock)
    clean_links, clean_figures = await authorships(conn), await figures(conn)
    await conn.execute("TRUNCATE papers, researchers, institutions, ingest_checkpoints, ingest_progress CASCADE")

    await harvest(conn, clock)
    chemcrow = f"NEW.paper_id = (SELECT id FROM papers WHERE arxiv_id = '{CHEMCROW}') AND NEW.researcher_id IS NOT NULL"
    await refuse("authorships", chemcrow, "22003")  # numeric_value_out_of_range
    summary = await run_enrich(conn, FakeScholarly(), clock)
    assert summary.seen == 3 and summary.failed == 1 and summary.stopped is None
    assert await queued(conn) == [CHEMCROW]
    failure = await conn.fetchrow(
        "SELECT f.attempts, f.reason, f.retry_at > now() + interval '50 minutes' AS later FROM enrich_failures f"
    )
    assert failure is not None and failure["attempts"] == 1 and failure["later"]
    assert failure["reason"].startswith("NumericValueOutOfRangeError: refused")
    # PaperQA was written without it: Sam Cox is there, with PaperQA only.
    assert await conn.fetchval("SELECT paper_count FROM researchers WHERE s2_author_id = $1", SAM_COX) == 1

    # Later runs leave it alone until its retry time...
    assert (await run_enrich(conn, FakeScholarly(), clock)).seen == 0
    # ...which doubles when it fails again.
    await conn.execute("UPDATE enrich_failures SET retry_at = now() - interval '1 second'")
    again = await run_enrich(conn, FakeScholarly(), clock)
    assert again.seen == 1 and again.failed == 1
    row = await conn.fetchrow(
        "SELECT attempts, retry_at > now() + interval '110 minutes' AS later FROM enrich_failures"
    )
    assert row is not None and row["attempts"] == 2 and row["later"]

    # Once the paper changes (a new version harvested), it is tried at once; written, its failure is forgotten.
    await conn.execute("DROP FUNCTION refuse() CASCADE")
    await conn.execute("UPDATE papers SET modified_at = now() WHERE arxiv_id = $1", CHEMCROW)
    done = await run_enrich(conn, FakeScholarly(), clock)
    assert done.seen == 1 and done.failed == 0
    assert await queued(conn) == []
    assert await conn.fetchval("SELECT count(*) FROM enrich_failures") == 0
    assert await authorships(conn) == clean_links and await figures(conn) == clean_figures


async def test_a_researcher_that_cannot_be_written_sets_aside_only_the_papers_naming_them(
    conn: asyncpg.Connection, clock: FakeClock, refuse: Refuse
) -> None:
    await harvest(conn, clock)
    await refuse("researchers", f"NEW.s2_author_id = '{WHITE}'", "23514")  # check_violation
    summary = await run_enrich(conn, FakeScholarly(), clock)
    assert summary.failed == 2 and summary.stopped is None
    # White wrote PaperQA and ChemCrow; the collaboration paper does not name him.
    assert await queued(conn) == [CHEMCROW, PAPERQA]
    reasons = [r[0] for r in await conn.fetch("SELECT reason FROM enrich_failures")]
    assert reasons == ["CheckViolationError: refused"] * 2
    cited = await conn.fetch("SELECT arxiv_id, cited_by_count FROM papers ORDER BY 1")
    assert [tuple(r) for r in cited] == [(CHEMCROW, None), (PAPERQA, None), (COLLAB, 3)]


@pytest.mark.parametrize("errcode", ["55P03", "57014"])  # lock_not_available, query_canceled (a timeout)
async def test_a_timeout_is_not_blamed_on_a_paper(
    conn: asyncpg.Connection, clock: FakeClock, refuse: Refuse, errcode: str
) -> None:
    await harvest(conn, clock)
    await refuse("researchers", f"NEW.s2_author_id = '{WHITE}'", errcode)
    with pytest.raises(asyncpg.PostgresError):
        await run_enrich(conn, FakeScholarly(), clock)
    # The run stops; the batch stays queued whole and no paper is marked.
    assert await queued(conn) == [CHEMCROW, PAPERQA, COLLAB]
    assert await conn.fetchval("SELECT count(*) FROM enrich_failures") == 0
