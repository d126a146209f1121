"""API keys never reach an error, a log line or a summary, and never follow a redirect to another host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from ingest.clients.http import RetryPolicy
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.redact import Redactor, strip_credentials
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.errors import UpstreamError
from ingest.pipeline import enrich, harvest_arxiv
from tests.ingest.conftest import FakeClock, FakeOAI
from tests.ingest.loopback import http_server, serve
from tests.ingest.upstreams import FakeScholarly, Responder, enrich_archive_page

ROOT = Path(__file__).resolve().parents[2]
OA_KEY = "oa-key-5f0c2e9d7b41"
S2_KEY = "s2-key-8a1d4c6e3f27"


def html_echo(status: int) -> Responder:
    """An error page that quotes the request's URL, as proxies' and frameworks' error pages do."""

    def respond(request: httpx.Request) -> httpx.Response:
        page = f"<!doctype html><html><body><h1>{status}</h1><p>while fetching {request.url}</p></body></html>"
        return httpx.Response(status, html=page, headers={"Retry-After": "0"})

    return respond


def key_echo(request: httpx.Request) -> httpx.Response:
    """A JSON error that quotes the request's key header."""
    key = request.headers.get("x-api-key")
    return httpx.Response(403, json={"message": f"Forbidden: key {key} may not call {request.url.path}"})


def failing_upstreams() -> FakeScholarly:
    """Batch 1: OpenAlex sends an HTML page with 200, then 503s with HTML until the attempts run out.
    Batch 2: Semantic Scholar refuses the paper batch with a body that quotes the key. Batch 3 goes through."""
    return FakeScholarly(
        oa_script={0: html_echo(200), **{n: html_echo(503) for n in range(1, 6)}},
        s2_script={1: key_echo},
    )


async def test_keys_stay_out_of_errors_logs_and_the_summary(
    conn: asyncpg.Connection, clock: FakeClock, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level("DEBUG")
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock))
    fake = failing_upstreams()
    transport = httpx.MockTransport(fake)
    policy = RetryPolicy(max_attempts=6)
    s2 = SemanticScholarClient(
        "https://s2.test/graph/v1", api_key=S2_KEY, transport=transport, clock=clock, policy=policy
    )  # type: ignore[arg-type]
    oa = OpenAlexClient("https://api.openalex.test", api_key=OA_KEY, transport=transport, clock=clock, policy=policy)  # type: ignore[arg-type]
    try:
        summary = await enrich(conn, s2, oa, batch_size=1)
        # The same failures raised straight from the clients, as a caller of theirs sees them.
        fake.oa_requests.clear()
        fake.oa_script = {n: html_echo(503) for n in range(6)}
        with pytest.raises(UpstreamError) as oa_error:
            await oa.works_by_doi(["10.48550/arxiv.2312.07559"])
        fake.s2_requests.clear()
        fake.s2_script = {0: key_echo}
        with pytest.raises(UpstreamError) as s2_error:
            await s2.papers_by_arxiv_id(["2312.07559"])
    finally:
        await s2.aclose()
        await oa.aclose()
    # The keys were sent, and upstream errors quoted them.
    assert any(r.url.params.get("api_key") == OA_KEY for r in fake.oa_requests)
    assert summary.failed == 2 and summary.stopped is None
    captured = capsys.readouterr()
    errors = [oa_error.value, s2_error.value]
    everything = "\n".join(
        [caplog.text, summary.line("enrich"), captured.out, captured.err]
        + [f"{e} {e!r} {e.url}" for e in errors]
        + [str(getattr(r, "url", "")) for r in caplog.records]
    )
    assert OA_KEY not in everything and S2_KEY not in everything
    # Not silence: the URLs and messages are there, with the keys masked.
    assert "api_key=***" in str(oa_error.value) and "api_key=***" in caplog.text
    assert "Forbidden: key *** may not call" in str(s2_error.value)
    assert "HTTP Request: GET https://api.openalex.test/works?" in caplog.text  # httpx's own request lines


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=ROOT,
        env=base | env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_ingest_command_prints_no_key(conn: asyncpg.Connection, ingest_dsn: str) -> None:
    with serve(FakeOAI(first=enrich_archive_page()), failing_upstreams()) as loop:
        env = loop.env(ingest_dsn) | {"WOVEPAPER_OPENALEX_API_KEY": OA_KEY, "WOVEPAPER_S2_API_KEY": S2_KEY}
        harvest = _run_cli("ingest", "arxiv", env=env)
        enriched = _run_cli("ingest", "enrich", "--batch-size", "1", env=env)
        assert any(r.url.params.get("api_key") == OA_KEY for r in loop.scholarly.oa_requests)
    assert harvest.returncode == 0, harvest.stderr
    output = "\n".join([harvest.stdout, harvest.stderr, enriched.stdout, enriched.stderr])
    assert OA_KEY not in output and S2_KEY not in output
    assert enriched.returncode == 1
    assert "enrich: seen 3," in enriched.stdout and "failed 2" in enriched.stdout
    assert "api_key=***" in enriched.stderr and "Forbidden: key *** may not call" in enriched.stderr


# --- redirects ------------------------------------------------------------------------------------------


Seen = list[tuple[str, str, dict[str, str], bytes]]  # method, path with query, headers, body


@contextmanager
def recording(host: str, answer: Callable[[str, str], tuple[int, dict[str, str], bytes]]) -> Iterator[tuple[int, Seen]]:
    """A loopback HTTP server on `host` that records every request and answers `answer(method, path)`."""
    seen: Seen = []

    def record(method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str], bytes]:
        seen.append((method, path, {k.lower(): v for k, v in headers.items()}, body))
        return answer(method, path)

    with http_server(record, host) as port:
        yield port, seen


def _target(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    body = b"[null]" if path.startswith("/paper/batch") else b'{"meta": {"count": 0}, "results": []}'
    return 200, {"Content-Type": "application/json"}, body


@pytest.fixture
def other_host() -> Iterator[tuple[int, Seen]]:
    """The host a redirect sends the client to: `localhost`, where the client was given `127.0.0.1`."""
    with recording("127.0.0.1", _target) as server:
        yield server


def _redirecting_to(port: int) -> Callable[[str, str], tuple[int, dict[str, str], bytes]]:
    def answer(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        # The whole request, query included, is sent on: the worst case for a key in the query string.
        return 307, {"Location": f"http://localhost:{port}{path.removeprefix('/graph/v1')}"}, b""

    return answer


async def test_s2_key_header_does_not_follow_a_redirect_to_another_host(other_host: tuple[int, Seen]) -> None:
    port, seen = other_host
    with recording("127.0.0.1", _redirecting_to(port)) as (origin_port, origin_seen):
        s2 = SemanticScholarClient(f"http://127.0.0.1:{origin_port}/graph/v1", api_key=S2_KEY)
        try:
            assert await s2.papers_by_arxiv_id(["2312.07559"]) == {}
        finally:
            await s2.aclose()
    assert origin_seen[0][2]["x-api-key"] == S2_KEY  # the API's own host gets the key
    assert len(seen) == 1
    method, path, headers, body = seen[0]
    assert method == "POST" and path.startswith("/paper/batch?fields=")
    assert json.loads(body) == {"ids": ["ARXIV:2312.07559"]}  # a 307 keeps the request
    assert "x-api-key" not in headers and S2_KEY not in repr(seen)


async def test_openalex_key_parameter_does_not_follow_a_redirect_to_another_host(
    other_host: tuple[int, Seen],
) -> None:
    port, seen = other_host
    with recording("127.0.0.1", _redirecting_to(port)) as (origin_port, origin_seen):
        oa = OpenAlexClient(f"http://127.0.0.1:{origin_port}", api_key=OA_KEY, mailto="ops@example.org")
        try:
            assert await oa.works_by_doi(["10.48550/arxiv.2312.07559"]) == []
        finally:
            await oa.aclose()
    assert f"api_key={OA_KEY}" in origin_seen[0][1]
    assert len(seen) == 1 and seen[0][1].startswith("/works?")
    assert "filter=doi%3A10.48550" in seen[0][1] and "mailto=ops%40example.org" in seen[0][1]  # not a credential
    assert OA_KEY not in repr(seen)


async def test_a_redirect_within_the_origin_keeps_the_key() -> None:
    def answer(method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        if path.startswith("/graph/v1/"):
            return 308, {"Location": path.replace("/graph/v1/", "/graph/v2/")}, b""
        return _target(method, path.removeprefix("/graph/v2"))

    with recording("127.0.0.1", answer) as (port, seen):
        s2 = SemanticScholarClient(f"http://127.0.0.1:{port}/graph/v1", api_key=S2_KEY)
        try:
            await s2.papers_by_arxiv_id(["2312.07559"])
        finally:
            await s2.aclose()
    assert [s[1].split("?")[0] for s in seen] == ["/graph/v1/paper/batch", "/graph/v2/paper/batch"]
    assert all(s[2]["x-api-key"] == S2_KEY for s in seen)


async def test_a_redirect_loop_is_an_error_not_a_hang() -> None:
    with recording("127.0.0.1", lambda m, p: (302, {"Location": p}, b"")) as (port, seen):
        oa = OpenAlexClient(f"http://127.0.0.1:{port}", api_key=OA_KEY)
        try:
            with pytest.raises(UpstreamError) as err:
                await oa.authors(["A1"])
        finally:
            await oa.aclose()
    assert "more than 5 redirects" in str(err.value) and OA_KEY not in str(err.value)
    assert len(seen) == 6


def test_redactor_masks_by_name_and_by_value() -> None:
    r = Redactor(["k3y/with+chars &", "short"])
    assert r.text("GET /w?api_key=anything&x=1") == "GET /w?api_key=***&x=1"
    in_a_url = str(httpx.URL("https://h.test/", params={"k": "k3y/with+chars &"}))
    assert r.text(f"echo k3y/with+chars & {in_a_url}") == "echo *** https://h.test/?k=***"
    assert r.text("a short word") == "a short word"  # too short to be a key: left alone
    request = httpx.Request("GET", "https://h.test/p?api_key=1&q=2", headers={"x-api-key": "1", "accept": "x"})
    strip_credentials(request)
    assert str(request.url) == "https://h.test/p?q=2" and "x-api-key" not in request.headers
