"""`wovepaper serve` as a real process on a free port, queried over HTTP."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from tests.server_process import server_process, wovepaper_command


@pytest.fixture(scope="module")
def served(
    database_url: str, redis_url: str, cache_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    # As everywhere in the tests: no embedding model loading (seconds of CPU) in the server.
    env |= {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
        "WOVEPAPER_CACHE_NAMESPACE": cache_namespace,
    }
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with server_process([*wovepaper_command(), "serve"], env, log) as server:
        yield server.url
    assert server.process.returncode == 0, log.read_text()


def test_healthz(served: str) -> None:
    response = httpx.get(f"{served}/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz(served: str) -> None:
    response = httpx.get(f"{served}/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"postgres": "ok", "redis": "ok"}}


def test_graphql_answers_a_query(served: str) -> None:
    response = httpx.post(f"{served}/graphql", json={"query": "{ __typename }"})
    assert response.status_code == 200
    assert response.json() == {"data": {"__typename": "Query"}}


def test_graphql_reports_a_bad_query_as_an_error_not_a_500(served: str) -> None:
    response = httpx.post(f"{served}/graphql", json={"query": "{ noSuchField }"})
    assert response.status_code in (200, 400)
    body = response.json()
    assert body.get("errors"), body
    assert "noSuchField" in body["errors"][0]["message"]


def test_graphiql_is_served_to_a_browser(served: str) -> None:
    response = httpx.get(f"{served}/graphql", headers={"Accept": "text/html"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "graphiql" in response.text.lower()
