"""schemathesis, in GraphQL mode, against the served demo: whatever document the schema allows, with whatever
arguments, the answer is a GraphQL response; never a 5xx, never INTERNAL_SERVER_ERROR.

Seeded (derandomized), a few hundred requests; `bench/fuzz.py` runs the same check longer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = schemathesis.graphql.from_path(ROOT / "frontend_contract" / "schema.graphql")
EXAMPLES_PER_FIELD = 20


@SCHEMA.parametrize()
@settings(
    max_examples=EXAMPLES_PER_FIELD,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_generated_document_gets_a_graphql_answer(case: Any, served_demo: str) -> None:
    response = case.call(base_url=f"{served_demo}/graphql", timeout=30)
    assert response.status_code < 500, response.text
    body = response.json()
    assert isinstance(body, dict) and ("data" in body or "errors" in body), response.text
    for error in body.get("errors") or ():
        assert isinstance(error.get("message"), str) and error["message"], error
        code = (error.get("extensions") or {}).get("code")
        assert isinstance(code, str), error
        assert code != "INTERNAL_SERVER_ERROR", error
