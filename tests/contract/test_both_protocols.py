"""uvicorn's stock protocol (WOVEPAPER_EDGE_PROTOCOL off) and the edge's (edge/protocol.py, on by default) give the
same answer to every operation of the contract, over HTTP from two servers on the demo data: sent once (the
application answers) and again (the edge's protocol answers an anonymous query from memory, before the ASGI
exchange)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.contract.conftest import (
    CONTRACT_READER,
    MUTATIONS,
    SITE_OPERATIONS,
    VIEWER_OPERATIONS,
    operation_text,
    variables_for,
)
from tests.jwt_support import SECRET, bearer, hs256
from tests.server_process import ServerProcess, start_api


@pytest.fixture(scope="module")
def servers(
    demo_database_url: str, redis_url: str, cache_namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, ServerProcess]]:
    logs = tmp_path_factory.mktemp("protocols")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    env |= {"DATABASE_URL": demo_database_url, "REDIS_URL": redis_url, "WOVEPAPER_JWT_SECRET": SECRET}
    started: dict[str, ServerProcess] = {}
    try:
        # Each its own cache, so that each answers a query again from its own memory.
        for name, switch in (("edge", "true"), ("stock", "false")):
            started[name] = start_api(
                env | {"WOVEPAPER_EDGE_PROTOCOL": switch, "WOVEPAPER_CACHE_NAMESPACE": f"{cache_namespace}{name[0]}"},
                Path(logs) / f"{name}.log",
            )
        yield started
    finally:
        for server in started.values():
            server.stop()


def _answer(server: ServerProcess, name: str, variables: dict[str, Any]) -> tuple[int, Any]:
    headers = bearer(hs256(CONTRACT_READER)) if name in VIEWER_OPERATIONS else {}
    body = {"query": operation_text(name), "variables": variables, "operationName": name}
    response = httpx.post(f"{server.url}/graphql", json=body, headers=headers, timeout=60)
    return response.status_code, response.json()


def test_the_servers_run_the_protocols_asked_for(servers: dict[str, ServerProcess]) -> None:
    # An oversized head: the edge's protocol refuses it before reading it whole, and closes the connection; under
    # uvicorn's own the application refuses it, read whole, and the connection stays open.
    big = {"x-padding": "a" * 70_000}
    edge = httpx.get(f"{servers['edge'].url}/healthz", headers=big, timeout=10)
    stock = httpx.get(f"{servers['stock'].url}/healthz", headers=big, timeout=10)
    assert (edge.status_code, stock.status_code) == (431, 431)
    assert edge.headers.get("connection") == "close"
    assert stock.headers.get("connection") != "close"


@pytest.mark.parametrize("name", SITE_OPERATIONS)
def test_every_contract_operation_answers_the_same(
    servers: dict[str, ServerProcess], demo_ids: dict[str, Any], name: str
) -> None:
    variables = variables_for(name, demo_ids)
    # A mutation sent again is the same follow or correction (its answer too); a query's second answer may come
    # from memory.
    edge = [_answer(servers["edge"], name, variables) for _ in range(2)]
    stock = [_answer(servers["stock"], name, variables) for _ in range(2)]
    assert edge[0][0] == 200 and "errors" not in edge[0][1], edge[0]
    assert edge == stock
    if name not in MUTATIONS:
        assert edge[0] == edge[1]
