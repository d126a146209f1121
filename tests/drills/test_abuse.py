"""The hand-written abuse set against the served demo: each hostile request is answered at once with a coded
error (never a 5xx, never INTERNAL_SERVER_ERROR), and the worker keeps answering everyone else.

The time bound here only catches a worker that hangs (the fragment bomb used to hold one for tens of minutes);
how fast each answer is on a quiet machine is recorded in bench/RESULTS.md (Reliability, "Abuse set")."""

from __future__ import annotations

import base64
import json
import os
import time
from typing import Any

import httpx
import pytest

from tests.integration.test_query_limits import FAN_OUT, fragment_chain

HANG_BOUND_S = 10.0
JSON_TYPE = {"content-type": "application/json"}


def _cursor(sort: str, *key: object) -> str:
    return base64.urlsafe_b64encode(json.dumps([sort, *key]).encode()).decode().rstrip("=")


def _query(document: str, **variables: object) -> bytes:
    return json.dumps({"query": document, "variables": variables}).encode()


NAN_SCORE = _cursor("search-KEYWORD-RELEVANCE", "nan", 1)
ALIASES = "{ " + " ".join(f'a{i}: paper(id: "2401.{i:05d}") {{ id }}' for i in range(40)) + " }"
SITEMAPS = "{ " + " ".join(f"s{i}: sitemap(kind: RESEARCHER, first: 5000) {{ totalCount }}" for i in range(15)) + " }"

# (what, body, content type headers, acceptable HTTP statuses, expected code; None: a plain answer)
ABUSE: list[tuple[str, bytes, dict[str, str], set[int], str | None]] = [
    ("fragment spreads doubling 40 times", _query(fragment_chain(40)), JSON_TYPE, {200, 400}, "TOO_MANY_FIELDS"),
    ("40 aliases", _query(ALIASES), JSON_TYPE, {200, 400}, "TOO_MANY_ALIASES"),
    ("nested network fan-out", _query(FAN_OUT), JSON_TYPE, {200, 400}, "QUERY_TOO_COMPLEX"),
    ("15 sitemaps of 5,000", _query(SITEMAPS), JSON_TYPE, {200, 400}, "QUERY_TOO_COMPLEX"),
    ("a body over 1 MB", _query("{ __typename }", pad="x" * 1_100_000), JSON_TYPE, {413}, "PAYLOAD_TOO_LARGE"),
    ("invalid UTF-8", b'{"query": "{ paper(id: \\"\xff\xfe\\") { id } }"}', JSON_TYPE, {400}, "BAD_REQUEST"),
    ("NUL in a search", _query('{ search(query: "a\\u0000b") { totalCount } }'), JSON_TYPE, {200}, "BAD_USER_INPUT"),
    (
        "NUL in a variable",
        _query("query($id: String!) { institution(id: $id) { name } }", id="\x00"),
        JSON_TYPE,
        {200},
        "BAD_USER_INPUT",
    ),
    (
        "a cursor past int64",
        _query(f'{{ papers(after: "{_cursor("NEWEST", 2**70, 1)}") {{ totalCount }} }}'),
        JSON_TYPE,
        {200},
        "BAD_USER_INPUT",
    ),
    (
        "a cursor that is no cursor",
        _query('{ papers(after: "////") { totalCount } }'),
        JSON_TYPE,
        {200},
        "BAD_USER_INPUT",
    ),
    (
        "a score that is no number",
        _query(f'{{ search(query: "learning", after: "{NAN_SCORE}") {{ totalCount }} }}'),
        JSON_TYPE,
        {200},
        "BAD_USER_INPUT",
    ),
    ("a negative page size", _query("{ papers(first: -1) { totalCount } }"), JSON_TYPE, {200}, "BAD_USER_INPUT"),
    (
        "a page size past Int",
        _query("{ papers(first: 99999999999) { totalCount } }"),
        JSON_TYPE,
        {200, 400},
        "GRAPHQL_VALIDATION_FAILED",
    ),
    (
        "a page a billion deep",
        _query("{ papers(page: 1000000000) { totalCount } }"),
        JSON_TYPE,
        {200},
        None,
    ),
    (
        "a 5,000-digit integer",
        b'{"query": "{ __typename }", "variables": {"n": ' + b"9" * 5000 + b"}}",
        JSON_TYPE,
        {400},
        "BAD_REQUEST",
    ),
    (
        "JSON nested 1,000 deep",
        b'{"query": "{ __typename }", "variables": {"a": ' + b"[" * 1000 + b"]" * 1000 + b"}}",
        JSON_TYPE,
        {400},
        "BAD_REQUEST",
    ),
    (
        "a 900 KB variable",
        _query("query($id: String!) { paper(id: $id) { id } }", id="x" * 900_000),
        JSON_TYPE,
        {200},
        "BAD_USER_INPUT",
    ),
    (
        "45,000 ids",
        _query("query($ids: [ID!]!) { nodes(ids: $ids) { id } }", ids=[f"UGFwZXI6{i}" for i in range(45_000)]),
        JSON_TYPE,
        {200},
        "BAD_USER_INPUT",
    ),
    (
        "a form post",
        b"query=%7B+__typename+%7D",
        {"content-type": "application/x-www-form-urlencoded"},
        {415},
        "UNSUPPORTED_MEDIA_TYPE",
    ),
    (
        "a 5,000-digit literal",
        _query("{ papers(first: " + "9" * 5000 + ") { totalCount } }"),
        JSON_TYPE,
        {200, 400},
        "GRAPHQL_VALIDATION_FAILED",
    ),
    (
        "two operations and no name",
        _query("query A { __typename } query B { papers(first: 1) { totalCount } }"),
        JSON_TYPE,
        {400},
        "BAD_REQUEST",
    ),
]


@pytest.mark.parametrize(("what", "body", "headers", "statuses", "code"), ABUSE, ids=[c[0] for c in ABUSE])
def test_abuse_is_refused_with_a_code_and_the_worker_keeps_answering(
    served_demo: str, what: str, body: bytes, headers: dict[str, str], statuses: set[int], code: str | None
) -> None:
    with httpx.Client(base_url=served_demo, timeout=HANG_BOUND_S * 3) as client:
        started = time.monotonic()
        response = client.post("/graphql", content=body, headers=headers)
        elapsed = time.monotonic() - started
        assert elapsed < HANG_BOUND_S, f"{what}: {elapsed:.1f} s"
        assert response.status_code in statuses, (response.status_code, response.text[:500])
        errors: list[dict[str, Any]] = response.json().get("errors", [])
        codes = [(e.get("extensions") or {}).get("code") for e in errors]
        assert code in codes if code else not errors, errors
        assert "INTERNAL_SERVER_ERROR" not in codes
        if os.environ.get("WOVEPAPER_ABUSE_REPORT"):
            print(f"\n{what}: {response.status_code} {code} in {elapsed * 1000:.1f} ms")
        assert client.get("/healthz").status_code == 200
        assert client.post("/graphql", json={"query": "{ __typename }"}).json() == {"data": {"__typename": "Query"}}
