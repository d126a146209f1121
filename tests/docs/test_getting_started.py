"""The queries the getting-started page offers for GraphiQL run on the demo data without an error and find
something."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"


def _empty(value: object) -> bool:
    if isinstance(value, dict):
        return all(_empty(v) for v in value.values())
    if isinstance(value, list):
        return all(_empty(v) for v in value)
    return value is None


async def test_every_graphiql_query_runs(guide_client: httpx.AsyncClient) -> None:
    queries = re.findall(r"^```graphql\n(.*?)^```$", PAGE.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert len(queries) >= 5
    for query in queries:
        response = await guide_client.post("/graphql", json={"query": query})
        body = response.json()
        assert response.status_code == 200 and "errors" not in body, (query, body)
        for field, value in body["data"].items():
            assert not _empty(value), (query, field, value)
