"""The harvest's steps one by one: resume, fetch (download and parse), checkpoint, write in order, settle."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import asyncpg
import pytest

from ingest.checkpoints import HarvestState, arxiv_checkpoint_key, load_harvest_state, save_harvest_state
from ingest.harvest import HarvestRun, PageCheckpoint
from ingest.parsers.oai import OAIPage
from tests.ingest.conftest import FakeClock, FakeOAI, oai_error, three_page_archive
from tests.ingest.test_harvest import ALL_IDS, paper_rows


async def _save(conn: asyncpg.Connection, state: HarvestState) -> None:
    async with conn.transaction():
        await save_harvest_state(conn, arxiv_checkpoint_key(None), state)


async def _pages(oai: FakeOAI, clock: FakeClock) -> list[OAIPage]:
    """The archive's pages as the client parses them."""
    client = oai.client(clock)
    pages = [await client.list_records()]
    while pages[-1].token:
        pages.append(await client.list_records(token=pages[-1].token))
    return pages


async def test_resume_takes_the_token_of_an_interrupted_harvest(conn: asyncpg.Connection, clock: FakeClock) -> None:
    await _save(conn, HarvestState(harvest_from=date(2009, 9, 17), token="tok", pages=2))
    run = HarvestRun(conn, three_page_archive().client(clock))
    await run.resume()
    assert run.token == "tok" and run.state.pages == 2 and run.state.harvest_from == date(2009, 9, 17)


async def test_resume_after_a_complete_harvest_starts_where_it_left_off(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    await _save(conn, HarvestState(next_from=date(2026, 11, 30), pages=3))
    run = HarvestRun(conn, three_page_archive().client(clock))
    await run.resume(until=date(2026, 12, 1))
    assert run.token is None
    day = date(2026, 11, 30)
    assert run.state == HarvestState(harvest_from=day, until=date(2026, 12, 1), next_from=day)


async def test_resume_from_a_date_clamps_it_to_the_earliest_datestamp(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    oai = three_page_archive()
    earliest = await oai.client(clock).identify()
    assert earliest is not None
    run = HarvestRun(conn, oai.client(clock))
    await run.resume(from_=date(1980, 1, 1))
    assert run.state.harvest_from == earliest and run.token is None


async def test_fetch_lists_from_the_start_then_takes_the_page_fetched_ahead(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    oai = three_page_archive()
    run = HarvestRun(conn, oai.client(clock))
    await run.resume()
    first = await run.fetch()
    assert first.token and run.prefetched is None
    run.fetch_ahead(first)
    assert run.token == first.token and run.prefetched is not None
    second = await run.fetch()
    assert run.prefetched is None
    assert [set(r) & {"resumptionToken", "metadataPrefix"} for r in oai.requests] == [
        {"metadataPrefix"},
        {"resumptionToken"},
    ]
    assert {r.arxiv_id for r in second.records}.isdisjoint({r.arxiv_id for r in first.records})


async def test_checkpoint_advances_the_state_past_each_page(conn: asyncpg.Connection, clock: FakeClock) -> None:
    pages = await _pages(three_page_archive(), clock)
    run = HarvestRun(conn, three_page_archive().client(clock))
    await run.resume()
    checkpoints = [run.checkpoint(p) for p in pages]
    assert [c.number for c in checkpoints] == [1, 2, 3]
    assert [c.state.token for c in checkpoints] == [pages[0].token, pages[1].token, None]
    # Only the last page of a complete harvest up to now says how far the archive is caught up: to the moment
    # the harvest began.
    assert [c.caught_up_to for c in checkpoints] == [None, None, pages[0].response_date]
    assert checkpoints[-1].state.next_from == pages[0].response_date.date()  # type: ignore[union-attr]


async def test_pages_and_their_checkpoints_commit_in_order(
    conn: asyncpg.Connection, clock: FakeClock, writer: asyncpg.Connection | None
) -> None:
    pages = await _pages(three_page_archive(), clock)
    run = HarvestRun(conn, three_page_archive().client(clock), writer=writer)
    await run.resume()
    checkpoints: list[PageCheckpoint] = []
    for page in pages:
        checkpoints.append(run.checkpoint(page))
        await run.write(page, checkpoints[-1])
        assert len(run.inflight) <= len(run.writers)
    await run.settle_all()
    assert await load_harvest_state(conn, arxiv_checkpoint_key(None)) == checkpoints[-1].state
    assert {r[0] for r in await paper_rows(conn)} == ALL_IDS
    assert run.summary.seen == sum(p.seen for p in pages) and run.summary.inserted == 8


async def test_a_page_that_repeats_a_record_waits_for_the_page_before(
    conn: asyncpg.Connection, clock: FakeClock, ingest_dsn: str
) -> None:
    first = (await _pages(three_page_archive(), clock))[0]
    writer = await asyncpg.connect(ingest_dsn)
    try:
        run = HarvestRun(conn, three_page_archive().client(clock), writer=writer)
        await run.resume()
        await run.write(first, run.checkpoint(first))
        # A free connection, but the same papers: the first page commits before the second starts.
        await run.write(first, run.checkpoint(first))
        assert len(run.inflight) == 1 and run.summary.seen == first.seen
        await run.settle_all()
    finally:
        await writer.close()
    # Written twice, one after the other: the second time nothing changed.
    assert run.summary.inserted == len(first.records) and run.summary.skipped >= len(first.records)


async def test_a_page_that_fails_rolls_back_the_page_after_it(
    conn: asyncpg.Connection, clock: FakeClock, ingest_dsn: str
) -> None:
    first, second, _ = await _pages(three_page_archive(), clock)
    broken = replace(first, records=[replace(first.records[0], categories=[]), *first.records[1:]])
    writer = await asyncpg.connect(ingest_dsn)
    try:
        run = HarvestRun(conn, three_page_archive().client(clock), writer=writer)
        await run.resume()
        await run.write(broken, run.checkpoint(broken))
        await run.write(second, run.checkpoint(second))
        assert len(run.inflight) == 2  # written at once
        with pytest.raises(ValueError, match="no category"):
            await run.settle()
        with pytest.raises(ValueError, match="no category"):
            await run.settle()  # the second page waited for the first, whose failure rolled it back
        await run.close()
    finally:
        await writer.close()
    assert await paper_rows(conn) == []
    assert await load_harvest_state(conn, arxiv_checkpoint_key(None)) is None


async def test_an_expired_token_of_a_page_fetched_ahead_restarts_the_list(
    conn: asyncpg.Connection, clock: FakeClock
) -> None:
    oai = three_page_archive()
    oai.script[1] = FakeOAI._xml(oai_error("badResumptionToken", "expired"))
    run = HarvestRun(conn, oai.client(clock))
    await run.resume()
    summary = await run.run()
    assert summary.stopped is None and run.restarts == 1
    assert [set(r) & {"resumptionToken", "metadataPrefix"} for r in oai.requests] == [
        {"metadataPrefix"},
        {"resumptionToken"},
        {"metadataPrefix"},
        {"resumptionToken"},
        {"resumptionToken"},
    ]
    assert {r[0] for r in await paper_rows(conn)} == ALL_IDS
