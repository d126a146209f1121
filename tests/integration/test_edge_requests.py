"""Bodies that are not one GraphQL request get a 400 (or 415) with a coded GraphQL error, never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app import create_app
from tests.integration.graph_support import StatementCounter, seeded_database, serving, settings_for

JSON = {"content-type": "application/json"}
QUERY = '{"query": "{ __typename }"'

CASES: list[tuple[str, bytes, dict[str, str], int, str]] = [
    ("a number", b"42", JSON, 400, "BAD_REQUEST"),
    ("null", b"null", JSON, 400, "BAD_REQUEST"),
    ("a string", b'"{ __typename }"', JSON, 400, "BAD_REQUEST"),
    ("a batch", b"[" + QUERY.encode() + b"}]", JSON, 400, "BAD_REQUEST"),
    ("broken JSON", QUERY.encode(), JSON, 400, "BAD_REQUEST"),
    ("invalid UTF-8", QUERY.encode() + b', "variables": {"a": "\xff\xfe"}}', JSON, 400, "BAD_REQUEST"),
    (
        "a 5,000-digit integer",
        QUERY.encode() + b', "variables": {"n": ' + b"9" * 5000 + b"}}",
        JSON,
        400,
        "BAD_REQUEST",
    ),
    (
        "JSON nested 1,000 deep",
        QUERY.encode() + b', "variables": {"a": ' + b"[" * 1000 + b"]" * 1000 + b"}}",
        JSON,
        400,
        "BAD_REQUEST",
    ),
    ("query of the wrong type", b'{"query": 5}', JSON, 400, "BAD_REQUEST"),
    ("variables of the wrong type", QUERY.encode() + b', "variables": [1]}', JSON, 400, "BAD_REQUEST"),
    ("no document", b'{"variables": {}}', JSON, 400, "BAD_REQUEST"),
    ("text/plain", QUERY.encode() + b"}", {"content-type": "text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"),
    (
        "a form",
        b"query=%7B+__typename+%7D",
        {"content-type": "application/x-www-form-urlencoded"},
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    ),
    ("no content type", QUERY.encode() + b"}", {}, 415, "UNSUPPORTED_MEDIA_TYPE"),
]


@pytest.fixture(scope="module")
async def seeded(make_database: Any) -> Any:
    return await seeded_database(make_database, "edge-requests")


async def test_malformed_requests_are_coded_client_errors(seeded: Any, caplog: pytest.LogCaptureFixture) -> None:
    app = create_app(settings_for(seeded.dsn), query_logger=StatementCounter())
    async with serving(app) as client:
        for what, body, headers, status, code in CASES:
            response = await client.post("/graphql", content=body, headers=headers)
            assert response.status_code == status, (what, response.text)
            errors = response.json()["errors"]
            assert errors[0]["extensions"]["code"] == code, (what, errors)
            assert "x-ratelimit-limit" in response.headers, what
        # The same request well formed is answered.
        good = await client.post("/graphql", content=QUERY.encode() + b"}", headers=JSON)
        assert good.json() == {"data": {"__typename": "Query"}}
        assert json.loads(
            (
                await client.post(
                    "/graphql",
                    content=b'{"query": "{ __typename }"}',
                    headers={"content-type": "application/json; charset=utf-8"},
                )
            ).text
        ) == {"data": {"__typename": "Query"}}
    assert "Exception in ASGI application" not in caplog.text


async def test_get_runs_persisted_documents_only(seeded: Any) -> None:
    app = create_app(settings_for(seeded.dsn), query_logger=StatementCounter())
    async with serving(app) as client:
        response = await client.get("/graphql", params={"query": "{ __typename }"})
        assert response.status_code == 400
        assert response.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
        bad_variables = await client.get("/graphql", params={"documentId": "0" * 64, "variables": "{"})
        assert bad_variables.status_code == 400
        put = await client.put("/graphql", content=b"{}")
        assert put.status_code == 405


async def test_several_operations_without_an_operation_name_are_a_request_error(seeded: Any) -> None:
    """GraphQL's GetOperation: without `operationName` a document must hold one operation; the first is not run."""
    document = "query A { __typename } query B { papers(first: 1) { totalCount } }"
    statements = StatementCounter()
    app = create_app(settings_for(seeded.dsn), query_logger=statements)
    async with serving(app) as client:
        for accept in ("application/json", "application/graphql-response+json"):
            statements.reset()
            response = await client.post("/graphql", json={"query": document}, headers={"accept": accept})
            assert response.status_code == 400, response.text
            body = response.json()
            assert "data" not in body and body["errors"][0]["extensions"]["code"] == "BAD_REQUEST"
            assert "operationName" in body["errors"][0]["message"]
            assert statements.statements == []
        named = await client.post("/graphql", json={"query": document, "operationName": "A"})
        assert named.json() == {"data": {"__typename": "Query"}}
        unnamed_alone = await client.post("/graphql", json={"query": "{ __typename }"})
        assert unnamed_alone.json() == {"data": {"__typename": "Query"}}
