"""Persisted documents (the site's by id, APQ), CDN headers and 304s, the purge hook, CORS, exposure settings."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from app import OPERATIONS_DIR, create_app
from cdn.purge import HttpPurge
from db.cache.invalidation import attach_purge, invalidate
from db.cache.store import CacheStore
from db.records import Touched
from edge.persisted import build_manifest, operation_documents
from frontend_contract.manifest import MANIFEST_PATH, render
from tests.integration.graph_support import StatementCounter, seeded_database, serving, settings_for

_ns = itertools.count()
RESEARCHER_PAGE = operation_documents(OPERATIONS_DIR)["ResearcherPage"]
RESEARCHER_PAGE_ID = hashlib.sha256(RESEARCHER_PAGE.encode()).hexdigest()
AD_HOC = "query Mine { papers(first: 1) { nodes { id title } } }"
AD_HOC_HASH = hashlib.sha256(AD_HOC.encode()).hexdigest()


@pytest.fixture(scope="module")
async def seeded(make_database: Any) -> Any:
    return await seeded_database(make_database, "edge-persisted")


@contextlib.asynccontextmanager
async def api(
    seeded: Any, redis_url: str, namespace: str, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    counter = StatementCounter()
    application = create_app(
        settings_for(seeded.dsn, REDIS_URL=redis_url, cache_namespace=f"{namespace}-p{next(_ns)}", **settings),
        query_logger=counter,
    )
    async with serving(application) as client:
        yield client, counter


def test_the_committed_manifest_is_current() -> None:
    """The site ships frontend_contract/persisted-documents.json: regenerate it with the operations."""
    assert MANIFEST_PATH.read_bytes() == render(build_manifest(OPERATIONS_DIR)), (
        "stale: run .venv/bin/python -m frontend_contract.manifest"
    )


async def test_persisted_get_is_cdn_cacheable_with_etag_and_tags(seeded: Any, redis_url: str, cache_namespace: str):
    wumo = seeded.researcher_ids["wumo"]
    params = {"documentId": f"sha256:{RESEARCHER_PAGE_ID}", "variables": json.dumps({"id": str(wumo)})}
    async with api(seeded, redis_url, cache_namespace) as (client, counter):
        first = await client.get("/graphql", params=params)
        assert first.status_code == 200, first.text
        assert first.json()["data"]["researcher"]["name"] == "Wumo Yan"
        assert first.headers["cache-control"] == "public, max-age=60, stale-while-revalidate=600"
        etag = first.headers["etag"]
        assert etag.startswith('"') and not etag.startswith("W/")
        tags = first.headers["surrogate-key"].split()
        assert f"researcher:{wumo}" in tags and first.headers["cache-tag"] == ",".join(tags)
        assert any(t.startswith("paper:") for t in tags)
        # Institutions are on the page by name only (affiliations, authors): their figures do not purge it.
        assert any(t.startswith("name:institution:") for t in tags)
        assert not any(t.startswith("institution:") for t in tags)
        # Again, from the response cache: same body, same tag; with If-None-Match a 304 and no body.
        counter.reset()
        again = await client.get("/graphql", params=params)
        assert again.headers["x-cache"] == "hit" and again.content == first.content and again.headers["etag"] == etag
        assert counter.statements == []
        not_modified = await client.get("/graphql", params=params, headers={"if-none-match": etag})
        assert not_modified.status_code == 304 and not_modified.content == b""
        assert not_modified.headers["etag"] == etag
        # A 304's Content-Length may only be the full answer's (RFC 9110 8.6): none is sent.
        assert "content-length" not in not_modified.headers
        # Weak comparison (RFC 9110 13.1.2): a proxy that compresses the answer (nginx's gzip, a CDN) hands the
        # browser a weak tag, which it sends back; `*` names any current answer.
        for named in (f"W/{etag}", f'"other", W/{etag}', "*"):
            revalidated = await client.get("/graphql", params=params, headers={"if-none-match": named})
            assert (revalidated.status_code, revalidated.content) == (304, b""), named
        for other in ('"other"', 'W/"other"'):
            assert (await client.get("/graphql", params=params, headers={"if-none-match": other})).status_code == 200
        # The same document by POST runs (and is cached) too, without CDN headers.
        post = await client.post("/graphql", json={"documentId": RESEARCHER_PAGE_ID, "variables": {"id": str(wumo)}})
        assert post.json() == first.json() and "etag" not in post.headers
        unknown = await client.get("/graphql", params={"documentId": "0" * 64})
        assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
        # An error is never public.
        bad = await client.get("/graphql", params={**params, "variables": json.dumps({"id": "no such id!"})})
        assert bad.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert bad.headers["cache-control"] == "no-store"


async def test_keyed_and_signed_in_responses_are_private(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    from typer.testing import CliRunner

    from cli import app as cli_app

    result = await asyncio.to_thread(
        CliRunner().invoke, cli_app, ["keys", "create", "--name", "site-server"], env={"DATABASE_URL": seeded.dsn}
    )
    key = result.stdout.strip()
    params = {"documentId": RESEARCHER_PAGE_ID, "variables": json.dumps({"id": str(seeded.researcher_ids["wumo"])})}
    async with api(seeded, redis_url, cache_namespace) as (client, _):
        for _ in range(2):
            keyed = await client.get("/graphql", params=params, headers={"x-api-key": key})
            assert keyed.status_code == 200 and keyed.headers["cache-control"] == "private, no-store"
            assert "x-cache" not in keyed.headers and "surrogate-key" not in keyed.headers


async def test_automatic_persisted_queries(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    extensions = {"persistedQuery": {"version": 1, "sha256Hash": AD_HOC_HASH}}
    async with api(seeded, redis_url, cache_namespace) as (client, _):
        unknown = await client.post("/graphql", json={"extensions": extensions})
        assert unknown.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
        mismatch = await client.post("/graphql", json={"query": AD_HOC + " ", "extensions": extensions})
        assert mismatch.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_HASH_MISMATCH"
        registered = await client.post("/graphql", json={"query": AD_HOC, "extensions": extensions})
        assert "errors" not in registered.json()
        by_hash = await client.post("/graphql", json={"extensions": extensions})
        assert by_hash.json() == registered.json()
        got = await client.get("/graphql", params={"extensions": json.dumps(extensions)})
        assert got.json() == registered.json()
        assert got.headers["cache-control"].startswith("public") and "lists" in got.headers["surrogate-key"].split()


def persisted(document: str) -> dict[str, Any]:
    return {"persistedQuery": {"version": 1, "sha256Hash": hashlib.sha256(document.encode()).hexdigest()}}


async def registered(client: httpx.AsyncClient, document: str) -> bool:
    """Whether the server knows `document` by its hash alone (it runs it, or refuses to for another reason)."""
    body = (await client.post("/graphql", json={"extensions": persisted(document)})).json()
    return "data" in body or body["errors"][0]["extensions"]["code"] != "PERSISTED_QUERY_NOT_FOUND"


async def test_the_registry_keeps_the_documents_used_last(
    seeded: Any, redis_url: str, cache_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client cannot fill Redis, nor lock other clients out: past the registry's size the document used least
    lately is forgotten, and a new valid document always registers. Past 16 KB documents run but are not kept."""
    import edge.persisted

    monkeypatch.setattr(edge.persisted, "MAX_REGISTERED", 2)
    monkeypatch.setattr(edge.persisted, "TOUCH_S", 0)  # every use marked (an hour apart at most in service)
    documents = [f"query R{i} {{ __typename }}" for i in range(5)]
    async with api(seeded, redis_url, cache_namespace) as (client, _):
        for document in documents[:2]:
            ran = await client.post("/graphql", json={"query": document, "extensions": persisted(document)})
            assert ran.json() == {"data": {"__typename": "Query"}}
        assert await registered(client, documents[0])  # used: R1 is now the one used least lately
        await client.post("/graphql", json={"query": documents[2], "extensions": persisted(documents[2])})
        assert [await registered(client, d) for d in documents[:3]] == [True, False, True]
        for document in documents[3:]:
            await client.post("/graphql", json={"query": document, "extensions": persisted(document)})
            assert await registered(client, document)
        big = "query Big { __typename }" + " " * 17_000
        ran = await client.post("/graphql", json={"query": big, "extensions": persisted(big)})
        assert ran.json() == {"data": {"__typename": "Query"}}
        assert not await registered(client, big)


@pytest.mark.parametrize(
    ("document", "code"),
    [
        ("query Broken { papers(first: 1) {", "GRAPHQL_PARSE_FAILED"),
        ("query Unknown { noSuchField }", "GRAPHQL_VALIDATION_FAILED"),
        ("query Huge { papers(first: " + "9" * 5000 + ") { totalCount } }", "GRAPHQL_VALIDATION_FAILED"),
        (
            "query Deep { papers { nodes { authors { researcher { papers { nodes { authors { researcher { papers "
            "{ nodes { authors { researcher { name } } } } } } } } } } } } }",
            "QUERY_TOO_DEEP",
        ),
        ("query Undeclared { __typename }", "BAD_USER_INPUT"),
    ],
    ids=["parse", "validation", "literal", "limits", "variables"],
)
async def test_only_documents_that_run_are_registered(
    seeded: Any, redis_url: str, cache_namespace: str, document: str, code: str
) -> None:
    variables = {"stray": 1} if code == "BAD_USER_INPUT" else None
    async with api(seeded, redis_url, cache_namespace) as (client, _):
        sent = await client.post(
            "/graphql", json={"query": document, "variables": variables, "extensions": persisted(document)}
        )
        assert sent.json()["errors"][0]["extensions"]["code"] == code
        assert not await registered(client, document)


async def test_a_registration_is_charged_and_a_spent_budget_registers_nothing(
    seeded: Any, redis_url: str, cache_namespace: str
) -> None:
    async with api(seeded, redis_url, cache_namespace, anon_points_per_hour=2) as (client, _):
        first = await client.post("/graphql", json={"query": AD_HOC, "extensions": persisted(AD_HOC)})
        assert "errors" not in first.json() and first.headers["x-ratelimit-used"] == "1"
        await client.post("/graphql", json={"query": "{ __typename }"})
        other = "query Other { __typename }"
        refused = await client.post("/graphql", json={"query": other, "extensions": persisted(other)})
        assert refused.status_code == 429
        assert refused.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert not await registered(client, other)


async def test_only_trusted_documents(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    async with api(seeded, redis_url, cache_namespace, trusted_documents="only") as (client, _):
        refused = await client.post("/graphql", json={"query": AD_HOC})
        assert refused.status_code == 400
        assert refused.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_REQUIRED"
        apq = await client.post(
            "/graphql",
            json={"query": AD_HOC, "extensions": {"persistedQuery": {"version": 1, "sha256Hash": AD_HOC_HASH}}},
        )
        assert apq.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_REQUIRED"
        site = await client.post(
            "/graphql", json={"documentId": RESEARCHER_PAGE_ID, "variables": {"id": str(seeded.researcher_ids["wumo"])}}
        )
        assert "errors" not in site.json()
        as_text = await client.post(
            "/graphql", json={"query": RESEARCHER_PAGE, "variables": {"id": str(seeded.researcher_ids["wumo"])}}
        )
        assert as_text.json() == site.json()
    async with api(seeded, redis_url, cache_namespace, trusted_documents="off") as (client, _):
        off = await client.post("/graphql", json={"documentId": RESEARCHER_PAGE_ID, "variables": {"id": "1"}})
        assert off.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_SUPPORTED"


class _Receiver(BaseHTTPRequestHandler):
    received: list[Any] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        _Receiver.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def purge_receiver() -> Iterator[str]:
    _Receiver.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/purge"
    finally:
        server.shutdown()
        server.server_close()


async def test_invalidation_purges_the_cdn_tags(seeded: Any, redis_url: str, cache_namespace: str, purge_receiver):
    from db.cache.client import create_redis

    store = CacheStore(create_redis(redis_url, timeout_s=1.0), namespace=f"{cache_namespace}-purge", ttl_s=60)
    purge = HttpPurge(purge_receiver)
    try:
        attach_purge(store, purge)
        await invalidate(store, Touched(papers={3}, researchers={7}, new_papers={"2501.00001"}))
    finally:
        await purge.aclose()
        await store.aclose()
    assert _Receiver.received == [
        {
            "tags": [
                "lists",
                "missing:paper:2501.00001",
                "missing:researcher:any",
                "paper:3",
                "researcher:7",
                "name:researcher:7",
            ]
        }
    ]


async def test_cors_preflight_and_credentials(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    site = "https://wovepaper.example"

    async def preflight(path: str, origin: str, headers: str = "content-type") -> Any:
        asked = {"origin": origin, "access-control-request-method": "POST", "access-control-request-headers": headers}
        return await client.options(path, headers=asked)

    async with api(seeded, redis_url, cache_namespace, cors_origins=site) as (client, _):
        allowed = await preflight("/graphql", site)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == site
        assert allowed.headers["access-control-allow-credentials"] == "true"
        call = await client.post("/graphql", json={"query": "{ __typename }"}, headers={"origin": site})
        assert call.headers["access-control-allow-origin"] == site
        assert "x-ratelimit-remaining" in call.headers["access-control-expose-headers"]
        other = await preflight("/graphql", "https://elsewhere.example")
        assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
        # The chat dock's retries send their key from the browser.
        chat = await preflight("/chat", site, "authorization, content-type, idempotency-key")
        assert chat.status_code == 200 and "idempotency-key" in chat.headers["access-control-allow-headers"].lower()


async def test_graphiql_and_introspection_can_be_closed(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    introspect = {"query": "{ __schema { types { name } } }"}
    async with api(seeded, redis_url, cache_namespace) as (client, _):
        assert (await client.get("/graphql", headers={"accept": "text/html"})).status_code == 200
        assert "errors" not in (await client.post("/graphql", json=introspect)).json()
        assert (
            "Did you mean"
            in (await client.post("/graphql", json={"query": "{ paperz }"})).json()["errors"][0]["message"]
        )
    async with api(seeded, redis_url, cache_namespace, graphiql=False, introspection=False) as (client, _):
        assert (await client.get("/graphql", headers={"accept": "text/html"})).status_code == 404
        closed = (await client.post("/graphql", json=introspect)).json()
        assert closed["errors"][0]["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED"
        typo = (await client.post("/graphql", json={"query": "{ paperz }"})).json()
        assert "Did you mean" not in typo["errors"][0]["message"]
        assert (await client.post("/graphql", json={"query": "{ __typename }"})).json() == {
            "data": {"__typename": "Query"}
        }
