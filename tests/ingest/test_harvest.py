from __future__ import annotations

from datetime import date
from functools import partial

import asyncpg
import httpx
import pytest

from db.cache import keys
from db.cache.store import CacheStore
from db.cache.strain import StrainReporter, strained
from ingest.checkpoints import load_harvest_state
from ingest.pacing import POLL_S, DutyCycle
from ingest.pipeline import harvest_arxiv
from tests.ingest.conftest import (
    OAI_CURRENT,
    FakeClock,
    FakeOAI,
    fixture_records,
    list_records_page,
    oai_error,
    three_page_archive,
)

ALL_IDS = {
    "cs/0001024",
    "0704.0248",
    "chao-dyn/9510015",
    "hep-th/9901002",
    "0704.0046",
    "1008.3222",
    "cond-mat/0703772",
    "hep-th/0703166",
}


async def paper_rows(conn: asyncpg.Connection) -> list[tuple[object, ...]]:
    rows = await conn.fetch(
        "SELECT arxiv_id, version, title, published, updated, withdrawn, categories, authors_text, author_count,"
        " (SELECT count(*) FROM paper_versions v WHERE v.paper_id = p.id) AS versions,"
        " (SELECT count(*) FROM authorships a WHERE a.paper_id = p.id) AS authors"
        " FROM papers p ORDER BY arxiv_id"
    )
    return [tuple(r) for r in rows]


async def test_walks_resumption_tokens_to_the_empty_final_token(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    oai = three_page_archive()
    summary = await harvest_arxiv(conn, oai.client(clock), writer=writer)
    assert [set(r) & {"resumptionToken", "metadataPrefix"} for r in oai.requests] == [
        {"metadataPrefix"},
        {"resumptionToken"},
        {"resumptionToken"},
    ]
    # With a token only the token is sent: it carries the rest.
    assert oai.requests[1] == {"verb": "ListRecords", "resumptionToken": oai.requests[1]["resumptionToken"]}
    assert oai.requests[0]["metadataPrefix"] == "arXivRaw"
    rows = await paper_rows(conn)
    assert {r[0] for r in rows} == ALL_IDS
    assert summary.seen == 8 and summary.inserted == 8 and summary.failed == 0 and summary.requests == 3
    withdrawn = {r[0] for r in rows if r[5]}
    assert withdrawn == {"cond-mat/0703772"}
    old = next(r for r in rows if r[0] == "hep-th/0703166")
    assert old[1] == 5 and old[9] == 5  # latest version, all five versions stored
    state = await load_harvest_state(conn, "arxiv:all")
    assert state is not None and state.token is None and state.next_from == date(2026, 11, 30)


class Pauses:
    """A pacing's sleep that waits for nothing and notes, at each pause, the harvest connections' states."""

    def __init__(self, checker: asyncpg.Connection, pids: list[int]) -> None:
        self.checker, self.pids = checker, pids
        self.seconds: list[float] = []
        self.states: list[set[str]] = []

    @classmethod
    async def watching(cls, dsn: str, conn: asyncpg.Connection, writer: asyncpg.Connection | None) -> Pauses:
        pids = [conn.get_server_pid(), *([writer.get_server_pid()] if writer is not None else [])]
        return cls(await asyncpg.connect(dsn), pids)

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)
        rows = await self.checker.fetch("SELECT state FROM pg_stat_activity WHERE pid = any($1::int[])", self.pids)
        self.states.append({r["state"] for r in rows})


async def test_a_paced_harvest_pauses_with_nothing_committed_unseen(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None, ingest_dsn: str
) -> None:
    """`WOVEPAPER_INGEST_SHARE`: a share of a third waits twice as long as the pages' transactions took, and only
    once every page written has committed and been settled (its cache entries dropped): during a pause no
    transaction of the harvest is open, so no page that committed waits out the pause with the cache unaware."""
    pause = await Pauses.watching(ingest_dsn, conn, writer)
    pauses, states = pause.seconds, pause.states
    try:
        pacing = DutyCycle(1 / 3, sleep=pause)
        summary = await harvest_arxiv(conn, three_page_archive().client(clock), writer=writer, pacing=pacing)
    finally:
        await pause.checker.close()
    assert {r[0] for r in await paper_rows(conn)} == ALL_IDS
    assert summary.seen == 8 and summary.inserted == 8 and summary.failed == 0
    assert pauses and all(p > 0 for p in pauses) and pacing.paused_s == pytest.approx(sum(pauses))
    assert states == [{"idle"}] * len(pauses)


async def test_a_harvest_waits_between_pages_while_the_site_is_strained(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None, ingest_dsn: str, cache: CacheStore
) -> None:
    """`WOVEPAPER_INGEST_YIELD_S`: while an API process says the site is strained, the harvest waits before its next
    page (at most the yield each time), with every page it wrote committed and dropped from the cache, and then
    writes every page all the same."""
    reporter = StrainReporter(cache, cache.namespace, waiting=lambda: 4)
    reporter.sample(0.3)
    await reporter.settle()
    # Renewed for the whole harvest, as a process strained throughout would.
    assert await cache.redis.pexpire(keys.strain(cache.namespace), 60_000)  # type: ignore[union-attr]
    pause = await Pauses.watching(ingest_dsn, conn, writer)
    pauses, states = pause.seconds, pause.states
    try:
        pacing = DutyCycle(sleep=pause, strained=partial(strained, cache, cache.namespace), yield_s=1.0)
        summary = await harvest_arxiv(
            conn, three_page_archive().client(clock), writer=writer, pacing=pacing, cache=cache
        )
    finally:
        await pause.checker.close()
    assert {r[0] for r in await paper_rows(conn)} == ALL_IDS
    assert summary.seen == 8 and summary.inserted == 8 and summary.failed == 0
    # Each wait before a page: polls of POLL_S until the yield of 1 s ran out.
    waits = round(1.0 / POLL_S)
    assert pauses and pauses == pytest.approx([POLL_S] * len(pauses)) and len(pauses) % waits == 0
    assert pacing.yielded_s == pytest.approx(sum(pauses)) and pacing.paused_s == 0
    assert states == [{"idle"}] * len(pauses)


async def test_idempotent_second_run_changes_nothing(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    await harvest_arxiv(conn, three_page_archive().client(clock), from_=date(2009, 9, 17), writer=writer)
    before = await paper_rows(conn)
    modified = await conn.fetchval("SELECT max(modified_at) FROM papers")
    again = await harvest_arxiv(conn, three_page_archive().client(clock), from_=date(2009, 9, 17), writer=writer)
    assert await paper_rows(conn) == before
    assert await conn.fetchval("SELECT max(modified_at) FROM papers") == modified
    assert again.inserted == 0 and again.updated == 0 and again.skipped == 8


async def test_incremental_run_continues_from_the_checkpoint(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await harvest_arxiv(conn, three_page_archive().client(clock))
    oai = three_page_archive()
    oai.no_records_match_after = "2026-11-30"
    summary = await harvest_arxiv(conn, oai.client(clock))
    # From the first responseDate of the last harvest; noRecordsMatch means nothing new, not a failure.
    assert oai.requests == [{"verb": "ListRecords", "metadataPrefix": "arXivRaw", "from": "2026-11-30"}]
    assert summary.stopped is None and summary.failed == 0 and summary.seen == 0
    state = await load_harvest_state(conn, "arxiv:all")
    assert state is not None and state.next_from == date(2026, 11, 30)


async def test_from_before_earliest_datestamp_is_clamped(conn: asyncpg.Connection, clock: FakeClock) -> None:
    oai = three_page_archive()
    summary = await harvest_arxiv(conn, oai.client(clock), from_=date(1991, 1, 1), set_spec="cs:cs:CV")
    assert oai.requests[0] == {"verb": "Identify"}
    assert oai.requests[1] == {
        "verb": "ListRecords",
        "metadataPrefix": "arXivRaw",
        "from": "2005-09-16",
        "set": "cs:cs:CV",
    }
    assert summary.stopped is None and summary.inserted == 8
    assert await load_harvest_state(conn, "arxiv:cs:cs:CV") is not None
    assert await load_harvest_state(conn, "arxiv:all") is None


async def test_crash_mid_harvest_then_resume_loses_and_duplicates_nothing(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    oai = three_page_archive()

    def boom(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("process killed")

    oai.script[1] = boom  # dies fetching page 2, after page 1 committed
    with pytest.raises(RuntimeError):
        await harvest_arxiv(conn, oai.client(clock), writer=writer)
    assert {r[0] for r in await paper_rows(conn)} == {"cs/0001024", "0704.0248", "chao-dyn/9510015"}
    state = await load_harvest_state(conn, "arxiv:all")
    assert state is not None and state.token and state.pages == 1

    resumed = three_page_archive()
    summary = await harvest_arxiv(conn, resumed.client(clock), writer=writer)
    # Resumes with the saved token: page 1 is not fetched again.
    assert "resumptionToken" in resumed.requests[0] and len(resumed.requests) == 2
    assert summary.seen == 5 and summary.inserted == 5
    rows = await paper_rows(conn)
    assert {r[0] for r in rows} == ALL_IDS and len(rows) == 8
    fresh = await conn.fetch("SELECT count(*) FROM paper_versions")
    assert fresh[0][0] == sum(r[9] for r in rows)


async def test_crash_inside_the_page_transaction_rolls_back_page_and_checkpoint(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    oai = three_page_archive()
    # A paper row that makes page 2's write fail (slug collides): nothing of page 2 may stay.
    await conn.execute(
        "CREATE OR REPLACE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF NEW.arxiv_id = '1008.3222' THEN RAISE EXCEPTION 'disk full'; END IF; RETURN NEW; END $$"
    )
    await conn.execute("CREATE OR REPLACE TRIGGER boom BEFORE INSERT ON papers FOR EACH ROW EXECUTE FUNCTION boom()")
    with pytest.raises(asyncpg.PostgresError):
        await harvest_arxiv(conn, oai.client(clock), writer=writer)
    assert {r[0] for r in await paper_rows(conn)} == {"cs/0001024", "0704.0248", "chao-dyn/9510015"}
    state = await load_harvest_state(conn, "arxiv:all")
    assert state is not None and state.pages == 1
    await conn.execute("DROP TRIGGER boom ON papers")
    await conn.execute("DROP FUNCTION boom()")
    await harvest_arxiv(conn, three_page_archive().client(clock), writer=writer)
    assert {r[0] for r in await paper_rows(conn)} == ALL_IDS


async def test_expired_token_restarts_from_the_saved_date(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    oai = three_page_archive()
    oai.script[2] = lambda r: httpx.Response(500)  # Identify, page 1, then page 2 fails: the token is saved
    summary = await harvest_arxiv(conn, oai.client(clock, attempts=1), from_=date(2009, 9, 17), writer=writer)
    assert summary.stopped and summary.failed == 1 and summary.inserted == 3
    # Overnight the token expired: the server answers badResumptionToken.
    expired = three_page_archive()
    expired.by_token.clear()
    expired.first = list_records_page(
        fixture_records(OAI_CURRENT / "getrecord_arXivRaw_withdrawn_cond-mat-0703772_source_type-I.xml"), token=""
    )
    summary = await harvest_arxiv(conn, expired.client(clock), writer=writer)
    assert "resumptionToken" in expired.requests[0]
    assert expired.requests[1] == {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "from": "2009-09-17"}
    assert summary.stopped is None
    assert "cond-mat/0703772" in {r[0] for r in await paper_rows(conn)}


async def test_503_and_429_with_retry_after_are_waited_out(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    oai = three_page_archive()
    oai.script[0] = httpx.Response(503, headers={"Retry-After": "7"}, text="busy")
    oai.script[2] = httpx.Response(429, headers={"Retry-After": "11"})
    summary = await harvest_arxiv(conn, oai.client(clock), writer=writer)
    assert clock.sleeps == [7.0, 11.0]
    assert summary.retries == 2 and summary.requests == 5 and summary.inserted == 8


async def test_truncated_page_is_fetched_again(conn: asyncpg.Connection, clock: FakeClock) -> None:
    oai = three_page_archive()
    page2 = next(iter(oai.by_token.values()))
    oai.script[1] = httpx.Response(200, content=page2[: len(page2) // 2], headers={"Content-Type": "text/xml"})
    summary = await harvest_arxiv(conn, oai.client(clock))
    assert summary.retries == 1 and summary.inserted == 8 and summary.stopped is None


async def test_oai_error_other_than_no_records_stops_cleanly(conn: asyncpg.Connection, clock: FakeClock) -> None:
    oai = three_page_archive()
    oai.script[1] = httpx.Response(200, content=oai_error("badArgument", "bad set"))
    summary = await harvest_arxiv(conn, oai.client(clock))
    assert summary.stopped and "badArgument" in summary.stopped
    assert summary.inserted == 3  # page 1 is committed and kept


async def test_politeness_delay_between_requests(conn: asyncpg.Connection, clock: FakeClock) -> None:
    oai = three_page_archive()
    client = oai.client(clock)
    client.http.min_interval_s = 3.0
    await harvest_arxiv(conn, client)
    assert clock.sleeps == [3.0, 3.0]


def test_fake_oai_is_wired(clock: FakeClock) -> None:
    assert isinstance(three_page_archive(), FakeOAI)


async def test_deleted_header_marks_the_paper_withdrawn_and_keeps_it(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await harvest_arxiv(conn, three_page_archive().client(clock))
    deleted = (
        b'<record xmlns="http://www.openarchives.org/OAI/2.0/"><header status="deleted">'
        b"<identifier>oai:arXiv.org:0704.0248</identifier><datestamp>2026-12-01</datestamp></header></record>"
    )
    oai = FakeOAI(first=list_records_page([deleted], ""))
    summary = await harvest_arxiv(conn, oai.client(clock))
    assert summary.updated == 1
    row = await conn.fetchrow("SELECT withdrawn, title FROM papers WHERE arxiv_id = '0704.0248'")
    assert row is not None and row["withdrawn"] and row["title"].startswith("A Rigorous")


async def test_two_writers_with_a_record_repeated_on_consecutive_pages(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    # The server resumes from the last day, so a record can come again on the next page.
    repeated = fixture_records(OAI_CURRENT / "getrecord_arXivRaw_oldstyle-id_hep-th-0703166_5-versions.xml")
    withdrawn = fixture_records(OAI_CURRENT / "getrecord_arXivRaw_withdrawn_cond-mat-0703772_source_type-I.xml")
    oai = FakeOAI(
        first=list_records_page(repeated, "t1"),
        by_token={"t1": list_records_page(repeated + withdrawn, "t2"), "t2": list_records_page(repeated, "")},
    )
    summary = await harvest_arxiv(conn, oai.client(clock), writer=writer)
    assert summary.seen == 4 and summary.inserted == 2 and summary.stopped is None
    assert {r[0] for r in await paper_rows(conn)} == {"hep-th/0703166", "cond-mat/0703772"}
    state = await load_harvest_state(conn, "arxiv:all")
    assert state is not None and state.token is None and state.pages == 3


async def test_numbers_past_int32_in_a_record_do_not_stop_the_harvest(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    from datetime import UTC, datetime

    from tests.ingest.upstreams import arxiv_raw

    record = arxiv_raw("2401.00002", "Big numbers", "Ann Lee", datetime(2024, 1, 2, tzinfo=UTC))
    record = record.replace(b"<size>100kb</size>", b"<size>99999999999kb</size>").replace(
        b"</version>",
        b'</version><version version="v4294967297"><date>Wed, 3 Jan 2024 00:00:00 GMT</date><size>1kb</size></version>',
    )
    summary = await harvest_arxiv(conn, FakeOAI(first=list_records_page([record], "")).client(clock))
    assert summary.inserted == 1 and summary.failed == 0
    row = await conn.fetchrow(
        "SELECT p.version, v.size_kb FROM papers p JOIN paper_versions v ON v.paper_id = p.id"
        " WHERE p.arxiv_id = '2401.00002'"
    )
    assert row is not None and tuple(row) == (1, None)  # the impossible version and size are not numbers we keep
