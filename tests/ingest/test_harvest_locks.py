"""The two-writer harvest never waits on itself, and ingest connections bound every wait."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import pytest

from db.queries.figures import refresh_researcher_figures
from ingest.pipeline import harvest_arxiv
from ingest.runner import connect
from settings import Settings
from tests.ingest.conftest import FakeClock, FakeOAI, list_records_page
from tests.ingest.upstreams import SAM_COX, arxiv_raw

WHEN = datetime(2023, 4, 11, 12, 0, tzinfo=UTC)


def _paper(arxiv_id: str, authors: str) -> bytes:
    return arxiv_raw(arxiv_id, f"Paper {arxiv_id}", authors, WHEN)


@pytest.fixture
async def writer(ingest_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(ingest_dsn)
    try:
        yield c
    finally:
        await c.close()


async def test_a_page_never_holds_figure_rows_while_it_waits_for_the_page_before(
    conn: asyncpg.Connection,
    writer: asyncpg.Connection,
    ingest_dsn: str,
    clock: FakeClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Two stored papers share a researcher; a re-harvest drops them from both, one paper per page, so both pages
    # change the researcher's figures. Page 1 is held up (a row lock elsewhere) while page 2 is written: page 2
    # then waits for page 1's commit, and page 1 must not need a row page 2 holds.
    first = list_records_page([_paper("2304.00001", "Sam Cox, Ann Lee"), _paper("2304.00002", "Sam Cox, Bo Li")], "")
    await harvest_arxiv(conn, FakeOAI(first=first).client(clock))
    rid = await conn.fetchval(
        "INSERT INTO researchers (name, name_slug, s2_author_id) VALUES ('Sam Cox', 'sam-cox', $1) RETURNING id",
        SAM_COX,
    )
    await conn.execute("UPDATE authorships SET researcher_id = $1 WHERE name = 'Sam Cox'", rid)
    await refresh_researcher_figures(conn, [rid])
    assert await conn.fetchval("SELECT paper_count FROM researchers WHERE id = $1", rid) == 2

    revised = FakeOAI(
        first=list_records_page([_paper("2304.00001", "Ann Lee")], "t1"),
        by_token={"t1": list_records_page([_paper("2304.00002", "Bo Li")], "")},
    )
    # Without a bound, a wait that passes through Python is for ever: PostgreSQL cannot see it as a deadlock.
    for c in (conn, writer):
        await c.execute("SET lock_timeout = '20s'")
    locker = await asyncpg.connect(ingest_dsn)
    try:
        await locker.execute("BEGIN")
        await locker.execute("SELECT 1 FROM papers WHERE arxiv_id = '2304.00001' FOR UPDATE")
        caplog.set_level(logging.DEBUG, logger="ingest")
        run = asyncio.create_task(harvest_arxiv(conn, revised.client(clock), writer=writer))
        for _ in range(3000):
            if any("waiting for page 1 to commit" in r.getMessage() for r in caplog.records) or run.done():
                break
            await asyncio.sleep(0.01)
        assert not run.done(), run.exception() if not run.cancelled() else "cancelled"
        await locker.execute("ROLLBACK")  # page 1 goes on
        summary = await run
    finally:
        await locker.close()
    assert summary.updated == 2 and summary.stopped is None
    assert await conn.fetchval("SELECT paper_count FROM researchers WHERE id = $1", rid) == 0


async def test_ingest_connections_carry_the_timeouts(ingest_dsn: str) -> None:
    settings = Settings(
        database_url=ingest_dsn,
        ingest_statement_timeout_ms=123_000,
        ingest_lock_timeout_ms=4_500,
        ingest_idle_timeout_ms=456_000,
    )
    c = await connect(settings)
    try:
        assert await c.fetchval("SHOW statement_timeout") == "123s"
        assert await c.fetchval("SHOW lock_timeout") == "4500ms"
        assert await c.fetchval("SHOW idle_in_transaction_session_timeout") == "456s"
    finally:
        await c.close()


async def test_the_lock_timeout_stops_a_write_that_waits_too_long(ingest_dsn: str, conn: asyncpg.Connection) -> None:
    await harvest_arxiv(
        conn, FakeOAI(first=list_records_page([_paper("2304.00001", "Ann Lee")], "")).client(FakeClock())
    )
    c = await connect(Settings(database_url=ingest_dsn, ingest_lock_timeout_ms=200))
    try:
        await conn.execute("BEGIN")
        await conn.execute("SELECT 1 FROM papers FOR UPDATE")
        revised = FakeOAI(first=list_records_page([_paper("2304.00001", "Ann Lee, Bo Li")], ""))
        with pytest.raises(asyncpg.LockNotAvailableError):
            await asyncio.wait_for(harvest_arxiv(c, revised.client(FakeClock())), timeout=60)
    finally:
        await conn.execute("ROLLBACK")
        await c.close()
