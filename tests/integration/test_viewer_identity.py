"""`viewer` is who the verified bearer token names, and null for anonymous requests."""

from __future__ import annotations

from typing import Any

from starlette.types import Scope

from app import create_app
from edge.errors import EdgeError
from tests.integration.graph_support import StatementCounter, seeded_database, serving, settings_for

VIEWER = "query { viewer { id } }"


async def verify(scope: Scope, token: str) -> str:
    if token != "good":
        raise EdgeError(401, "UNAUTHENTICATED", "bad token")
    return "reader-1"


async def test_viewer_is_the_token_subject_and_null_when_anonymous(make_database: Any) -> None:
    seeded = await seeded_database(make_database)
    app = create_app(settings_for(seeded.dsn), query_logger=StatementCounter(), bearer_authenticator=verify)
    async with serving(app) as client:
        anonymous = await client.post("/graphql", json={"query": VIEWER})
        assert anonymous.json() == {"data": {"viewer": None}}
        signed_in = await client.post("/graphql", json={"query": VIEWER}, headers={"authorization": "Bearer good"})
        assert signed_in.json() == {"data": {"viewer": {"id": "reader-1"}}}
        refused = await client.post("/graphql", json={"query": VIEWER}, headers={"authorization": "Bearer bad"})
        assert refused.status_code == 401
        assert refused.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
