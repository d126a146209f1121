"""Documents that cost a worker or the database more than they are worth are refused before they run."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from app import create_app
from tests.integration.graph_support import StatementCounter, seeded_database, serving, settings_for
from tests.server_process import server_process, wovepaper_command


def fragment_chain(levels: int) -> str:
    """`query Q { ...F0 }` and F(i) spreading F(i+1) twice: linear text, 2^levels paths."""
    parts = ["query Q { ...F0 }"]
    parts += [f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(levels)]
    parts.append(f"fragment F{levels} on Query {{ __typename }}")
    return " ".join(parts)


FAN_OUT = """{ researchers(first: 100) { nodes { network(depth: 2, limit: 200) { nodes { researcher {
  network(depth: 2) { nodes { researcher { name } } } } } } } } }"""


@pytest.fixture(scope="module")
def served(database_url: str, redis_url: str, cache_namespace: str, tmp_path_factory: Any) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    env |= {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "WOVEPAPER_CACHE_NAMESPACE": cache_namespace,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
    }
    # A server stuck in a synchronous walk (as before the limits) cannot stop on SIGINT; it is killed then.
    log = tmp_path_factory.mktemp("limits") / "serve.log"
    with server_process([*wovepaper_command(), "serve"], env, log) as server:
        yield server.url


async def test_fragment_explosion_is_refused_and_the_worker_keeps_answering(served: str) -> None:
    document = fragment_chain(40)
    assert len(document) < 2000
    async with httpx.AsyncClient(base_url=served, timeout=30) as client:
        bomb = asyncio.create_task(client.post("/graphql", json={"query": document}))
        await asyncio.sleep(0.05)
        other = await client.post("/graphql", json={"query": "{ __typename }"})
        health = await client.get("/healthz")
        response = await bomb
    assert other.json() == {"data": {"__typename": "Query"}}
    assert health.status_code == 200
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "TOO_MANY_FIELDS", error
    assert error["extensions"]["fields"] == 2**31 - 1  # 2^40 paths, saturated at a GraphQL Int


async def test_fragment_figures_count_every_path(served: str) -> None:
    """Measured once per fragment, still counted per spread: 2^12 aliased fields are 4096 aliases."""
    document = fragment_chain(12).replace("{ __typename }", "{ a: __typename }")
    async with httpx.AsyncClient(base_url=served, timeout=30) as client:
        body = (await client.post("/graphql", json={"query": document})).json()
    assert body["errors"][0]["extensions"]["code"] == "TOO_MANY_ALIASES"
    assert body["errors"][0]["extensions"]["aliases"] == 4096


async def test_repeated_fields_are_refused_before_the_quadratic_rules(served: str) -> None:
    document = "{ u" + uuid.uuid4().hex[:8] + ": __typename " + "papers { totalCount } " * 478 + "}"
    assert len(document) < 11_000
    async with httpx.AsyncClient(base_url=served, timeout=30) as client:
        body = (await client.post("/graphql", json={"query": document})).json()
    assert body["errors"][0]["extensions"]["code"] == "TOO_MANY_FIELDS", body
    assert body["errors"][0]["extensions"]["repeated"] == 478


async def test_repeated_fields_through_fragments_and_many_spreads_are_refused(served: str) -> None:
    """The same 380 `papers` gathered from 20 fragments took graphql-core a second; 180 spreads 350 ms."""
    spread = " ".join(f"...F{i}" for i in range(20))
    fragments = " ".join(f"fragment F{i} on Query {{ " + "papers { totalCount } " * 19 + "}" for i in range(20))
    many = " ".join(f"...G{i}" for i in range(60))
    small = " ".join(f"fragment G{i} on Query {{ __typename }}" for i in range(60))
    async with httpx.AsyncClient(base_url=served, timeout=30) as client:
        gathered = (await client.post("/graphql", json={"query": f"{{ {spread} }} {fragments}"})).json()
        spreads = (await client.post("/graphql", json={"query": f"{{ {many} }} {small}"})).json()
    assert gathered["errors"][0]["extensions"]["code"] == "TOO_MANY_FIELDS"
    assert gathered["errors"][0]["extensions"]["repeated"] == 380
    assert spreads["errors"][0]["extensions"]["code"] == "TOO_MANY_FRAGMENTS"
    assert spreads["errors"][0]["extensions"]["spreads"] == 60


@pytest.fixture(scope="module")
async def seeded(make_database: Any) -> Any:
    return await seeded_database(make_database, "query-limits")


async def test_fan_out_is_refused_before_any_sql(seeded: Any) -> None:
    statements = StatementCounter()
    app = create_app(settings_for(seeded.dsn), query_logger=statements)
    async with serving(app) as client:
        statements.reset()
        body = (await client.post("/graphql", json={"query": FAN_OUT})).json()
    assert statements.statements == []
    error = body["errors"][0]
    assert error["extensions"]["code"] == "QUERY_TOO_COMPLEX"
    ext = error["extensions"]
    # 100 researchers + 100 x 200 network nodes + 20,000 x 100 inner network nodes.
    assert ext["nodeCount"] == 100 + 100 * 200 + 100 * 200 * 100
    assert ext["maxNodes"] == 50_000 and ext["maxCost"] == 5_000
    assert ext["cost"] > 5_000


async def test_many_large_sitemap_pages_are_priced(seeded: Any) -> None:
    aliases = " ".join(f"s{i}: sitemap(kind: RESEARCHER, first: 5000) {{ entries {{ slug }} }}" for i in range(15))
    statements = StatementCounter()
    app = create_app(settings_for(seeded.dsn), query_logger=statements)
    async with serving(app) as client:
        statements.reset()
        body = (await client.post("/graphql", json={"query": "{ " + aliases + " }"})).json()
        assert statements.statements == []
        assert body["errors"][0]["extensions"]["code"] == "QUERY_TOO_COMPLEX"
        assert body["errors"][0]["extensions"]["nodeCount"] == 75_000
        # The limit reads variables too: the same page size through a variable is the same price.
        by_variable = (
            await client.post(
                "/graphql",
                json={
                    "query": "query($n: Int) { " + aliases.replace("first: 5000", "first: $n") + " }",
                    "variables": {"n": 5000},
                },
            )
        ).json()
        assert by_variable["errors"][0]["extensions"]["nodeCount"] == 75_000
        one = await client.post("/graphql", json={"query": "{ sitemap(kind: PAPER, first: 10) { hasNextPage } }"})
        assert "errors" not in one.json()


async def test_error_codes_name_what_failed(seeded: Any) -> None:
    app = create_app(settings_for(seeded.dsn, max_depth=3, max_tokens=100), query_logger=StatementCounter())
    cases = {
        "{ papers { nodes { id } ": "GRAPHQL_PARSE_FAILED",
        "{ noSuchField }": "GRAPHQL_VALIDATION_FAILED",
        "{ papers { nodes { authors { researcher { papers { nodes { id } } } } } } }": "QUERY_TOO_DEEP",
        "{ " + " ".join(f"a{i}: __typename" for i in range(16)) + " }": "TOO_MANY_ALIASES",
        "{ " + "__typename " * 120 + "}": "TOO_MANY_TOKENS",
    }
    async with serving(app) as client:
        for document, code in cases.items():
            body = (await client.post("/graphql", json={"query": document})).json()
            assert body["errors"][0]["extensions"]["code"] == code, (document, body)
        undeclared = (
            await client.post("/graphql", json={"query": "{ __typename }", "variables": {"pad": "x" * 10}})
        ).json()
        assert undeclared["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert "$pad" in undeclared["errors"][0]["message"]


HUGE = "9" * 5000


@pytest.mark.parametrize(
    "document",
    [
        f"{{ papers(first: {HUGE}) {{ totalCount }} }}",
        f"{{ papers(page: {HUGE}) {{ totalCount }} }}",
        f"{{ papers(first: -{HUGE}) {{ totalCount }} }}",
        f"{{ researchers(first: 1, filter: {{minHIndex: {HUGE}}}) {{ totalCount }} }}",
        f"query($n: Int = {HUGE}) {{ papers(first: $n) {{ totalCount }} }}",
        f"{{ papers(first: {HUGE}.5e{HUGE}) {{ totalCount }} }}",
        f"{{ papers(first: 1) @include(if: {HUGE}) {{ totalCount }} }}",
        f'{{ papers(first: 1, filter: {{publishedFrom: "{HUGE}"}}) {{ totalCount }} }}',
    ],
    ids=["first", "page", "negative", "input-field", "default", "float", "directive", "date"],
)
async def test_number_literals_past_any_type_are_validation_errors(seeded: Any, document: str) -> None:
    """A 5,000-digit literal is more than Python turns into an int: the document is invalid, not a bug of ours, and
    the answer does not repeat the 5,000 digits."""
    statements = StatementCounter()
    app = create_app(settings_for(seeded.dsn), query_logger=statements)
    async with serving(app) as client:
        statements.reset()
        response = await client.post("/graphql", json={"query": document})
    error = response.json()["errors"][0]
    assert error["extensions"]["code"] == "GRAPHQL_VALIDATION_FAILED", error
    assert len(error["message"]) < 500 and statements.statements == []


async def test_number_variables_past_any_type_are_bad_input(seeded: Any) -> None:
    app = create_app(settings_for(seeded.dsn), query_logger=StatementCounter())
    query = (
        "query($n: Int, $d: Date, $c: String) "
        "{ papers(first: $n, after: $c, filter: {publishedFrom: $d}) { totalCount } }"
    )
    async with serving(app) as client:
        for variables in ({"n": HUGE}, {"n": -(2**40)}, {"n": 1.5}, {"d": HUGE}, {"d": "99999-01-01"}, {"c": HUGE}):
            body = (await client.post("/graphql", json={"query": query, "variables": variables})).json()
            error = body["errors"][0]
            assert error["extensions"]["code"] == "BAD_USER_INPUT", (variables, body)
            assert len(error["message"]) < 500, variables
