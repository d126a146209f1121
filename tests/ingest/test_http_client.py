from __future__ import annotations

import json

import httpx
import pytest

from ingest.clients.http import RetryPolicy, SourceClient, read_json, retry_after_seconds
from ingest.clients.openalex import OpenAlexClient
from ingest.clients.semantic_scholar import SemanticScholarClient
from ingest.errors import BudgetExhausted, HTTPStatusFailure, MalformedResponse, TransportFailure
from tests.ingest.conftest import FIXTURES, FakeClock

S2_429 = (FIXTURES / "s2/error_429_REPORTED_2024-2026.json").read_bytes()
OA_BUDGET = (FIXTURES / "openalex/error_429_REPORTED_insufficient-budget_2026.json").read_bytes()
OA_404_HTML = (FIXTURES / "openalex/error_404_work_not_found_HTML_2025-11-04.html").read_bytes()


def scripted(*responses: httpx.Response | Exception) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    queue = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        item = queue.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    return httpx.MockTransport(handler), seen


def client(transport: httpx.MockTransport, clock: FakeClock, **kw: object) -> SourceClient:
    return SourceClient("test", "https://upstream.test", transport=transport, clock=clock, rng=lambda: 0.5, **kw)  # type: ignore[arg-type]


async def test_429_without_retry_after_backs_off_exponentially_with_jitter(clock: FakeClock) -> None:
    transport, seen = scripted(
        httpx.Response(429, content=S2_429),
        httpx.Response(429, content=S2_429),
        httpx.Response(429, content=S2_429),
        httpx.Response(200, json={"ok": 1}),
    )
    c = client(transport, clock, policy=RetryPolicy(base_delay_s=1.0, max_attempts=5))
    assert await c.call("GET", "/x", read_json) == {"ok": 1}
    # Half fixed, half random (rng 0.5 -> 3/4 of the cap): 1, 2, 4 s caps.
    assert clock.sleeps == [0.75, 1.5, 3.0]
    assert c.stats.requests == 4 and c.stats.retries == 3


async def test_jitter_spreads_waits(clock: FakeClock) -> None:
    transport, _ = scripted(httpx.Response(503), httpx.Response(200, json={}))
    c = SourceClient("t", "https://u.test", transport=transport, clock=clock, rng=lambda: 0.0)  # type: ignore[arg-type]
    await c.call("GET", "/x", read_json)
    transport2, _ = scripted(httpx.Response(503), httpx.Response(200, json={}))
    c2 = SourceClient("t", "https://u.test", transport=transport2, clock=clock, rng=lambda: 1.0)  # type: ignore[arg-type]
    await c2.call("GET", "/x", read_json)
    assert clock.sleeps == [0.5, 1.0]


async def test_retry_after_seconds_and_http_date(clock: FakeClock) -> None:
    transport, _ = scripted(
        httpx.Response(503, headers={"Retry-After": "42"}),
        httpx.Response(200, json=[]),
    )
    await client(transport, clock).call("GET", "/x", read_json)
    assert clock.sleeps == [42.0]
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no wait
    assert retry_after_seconds("soon") is None


async def test_retries_run_out(clock: FakeClock) -> None:
    transport, seen = scripted(*[httpx.Response(503) for _ in range(3)])
    with pytest.raises(HTTPStatusFailure) as err:
        await client(transport, clock, policy=RetryPolicy(max_attempts=3)).call("GET", "/x", read_json)
    assert err.value.status == 503 and len(seen) == 3


async def test_404_html_is_a_clear_error_not_retried(clock: FakeClock) -> None:
    transport, seen = scripted(httpx.Response(404, content=OA_404_HTML, headers={"Content-Type": "text/html"}))
    with pytest.raises(HTTPStatusFailure) as err:
        await client(transport, clock).call("GET", "/works/x", read_json)
    assert err.value.status == 404 and "HTML page" in str(err.value) and len(seen) == 1


async def test_bad_json_is_retried_then_reported(clock: FakeClock) -> None:
    transport, seen = scripted(
        httpx.Response(200, content=b'{"results": [tru'),
        httpx.Response(200, content=OA_404_HTML),
    )
    with pytest.raises(MalformedResponse) as err:
        await client(transport, clock, policy=RetryPolicy(max_attempts=2)).call("GET", "/x", read_json)
    assert "HTML page" in str(err.value) and len(seen) == 2


async def test_connection_errors_are_retried(clock: FakeClock) -> None:
    transport, _ = scripted(httpx.ConnectError("refused"), httpx.Response(200, json={"a": 1}))
    assert await client(transport, clock).call("GET", "/x", read_json) == {"a": 1}
    transport, _ = scripted(httpx.ReadTimeout("slow"), httpx.ReadTimeout("slow"))
    with pytest.raises(TransportFailure):
        await client(transport, clock, policy=RetryPolicy(max_attempts=2)).call("GET", "/x", read_json)


async def test_openalex_budget_exhausted_stops_at_once(clock: FakeClock) -> None:
    transport, seen = scripted(
        httpx.Response(429, content=OA_BUDGET, headers={"X-RateLimit-Remaining-USD": "0", "Retry-After": "36000"})
    )
    oa = OpenAlexClient("https://api.openalex.test", transport=transport, clock=clock)  # type: ignore[arg-type]
    with pytest.raises(BudgetExhausted) as err:
        await oa.works_by_doi(["10.48550/arxiv.2312.07559"])
    assert len(seen) == 1 and clock.sleeps == [] and err.value.retry_after_s == 36000


async def test_openalex_429_with_retry_after_is_honoured(clock: FakeClock) -> None:
    body = (FIXTURES / "openalex/works_list_filter-title.search_PaperQA_arxiv-preprint_2025-09-11.json").read_bytes()
    transport, seen = scripted(
        httpx.Response(429, headers={"Retry-After": "2", "X-RateLimit-Remaining-USD": "12.5"}),
        httpx.Response(200, content=body),
    )
    oa = OpenAlexClient("https://api.openalex.test", api_key="k", transport=transport, clock=clock)  # type: ignore[arg-type]
    works = await oa.works_by_doi(["10.48550/arxiv.2312.07559"])
    assert clock.sleeps == [2.0] and works[0].arxiv_id == "2312.07559"
    params = seen[1].url.params
    assert params["filter"] == "doi:10.48550/arxiv.2312.07559" and params["api_key"] == "k"
    assert set(params["select"].split(",")) >= {"id", "doi", "authorships", "cited_by_count"}


async def test_s2_batch_request_shape(clock: FakeClock) -> None:
    transport, seen = scripted(httpx.Response(200, json=[None, None]))
    s2 = SemanticScholarClient("https://s2.test/graph/v1", api_key="sekret", transport=transport, clock=clock)  # type: ignore[arg-type]
    assert await s2.papers_by_arxiv_id(["2312.07559", "hep-th/0703166"]) == {}
    req = seen[0]
    assert req.method == "POST" and req.url.path == "/graph/v1/paper/batch"
    assert json.loads(req.content) == {"ids": ["ARXIV:2312.07559", "ARXIV:hep-th/0703166"]}
    assert req.headers["x-api-key"] == "sekret" and req.url.params["fields"] == "externalIds,citationCount,authors"


async def test_s2_author_papers_follow_next_until_absent(clock: FakeClock) -> None:
    first = json.loads((FIXTURES / "s2/author_1723755_papers_offset0_next100.json").read_bytes())
    last = json.loads((FIXTURES / "s2/author_1723755_papers_offset800_last-page-no-next.json").read_bytes())
    first["next"] = 800  # skip the unrecorded middle pages
    transport, seen = scripted(httpx.Response(200, json=first), httpx.Response(200, json=last))
    s2 = SemanticScholarClient("https://s2.test/graph/v1", transport=transport, clock=clock)  # type: ignore[arg-type]
    works = await s2.author_works("1723755")
    assert len(works) == len(first["data"]) + len(last["data"])
    assert [r.url.params["offset"] for r in seen] == ["0", "800"]


async def test_pacing_spaces_requests(clock: FakeClock) -> None:
    transport, _ = scripted(*[httpx.Response(200, json={}) for _ in range(3)])
    c = client(transport, clock, min_interval_s=0.5)
    for _ in range(3):
        await c.call("GET", "/x", read_json)
    assert clock.sleeps == [0.5, 0.5]
