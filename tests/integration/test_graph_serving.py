"""Serving /graphql: limits, error masking, transports, timeouts; RSS and the sitemap listing."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from xml.etree import ElementTree

import pytest
import strawberry

from schema import build_schema
from settings import Settings
from tests.integration.graph_support import PAPERS, Graph, graph, seeded_database


@strawberry.type
class Faulty:
    @strawberry.field
    def broken(self) -> int | None:
        return {"a": 1}["missing-key"]

    @strawberry.field
    async def slow(self) -> int:
        await asyncio.sleep(5)
        return 1

    @strawberry.field
    async def slow_sql(self, info: strawberry.Info) -> int | None:
        async with info.context.pool.acquire() as conn:
            await conn.execute("SELECT pg_sleep(1)")
        return 1


@pytest.fixture
async def g(make_database) -> AsyncIterator[Graph]:
    seeded = await seeded_database(make_database)
    settings = Settings(DATABASE_URL=seeded.dsn, operation_timeout_s=0.6, statement_timeout_ms=200)
    schema = build_schema(settings, extra_query_types=[Faulty])
    async with graph(seeded, schema=schema, operation_timeout_s=0.6, statement_timeout_ms=200) as g:
        yield g


async def test_unexpected_errors_are_masked_with_a_logged_request_id(g: Graph, caplog) -> None:
    with caplog.at_level(logging.ERROR, logger="wovepaper.graphql"):
        body = await g.query('{ broken paper(id: "2401.00001") { arxivId } }')
    [error] = body["errors"]
    assert error["message"] == "Unexpected error."
    assert "missing-key" not in str(body)
    assert error["extensions"]["code"] == "INTERNAL_SERVER_ERROR"
    request_id = error["extensions"]["requestId"]
    assert request_id and len(request_id) >= 8
    # Other fields still answer; the traceback is in the log under the same id.
    assert body["data"]["paper"] == {"arxivId": "2401.00001"}
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged and logged[0].exc_info and logged[0].exc_info[0] is KeyError


async def test_validation_and_domain_errors_stay_readable(g: Graph) -> None:
    body = await g.query("{ paper(id: 1) { nosuchfield } }")
    assert body["errors"][0]["message"] != "Unexpected error."
    assert "nosuchfield" in str(body["errors"]) or "String" in str(body["errors"])
    body = await g.query('{ paper(id: "???") { title } }')
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_statement_timeout_is_a_timeout_error(g: Graph) -> None:
    body = await g.query('{ slowSql paper(id: "2401.00001") { arxivId } }')
    [error] = body["errors"]
    assert error["extensions"]["code"] == "TIMEOUT"
    assert error["extensions"]["requestId"]
    assert body["data"] == {"slowSql": None, "paper": {"arxivId": "2401.00001"}}


async def test_whole_operation_timeout_is_504(g: Graph) -> None:
    response = await g.client.post("/graphql", json={"query": "{ slow }"})
    assert response.status_code == 504
    assert response.json()["errors"][0]["extensions"]["code"] == "TIMEOUT"


def _nested(depth: int) -> str:
    inner = "name"
    for _ in range(depth):
        inner = f"papers(first: 1) {{ nodes {{ authors {{ researcher {{ {inner} }} }} }} }}"
    return f'{{ researcher(id: "1") {{ {inner} }} }}'


async def test_depth_limit(g: Graph) -> None:
    ok = await g.query(_nested(1))
    assert "errors" not in ok
    body = await g.query(_nested(3))
    assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_DEEP"
    assert "levels deep; at most 10" in body["errors"][0]["message"]
    assert body.get("data") is None


async def test_alias_limit(g: Graph) -> None:
    ok = await g.query("{ " + " ".join(f"a{i}: __typename" for i in range(15)) + " }")
    assert "errors" not in ok
    body = await g.query("{ " + " ".join(f"a{i}: __typename" for i in range(16)) + " }")
    assert "16 aliases found" in body["errors"][0]["message"]
    # Aliases in fragment spreads count each time the fragment is spread.
    spread = await g.query(
        "fragment F on Query { " + " ".join(f"b{i}: __typename" for i in range(8)) + " } { ...F ...F }"
    )
    assert "aliases" in spread["errors"][0]["message"]


async def test_token_limit(g: Graph) -> None:
    body = await g.query("{ " + " ".join(["__typename"] * 2100) + " }")
    assert "tokens" in body["errors"][0]["message"]


async def test_body_over_1mb_is_413(g: Graph) -> None:
    big = {"query": "{ __typename }", "variables": {"pad": "x" * 1_100_000}}
    response = await g.client.post("/graphql", json=big)
    assert response.status_code == 413

    async def chunks():  # no Content-Length: the limit holds while streaming too
        for _ in range(12):
            yield b" " * 100_000

    streamed = await g.client.post("/graphql", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413


async def test_queries_over_get_are_refused_but_graphiql_is_served(g: Graph) -> None:
    response = await g.client.get("/graphql", params={"query": "{ __typename }"})
    assert response.status_code in (400, 405)
    ide = await g.client.get("/graphql", headers={"accept": "text/html"})
    assert ide.status_code == 200 and "graphiql" in ide.text.lower()


async def test_batching_is_off(g: Graph) -> None:
    response = await g.client.post("/graphql", json=[{"query": "{ __typename }"}, {"query": "{ __typename }"}])
    assert response.status_code == 400


async def test_rss_latest(g: Graph) -> None:
    response = await g.client.get("/rss/latest.xml")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/rss+xml")
    root = ElementTree.fromstring(response.content)
    assert root.tag == "rss" and root.attrib["version"] == "2.0"
    items = root.findall("./channel/item")
    newest = sorted(PAPERS, key=lambda p: (p.published, g.seeded.paper_ids[p.arxiv_id]), reverse=True)
    assert len(items) == min(50, len(PAPERS))
    assert [i.findtext("title") for i in items[:3]] == [p.title for p in newest[:3]]
    assert items[0].findtext("link") == f"https://www.wovepaper.com/papers/{newest[0].slug}"


SITEMAP_Q = """query($kind: SitemapKind!, $first: Int, $after: String) {
  sitemap(kind: $kind, first: $first, after: $after) { entries { id databaseId slug modifiedAt } hasNextPage endCursor }
}"""


async def test_sitemap_walks_every_entity_once(g: Graph) -> None:
    for kind, expected in (
        ("PAPER", {p.slug for p in PAPERS}),
        ("RESEARCHER", None),
        ("INSTITUTION", None),
    ):
        slugs: list[str] = []
        after = None
        while True:
            data = (await g.data(SITEMAP_Q, {"kind": kind, "first": 7, "after": after}))["sitemap"]
            slugs += [e["slug"] for e in data["entries"]]
            if not data["hasNextPage"]:
                break
            after = data["endCursor"]
        assert len(slugs) == len(set(slugs))
        if expected is not None:
            assert set(slugs) == expected
        else:
            ids = g.seeded.researcher_ids if kind == "RESEARCHER" else g.seeded.institution_ids
            assert len(slugs) == len(ids)
    body = await g.query(SITEMAP_Q, {"kind": "PAPER", "first": 0})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    body = await g.query(SITEMAP_Q, {"kind": "PAPER", "after": "garbage"})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_directive_limit(g: Graph) -> None:
    ok = await g.query("{ " + " ".join(f"a{i}: __typename @include(if: true)" for i in range(10)) + " }")
    assert "errors" not in ok
    # Without aliases: the same field selected again under each directive use.
    many = " ".join("__typename @include(if: true)" for _ in range(51))
    body = await g.query(f"{{ {many} }}")
    directives = [e for e in body["errors"] if e["extensions"]["code"] == "TOO_MANY_DIRECTIVES"]
    assert [e["message"] for e in directives] == ["51 directives found; at most 50 are allowed."]


async def test_validation_is_cached_across_requests() -> None:
    """Requests of one schema share its parse and validation caches (one guard per request, one cache)."""
    from schema.extensions import DocumentGuard, default_extensions

    guards = [e() for e in default_extensions(Settings()) for _ in range(2)]
    caches = {id(g.caches) for g in guards if isinstance(g, DocumentGuard)}
    assert len(caches) == 1
