"""`wovepaper ingest arxiv | enrich | all` as operators run them, against loopback upstreams."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from cli import app
from tests.fake_model import ANALYSIS_USAGE, analyst, fake_model_in_thread
from tests.ingest.conftest import FakeOAI
from tests.ingest.upstreams import FakeScholarly, enrich_archive_page


@pytest.fixture
def upstreams() -> Iterator[tuple[str, FakeOAI, FakeScholarly]]:
    """One loopback HTTP server: /oai is arXiv, /s2 Semantic Scholar, /oa OpenAlex."""
    oai = FakeOAI(first=enrich_archive_page())
    scholarly = FakeScholarly()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.startswith("/oai"):
                url, fake = "https://oaipmh.arxiv.org" + self.path, oai
            elif self.path.startswith("/s2"):
                url, fake = "https://s2.test/graph/v1" + self.path.removeprefix("/s2"), scholarly
            else:
                url, fake = "https://api.openalex.test" + self.path.removeprefix("/oa"), scholarly
            resp = fake(httpx.Request(self.command, url, content=body))  # type: ignore[operator]
            content = resp.read()
            self.send_response(resp.status_code)
            for k, v in resp.headers.items():
                if k.lower() not in ("content-length", "transfer-encoding"):
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = _serve

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", oai, scholarly
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


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


LLM_UNSET = {"WOVEPAPER_LLM_API_URL": None, "WOVEPAPER_LLM_MODEL": None, "WOVEPAPER_LLM_API_KEY": None}


def test_ingest_analyse_without_a_model_names_the_settings_and_exits_2(
    conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    result = CliRunner().invoke(app, ["ingest", "analyse"], env={"DATABASE_URL": ingest_dsn, **LLM_UNSET})
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: the language model is not configured: set WOVEPAPER_LLM_API_URL and WOVEPAPER_LLM_MODEL "
        "(and WOVEPAPER_LLM_API_KEY when the endpoint needs a key)"
    ]


def test_ingest_analyse_and_all_with_and_without_a_model(
    upstreams: tuple[str, FakeOAI, FakeScholarly], conn: asyncpg.Connection, ingest_dsn: str
) -> None:
    base, _, _ = upstreams
    runner = CliRunner()
    result = runner.invoke(app, ["ingest", "all"], env={**env(base, ingest_dsn), **LLM_UNSET})
    assert result.exit_code == 0, result.output
    assert "analyse: skipped (no language model configured)" in result.output

    key = "sk-cli-5e4d3c2b1a"
    with fake_model_in_thread(analyst) as model:
        model_env = {
            **env(base, ingest_dsn),
            "WOVEPAPER_LLM_API_URL": model.base_url,
            "WOVEPAPER_LLM_MODEL": "fake-analyst",
            "WOVEPAPER_LLM_API_KEY": key,
            "WOVEPAPER_LLM_RPS": "1000",
        }
        result = runner.invoke(app, ["ingest", "analyse", "--limit", "2"], env=model_env)
        assert result.exit_code == 0, result.output
        tokens = 2 * sum(ANALYSIS_USAGE)
        assert (
            f"analyse: seen 2, inserted 0, updated 2, skipped 0, failed 0, requests 2, retries 0, tokens {tokens}"
            in (result.output)
        )
        # `all` analyses the rest as its last stage.
        result = runner.invoke(app, ["ingest", "all"], env=model_env)
        assert result.exit_code == 0, result.output
        assert "analyse: seen 1, inserted 0, updated 1" in result.output
    assert key not in result.output
    assert asyncio.run(_count(ingest_dsn, "SELECT count(*) FROM papers WHERE NOT analysed")) == 0
