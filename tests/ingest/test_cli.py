"""`wovepaper ingest arxiv | enrich | all` as operators run them, against loopback upstreams."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from cli import app
from tests.ingest.conftest import FakeOAI
from tests.ingest.upstreams import FakeScholarly, enrich_archive_page
from tests.loopback import loopback


@pytest.fixture
def upstreams() -> Iterator[tuple[str, FakeOAI, FakeScholarly]]:
    """One loopback HTTP server: /oai is arXiv, /s2 Semantic Scholar, /oa OpenAlex."""
    oai = FakeOAI(first=enrich_archive_page())
    scholarly = FakeScholarly()

    def respond(method: str, path: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        if path.startswith("/oai"):
            url, fake = "https://oaipmh.arxiv.org" + path, oai
        elif path.startswith("/s2"):
            url, fake = "https://s2.test/graph/v1" + path.removeprefix("/s2"), scholarly
        else:
            url, fake = "https://api.openalex.test" + path.removeprefix("/oa"), scholarly
        resp = fake(httpx.Request(method, url, content=body))  # type: ignore[operator]
        return resp.status_code, list(resp.headers.items()), resp.read()

    with loopback(respond) as base:
        yield base, oai, scholarly


def env(base: str, dsn: str) -> dict[str, str]:
    return {
        "DATABASE_URL": dsn,
        "WOVEPAPER_ARXIV_OAI_URL": f"{base}/oai",
        "WOVEPAPER_ARXIV_DELAY_S": "0",
        "WOVEPAPER_S2_API_URL": f"{base}/s2",
        "WOVEPAPER_S2_RPS": "1000000",
        "WOVEPAPER_OPENALEX_API_URL": f"{base}/oa",
        "WOVEPAPER_OPENALEX_RPS": "1000000",
    }


async def _count(dsn: str, sql: str) -> int:
    c = await asyncpg.connect(dsn)
    try:
        return int(await c.fetchval(sql))
    finally:
        await c.close()


def test_ingest_arxiv_enrich_all(
    upstreams: tuple[str, FakeOAI, FakeScholarly], conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    base, oai, scholarly = upstreams
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "arxiv", "--from", "2001-01-01"], env=env(base, ingest_dsn))
    assert result.exit_code == 0, result.output
    assert "arxiv: seen 3, inserted 3, updated 0, skipped 0, failed 0, requests 2, retries 0" in result.output
    # --from before earliestDatestamp was clamped (the server would reject it).
    assert oai.requests[1]["from"] == "2005-09-16"

    result = runner.invoke(app, ["ingest", "enrich", "--limit", "1"], env=env(base, ingest_dsn))
    assert result.exit_code == 0, result.output
    assert "enrich: seen 1," in result.output
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE enriched_at IS NULL")) == 2

    # `all`: arXiv from the checkpoint (nothing new: the page is served again and is unchanged), then the rest.
    result = runner.invoke(app, ["ingest", "all"], env=env(base, ingest_dsn))
    assert result.exit_code == 0, result.output
    assert "arxiv: seen 3, inserted 0, updated 0, skipped 3" in result.output
    assert "enrich: seen 2," in result.output
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE enriched_at IS NULL")) == 0
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM researchers")) > 0


def test_failed_upstream_exits_1(
    upstreams: tuple[str, FakeOAI, FakeScholarly], conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    base, oai, _ = upstreams
    oai.script[0] = httpx.Response(
        400, text="<html><body>Bad Request</body></html>", headers={"Content-Type": "text/html"}
    )
    result = CliRunner().invoke(app, ["ingest", "arxiv"], env=env(base, ingest_dsn))
    assert result.exit_code == 1
    assert "stopped early: arxiv: HTTP 400: an HTML page instead of data" in result.output
