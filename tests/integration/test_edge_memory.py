"""What a worker remembers of its requests: variables bounded before anything reads them, and the response cache's
keys, the documents GraphQL ran and their measures kept only once a request passed its size, cost and rate limit,
keyed so that what a client sends cannot grow them (bounded/)."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from app import create_app
from db.paging import encode_global_id
from edge.response_cache import ResponseCache
from schema import build_schema
from schema.extensions import Caches, DocumentGuard
from settings import Settings
from tests.integration import test_response_cache as shared
from tests.integration.inprocess import served
from tests.integration.test_query_limits import FAN_OUT
from tests.integration.test_response_cache import PAPER_PAGE

operations_dir = shared.operations_dir
_ns = itertools.count()
NEW_TYPE = {"accept": "application/graphql-response+json"}
NODES = "query Nodes($ids: [ID!]!) { nodes(ids: $ids) { id } }"
SIZED = "query Sized($first: Int, $ids: [ID!]!) { papers(first: $first) { totalCount } nodes(ids: $ids) { id } }"


@pytest.fixture(scope="module")
async def resp_db(make_database: Any) -> tuple[str, dict[str, int]]:
    return await shared.build_resp_db(make_database, "edgememory")


@dataclass
class Worker:
    client: httpx.AsyncClient
    memory: ResponseCache
    caches: Caches

    def remembered(self) -> dict[str, int]:
        """Entries of every in-process cache a request may fill."""
        return {
            "response keys": len(self.memory._keys),
            "request bytes": len(self.memory._remembered),
            "documents": len(self.caches.documents),
            "reads": len(self.caches.reads),
            "measures": len(self.caches.measured),
        }


@contextlib.asynccontextmanager
async def worker(dsn: str, redis_url: str, namespace: str, **settings: Any) -> AsyncIterator[Worker]:
    config = Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, cache_namespace=namespace, **settings)
    schema = build_schema(config)
    guard = schema.extensions[0]()
    assert isinstance(guard, DocumentGuard)
    application = create_app(config, schema=schema)
    memory = application.front.keywords["memory"]  # type: ignore[attr-defined]
    assert isinstance(memory, ResponseCache)
    async with served(dsn, application=application) as (client, _):
        yield Worker(client, memory, guard.caches)


async def post(client: httpx.AsyncClient, query: str, variables: dict[str, Any], **headers: str) -> httpx.Response:
    return await client.post("/graphql", json={"query": query, "variables": variables}, headers=headers)


def code(response: httpx.Response) -> str | None:
    errors = response.json().get("errors") or [{}]
    return (errors[0].get("extensions") or {}).get("code")


async def test_variables_past_their_bounds_are_refused_before_anything_reads_them(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    async with worker(resp_db[0], redis_url, f"{cache_namespace}-mem{next(_ns)}") as w:
        long_id = await post(w.client, PAPER_PAGE, {"id": "2401.00001" + "x" * 900_000})
        assert long_id.status_code == 200 and code(long_id) == "BAD_USER_INPUT", long_id.text[:300]
        error = long_id.json()["errors"][0]
        assert error["extensions"]["maxLength"] == 2048 and "`$id`" in error["message"]
        assert "data" not in long_id.json() and len(long_id.content) < 1000  # the value is not echoed
        # Under the GraphQL-over-HTTP type a request error is a 400.
        assert (await post(w.client, PAPER_PAGE, {"id": "y" * 3000}, **NEW_TYPE)).status_code == 400
        many = await post(w.client, NODES, {"ids": [f"UGFwZXI6{i}" for i in range(45_000)]})
        assert code(many) == "BAD_USER_INPUT" and many.json()["errors"][0]["extensions"]["maxItems"] == 100
        nested = await post(w.client, NODES, {"ids": ["a"], "pad": {f"k{i}": "z" * 2000 for i in range(40)}})
        assert code(nested) == "BAD_USER_INPUT" and nested.json()["errors"][0]["extensions"]["maxSize"] == 65_536
        undeclared = await post(w.client, PAPER_PAGE, {"id": "2401.00001", "pad": "p" * 900_000})
        assert code(undeclared) == "BAD_USER_INPUT"
        get = await w.client.get("/graphql", params={"query": PAPER_PAGE, "variables": '{"id": "' + "g" * 5000 + '"}'})
        assert code(get) == "BAD_USER_INPUT"
        # What the site sends passes: the longest id form, a hundred ids.
        hundred = await post(w.client, NODES, {"ids": [encode_global_id("Researcher", i + 1) for i in range(100)]})
        assert hundred.status_code == 200 and "errors" not in hundred.json(), hundred.text[:300]
        assert w.remembered()["response keys"] == 0


async def test_an_id_longer_than_any_id_form_is_bad_user_input_and_leaves_no_key(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    """Within the variables' bounds, but longer than any id (300 characters): refused by GraphQL, never keyed."""
    async with worker(resp_db[0], redis_url, f"{cache_namespace}-mem{next(_ns)}") as w:
        for i in range(20):
            response = await post(w.client, PAPER_PAGE, {"id": f"2401.{i:05d}-" + "t" * 1500})
            assert code(response) == "BAD_USER_INPUT", response.text[:300]
        assert len(w.memory._keys) == 0
        # The document ran (its resolver refused the id): it and its one measure are kept, whatever the ids.
        assert w.remembered() == {"response keys": 0, "request bytes": 0, "documents": 1, "reads": 1, "measures": 1}
        found = await post(w.client, PAPER_PAGE, {"id": "2401.00001"})
        assert found.status_code == 200 and "errors" not in found.json()
        assert w.remembered()["response keys"] == 1  # answered: remembered


async def test_requests_refused_for_their_budget_or_cost_leave_nothing(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    async with worker(resp_db[0], redis_url, f"{cache_namespace}-mem{next(_ns)}", anon_points_per_hour=1) as w:
        spent = await post(w.client, "query Spend { __typename }", {})
        assert spent.status_code == 200 and "errors" not in spent.json()
        for i in range(30):
            refused = await post(w.client, PAPER_PAGE, {"id": f"2401.{i:05d}"})
            assert refused.status_code == 429 and code(refused) == "RATE_LIMITED", refused.text[:300]
            refused = await post(w.client, SIZED, {"first": i, "ids": [f"id{i}-{j}" for j in range(i % 5 + 1)]})
            assert refused.status_code == 429, refused.text[:300]
        too_costly = await post(w.client, FAN_OUT, {})
        assert code(too_costly) == "QUERY_TOO_COMPLEX"
        assert len(w.memory._keys) == 0
        # What the one answered request left (`Spend`, its measure), and nothing else.
        assert w.remembered() == {"response keys": 0, "request bytes": 0, "documents": 1, "reads": 1, "measures": 1}


async def test_measures_are_remembered_by_sizes_not_by_values(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    """Distinct ids in a list of one length, or any string where a size is read, price the same: one measure."""
    async with worker(resp_db[0], redis_url, f"{cache_namespace}-mem{next(_ns)}") as w:
        for i in range(20):
            ids = [encode_global_id("Researcher", 1000 * i + j) for j in range(4)]
            response = await post(w.client, SIZED, {"first": 3, "ids": ids})
            assert response.status_code == 200, response.text[:300]
        assert (len(w.caches.reads), len(w.caches.measured)) == (1, 1)
        await post(w.client, SIZED, {"first": 4, "ids": [encode_global_id("Researcher", 1)]})
        assert len(w.caches.measured) == 2
