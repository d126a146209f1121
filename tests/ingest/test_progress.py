from __future__ import annotations

import io
import logging
import re
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from db.queries.ingest_state import fetch_ingest_status
from ingest.pipeline import harvest_arxiv
from ingest.progress import RunProgress, Summary
from tests.ingest.conftest import FakeClock, FakeOAI, three_page_archive
from tests.ingest.test_enrich import run_enrich
from tests.ingest.upstreams import FakeScholarly


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_log_lines_when_not_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="ingest"), RunProgress("arxiv", stream=stream) as progress:
        progress.update(Summary(seen=2500, inserted=2400, updated=90, skipped=10), "page 1")
    assert stream.getvalue() == ""
    assert "arxiv: 2500 seen" in caplog.text and "+2400 ~90 skip 10 fail 0" in caplog.text


def test_progress_bar_on_a_terminal() -> None:
    stream = Terminal()
    with RunProgress("enrich", total=10, stream=stream) as progress:
        progress.update(Summary(seen=4, inserted=3))
    out = stream.getvalue()
    assert "enrich" in out and "4/10" in out


def test_summary_line_names_every_count() -> None:
    line = Summary(seen=5, inserted=1, updated=2, skipped=1, failed=1, requests=7, retries=3, stopped="budget").line(
        "x"
    )
    assert line == (
        "x: seen 5, inserted 1, updated 2, skipped 1, failed 1, requests 7, retries 3; stopped early: budget"
    )


# --- progress per source, as `wovepaper ingest status` and metrics read it --------------------------------


def _dated_archive() -> FakeOAI:
    """Three pages, each answered at a later time than the one before."""
    archive = three_page_archive()
    first, second, last = archive.first, *archive.by_token.values()
    dates = [b"2026-11-29T10:00:00Z", b"2026-11-29T11:00:00Z", b"2026-11-29T12:00:00Z"]
    pages = [p.replace(b"2026-11-30T00:47:01Z", d) for p, d in zip([first, second, last], dates, strict=True)]
    archive.first = pages[0]
    archive.by_token = dict(zip(archive.by_token, pages[1:], strict=True))
    return archive


async def test_progress_counts_what_committed(conn: asyncpg.Connection, clock: FakeClock) -> None:
    archive = _dated_archive()
    archive.script[1] = lambda request: httpx.Response(503)  # page 2 fails: page 1 committed alone
    stopped = await harvest_arxiv(conn, archive.client(clock, attempts=1))
    assert stopped.stopped
    (arxiv,) = (await fetch_ingest_status(conn)).sources
    assert (arxiv.source, arxiv.records, arxiv.pages, arxiv.caught_up_to) == ("arxiv:all", 3, 1, None)

    await harvest_arxiv(conn, _dated_archive().client(clock))
    await run_enrich(conn, FakeScholarly(), clock, batch_size=2)
    status = await fetch_ingest_status(conn)
    arxiv, enriched = status.sources
    assert (arxiv.source, arxiv.records, arxiv.pages) == ("arxiv:all", 8, 3)
    # Complete: everything arXiv had when the harvest began (the first page's responseDate) is in.
    assert arxiv.caught_up_to == datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
    assert arxiv.lag_s is not None and arxiv.lag_s > 0
    assert arxiv.since_success_s is not None and 0 <= arxiv.since_success_s < 3600
    assert (enriched.source, enriched.records, enriched.pages, enriched.caught_up_to) == ("enrich", 8, 4, None)
    assert (status.enrich_waiting, status.enrich_failed) == (0, 0)


def test_ingest_status_command(conn: asyncpg.Connection, ingest_dsn: str) -> None:
    import asyncio
    import json

    from typer.testing import CliRunner

    from cli import app

    async def harvest() -> None:
        c = await asyncpg.connect(ingest_dsn)
        try:
            await harvest_arxiv(c, _dated_archive().client(FakeClock()))
        finally:
            await c.close()

    runner, env = CliRunner(), {"DATABASE_URL": ingest_dsn}
    assert runner.invoke(app, ["ingest", "status"], env=env).output.splitlines() == [
        "nothing ingested yet",
        "enrich queue: 0 papers waiting, 0 set aside",
        "author matching: 0 positions unlinked (0 ambiguous, 0 no identity, 0 no match)",
        "corrections: 0 in effect, 0 waiting for an operator",
    ]
    asyncio.run(harvest())
    result = runner.invoke(app, ["ingest", "status"], env=env)
    assert result.exit_code == 0, result.output
    first, queue, matching, corrections = result.output.splitlines()
    assert matching.startswith("author matching: 0 positions unlinked")
    assert corrections == "corrections: 0 in effect, 0 waiting for an operator"
    assert re.fullmatch(
        r"arxiv:all: 8 records in 3 pages; last success 2\S+ \S+Z \(\d+ s ago\);"
        r" complete up to 2026-11-29 10:00:00Z \(lag \d+ (d|h) \d+ (h|min)\)",
        first,
    ), first
    assert queue == "enrich queue: 8 papers waiting, 0 set aside"
    data = json.loads(runner.invoke(app, ["ingest", "status", "--json"], env=env).output)
    assert data["sources"][0] | {"last_success_at": None, "seconds_since_success": None, "lag_seconds": None} == {
        "source": "arxiv:all",
        "records": 8,
        "pages": 3,
        "last_success_at": None,
        "seconds_since_success": None,
        "caught_up_to": "2026-11-29T10:00:00+00:00",
        "lag_seconds": None,
    }
    assert data["enrich"] == {"waiting": 8, "set_aside": 0, "next_retry_at": None, "papers_set_aside": []}
    assert data["corrections"] == {
        "in_effect": 0,
        "pending": 0,
        "conflicts": 0,
        "corrections_in_conflict": 0,
        "last_conflict_at": None,
    }
