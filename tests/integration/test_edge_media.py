"""The response's media type follows the request's Accept (GraphQL over HTTP): `application/graphql-response+json`
with its status codes (a request error is a 4xx without `data`; an answer with `data` a 200), `application/json`
as before otherwise; an answer the response cache remembers is given in either type, through the ASGI exchange and
before it (edge/protocol.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
import pytest

from app import OPERATIONS_DIR
from edge.media import GRAPHQL_RESPONSE, JSON, negotiate
from edge.persisted import operation_documents
from tests.integration import test_edge_persisted as persisted
from tests.integration import test_response_cache as shared
from tests.integration.graph_support import seeded_database
from tests.integration.test_edge_protocol import (
    Connection,
    ask,
    exchanges,  # noqa: F401 (a fixture)
    page_body,
    persisted_get,
    remembering,
    request,
)
from tests.integration.test_response_cache import operations_dir  # noqa: F401 (a fixture)

GRAPHQL = "application/graphql-response+json; charset=utf-8"
NEW = {"accept": "application/graphql-response+json"}
LEGACY = {"accept": "application/json"}
JSON_BODY = {"content-type": "application/json"}
FOLLOW_ID = hashlib.sha256(operation_documents(OPERATIONS_DIR)["FollowResearcher"].encode()).hexdigest()

# Request errors: nothing executed.
REQUEST_ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("a parse error", {"query": "{"}, "GRAPHQL_PARSE_FAILED"),
    ("a validation error", {"query": "{ noSuchField }"}, "GRAPHQL_VALIDATION_FAILED"),
    (
        "a variable that does not coerce",
        {"query": "query Q($id: String!) { researcher(id: $id) { id } }", "variables": {"id": None}},
        "BAD_USER_INPUT",
    ),
    ("an undeclared variable", {"query": "{ __typename }", "variables": {"x": 1}}, "BAD_USER_INPUT"),
]


@pytest.fixture(scope="module")
async def seeded(make_database: Any) -> Any:
    return await seeded_database(make_database, "edge-media")


@pytest.fixture(scope="module")
async def resp_db(make_database: Any) -> tuple[str, dict[str, int]]:
    return await shared.build_resp_db(make_database, "media-protocol")


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, JSON),
        (b"", JSON),
        (b"*/*", JSON),
        (b"application/*", JSON),
        (b"application/json", JSON),
        (b"application/graphql-response+json", GRAPHQL_RESPONSE),
        (b"Application/GraphQL-Response+JSON", GRAPHQL_RESPONSE),
        (b"application/graphql-response+json, application/json;q=0.9", GRAPHQL_RESPONSE),
        (b"application/json, application/graphql-response+json", GRAPHQL_RESPONSE),
        (b"application/graphql-response+json;charset=utf-8", GRAPHQL_RESPONSE),
        (b"application/graphql-response+json;q=0.5, application/json", JSON),
        (b"application/graphql-response+json, */*;q=0.8", GRAPHQL_RESPONSE),
        (b"application/json, */*", JSON),
        (b"application/graphql-response+json;q=0.4, */*;q=0.2", GRAPHQL_RESPONSE),
        (b"application/graphql-response+json;q=0, */*", JSON),
        (b"application/graphql-response+json;q=nope", JSON),
        (b"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", JSON),
        # Neither acceptable: the server's default rather than a 406 (edge/media.py says why).
        (b"text/xml", JSON),
    ],
)
def test_negotiation(accept: bytes | None, chosen: bytes) -> None:
    assert negotiate(accept) is chosen


def test_accept_values_are_remembered_once_answered_and_only_short_ones() -> None:
    from edge import media

    before = len(media._CHOSEN)
    for n in range(2_000):
        value = b"application/graphql-response+json, " + b"x/%d;q=0.1, " % n * 40
        assert negotiate(value) is GRAPHQL_RESPONSE
        media.remember({b"accept": value})
    assert len(media._CHOSEN) == before
    short = b"application/graphql-response+json, x/short-%d" % len(media._CHOSEN)
    assert negotiate(short) is GRAPHQL_RESPONSE and short not in media._CHOSEN  # a refused request leaves nothing
    media.remember({b"accept": short})
    assert media._CHOSEN[short] is GRAPHQL_RESPONSE


async def graphql(client: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    return await client.post("/graphql", json=body, headers=headers)


async def test_request_errors_are_4xx_without_data_under_the_new_type(seeded: Any, redis_url: str, cache_namespace):
    async with persisted.api(seeded, redis_url, cache_namespace) as (client, _):
        for what, body, code in REQUEST_ERRORS:
            new = await graphql(client, body, NEW)
            assert new.status_code == 400, (what, new.text)
            assert new.headers["content-type"] == GRAPHQL, what
            assert "data" not in new.json(), what
            assert new.json()["errors"][0].get("extensions", {}).get("code") == code, (what, new.text)
            # The legacy type keeps its 200 (as GraphQL over HTTP asks of it); the body is the same.
            legacy = await graphql(client, body, LEGACY)
            assert legacy.status_code == 200 and legacy.headers["content-type"] == "application/json", what
            assert legacy.content == new.content, what
        # An operation name the document does not define: no operation to run, under either type a GraphQL error.
        unknown = {"query": "query A { __typename }", "operationName": "B"}
        for headers, content_type in ((NEW, GRAPHQL), (LEGACY, "application/json")):
            answer = await graphql(client, unknown, headers)
            assert (answer.status_code, answer.headers["content-type"]) == (400, content_type), answer.text
            assert "data" not in answer.json() and answer.json()["errors"][0]["extensions"]["code"] == "BAD_REQUEST"


async def test_answers_with_data_are_200_under_the_new_type(seeded: Any, redis_url: str, cache_namespace) -> None:
    async with persisted.api(seeded, redis_url, cache_namespace) as (client, _):
        ok = await graphql(client, {"query": "{ __typename }"}, NEW)
        assert (ok.status_code, ok.headers["content-type"]) == (200, GRAPHQL)
        assert ok.json() == {"data": {"__typename": "Query"}}
        # A field error: data with a null where the field failed.
        partial = await graphql(client, {"query": '{ __typename nodes(ids: ["garbage"]) { id } }'}, NEW)
        assert (partial.status_code, partial.headers["content-type"]) == (200, GRAPHQL), partial.text
        assert partial.json()["data"] == {"__typename": "Query", "nodes": [None]} and partial.json()["errors"]
        # A field error nulling `data` itself: data was still made, so a 200 with `"data": null`.
        query = '{ papers(filter: {publishedFrom: "2024-02-01", publishedTo: "2024-01-01"}) { totalCount } }'
        nulled = await graphql(client, {"query": query}, NEW)
        assert nulled.status_code == 200 and nulled.headers["content-type"] == GRAPHQL, nulled.text
        assert nulled.json()["data"] is None and nulled.json()["errors"][0]["path"] == ["papers"]
        # Without Accept, with */* or a type the server cannot give: application/json, as before.
        for headers in ({}, {"accept": "*/*"}, {"accept": "text/xml"}):
            legacy = await graphql(client, {"query": "{ __typename }"}, headers)
            assert (legacy.status_code, legacy.headers["content-type"]) == (200, "application/json"), headers


async def test_the_edge_s_own_errors_keep_their_status_in_the_negotiated_type(
    seeded: Any, redis_url: str, cache_namespace
) -> None:
    async with persisted.api(seeded, redis_url, cache_namespace, max_body_bytes=1024) as (client, _):
        answers = {
            "broken JSON": await client.post("/graphql", content=b'{"query": ', headers={**NEW, **JSON_BODY}),
            "text/plain": await client.post(
                "/graphql", content=b'{"query": "{ __typename }"}', headers={**NEW, "content-type": "text/plain"}
            ),
            "too large": await client.post("/graphql", json={"query": "{ __typename }" + " " * 2000}, headers=NEW),
            "GET of a document": await client.get("/graphql", params={"query": "{ __typename }"}, headers=NEW),
            "PUT": await client.put("/graphql", content=b"{}", headers=NEW),
        }
        statuses = {what: answer.status_code for what, answer in answers.items()}
        assert statuses == {
            "broken JSON": 400,
            "text/plain": 415,
            "too large": 413,
            "GET of a document": 400,
            "PUT": 405,
        }
        for what, answer in answers.items():
            if what != "PUT":  # the router's 405, not a GraphQL answer
                assert answer.headers["content-type"] == GRAPHQL, what
                assert "data" not in answer.json(), what
        legacy = await client.post("/graphql", content=b'{"query": ', headers={**LEGACY, **JSON_BODY})
        assert (legacy.status_code, legacy.headers["content-type"]) == (400, "application/json")
        # An APQ hash the server does not know: 200 as Apollo's clients expect under application/json; an answer
        # without data is no 2xx under the new type.
        apq = {"extensions": json.dumps({"persistedQuery": {"version": 1, "sha256Hash": "1" * 64}})}
        assert (await client.get("/graphql", params=apq, headers=LEGACY)).status_code == 200
        missing = await client.get("/graphql", params=apq, headers=NEW)
        assert (missing.status_code, missing.headers["content-type"]) == (404, GRAPHQL)
        assert missing.json()["errors"][0]["extensions"]["code"] == "PERSISTED_QUERY_NOT_FOUND"
        # A mutation by GET (the site's persisted one): 405, naming the method that runs it.
        follow = {"documentId": FOLLOW_ID, "variables": json.dumps({"id": "1"})}
        for headers, content_type in ((NEW, GRAPHQL), (LEGACY, "application/json")):
            refused = await client.get("/graphql", params=follow, headers=headers)
            assert (refused.status_code, refused.headers["content-type"]) == (405, content_type), refused.text
            assert refused.headers["allow"] == "POST" and "data" not in refused.json()
            assert refused.json()["errors"][0]["extensions"]["code"] == "METHOD_NOT_ALLOWED"


async def test_a_remembered_answer_is_given_in_the_type_each_request_asks_for(
    seeded: Any, redis_url: str, cache_namespace
) -> None:
    """One entry of the response cache answers both types: the same body, the Content-Type of the request; a
    public answer varies by Accept and each type has its own strong ETag."""
    wumo = seeded.researcher_ids["wumo"]
    params = {"documentId": f"sha256:{persisted.RESEARCHER_PAGE_ID}", "variables": json.dumps({"id": str(wumo)})}
    post = {"documentId": persisted.RESEARCHER_PAGE_ID, "variables": {"id": str(wumo)}}
    async with persisted.api(seeded, redis_url, cache_namespace) as (client, counter):
        first = await client.get("/graphql", params=params, headers=LEGACY)
        assert first.headers["content-type"] == "application/json" and first.headers["x-cache"] == "miss"
        assert first.headers["vary"] == "Accept, Origin"
        counter.reset()
        new = await client.get("/graphql", params=params, headers=NEW)
        assert new.headers["x-cache"] == "hit" and counter.statements == []
        assert (new.status_code, new.headers["content-type"], new.content) == (200, GRAPHQL, first.content)
        assert (
            new.headers["vary"] == "Accept, Origin" and new.headers["cache-control"] == first.headers["cache-control"]
        )
        assert new.headers["etag"] != first.headers["etag"]
        for headers, etag in ((NEW, new.headers["etag"]), (LEGACY, first.headers["etag"])):
            revalidated = await client.get("/graphql", params=params, headers={**headers, "if-none-match": etag})
            assert revalidated.status_code == 304 and revalidated.headers["etag"] == etag, headers
        # The other type's tag is another representation's: the whole answer.
        crossed = await client.get("/graphql", params=params, headers={**NEW, "if-none-match": first.headers["etag"]})
        assert crossed.status_code == 200 and crossed.headers["etag"] == new.headers["etag"]
        head = await client.head("/graphql", params=params, headers=NEW)
        assert (head.status_code, head.headers["content-type"], head.content) == (200, GRAPHQL, b"")
        # Computed for the new type first (a miss), then a hit in the legacy one.
        other = {**params, "variables": json.dumps({"id": str(seeded.researcher_ids["ada"])})}
        computed = await client.get("/graphql", params=other, headers=NEW)
        assert (computed.headers["x-cache"], computed.headers["content-type"]) == ("miss", GRAPHQL), computed.text
        hit = await client.get("/graphql", params=other, headers=LEGACY)
        assert (hit.headers["x-cache"], hit.headers["content-type"]) == ("hit", "application/json")
        assert hit.content == computed.content and hit.headers["etag"] != computed.headers["etag"]
        # By POST, remembered by its bytes: the answer from memory in either type too.
        counter.reset()
        for _ in range(2):
            for headers, content_type in ((NEW, GRAPHQL), (LEGACY, "application/json"), ({}, "application/json")):
                answer = await client.post("/graphql", json=post, headers=headers)
                assert answer.headers["content-type"] == content_type and answer.content == first.content
        assert counter.statements == []


async def test_the_early_answer_is_given_in_the_type_each_request_asks_for(
    resp_db,
    redis_url,
    cache_namespace,
    operations_dir,  # noqa: F811
    exchanges,  # noqa: F811
) -> None:
    """edge/protocol.py answers a remembered request before the exchange: in the type its Accept asks for, whatever
    the type of the answer that was remembered."""
    page = request(page_body(resp_db))
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, page) as (early, first):
        assert first.header("content-type") == "application/json"
        new = await ask(early.port, request(page_body(resp_db), headers=NEW))
        legacy = await ask(early.port, page)
        assert exchanges == []  # both from memory
        assert (new.status, new.header("content-type"), new.body) == (200, GRAPHQL, first.body)
        assert (legacy.status, legacy.header("content-type"), legacy.body) == (200, "application/json", first.body)
        # The persisted GET and its HEAD, as a CDN asks for them.
        get = persisted_get(resp_db, "accept: application/graphql-response+json")
        got = await ask(early.port, get)
        assert (got.status, got.header("content-type"), got.header("vary")) == (200, GRAPHQL, "Accept, Origin")
        conn = await Connection.open(early.port)
        try:
            await conn.send(get.replace(b"GET ", b"HEAD ", 1) + persisted_get(resp_db))
            headed = await conn.response(bodiless=True)
            legacy_get = await conn.response()
        finally:
            await conn.close()
        assert (headed.status, headed.header("content-type")) == (200, GRAPHQL)
        assert legacy_get.header("content-type") == "application/json" and legacy_get.body == got.body
        assert legacy_get.header("etag") != got.header("etag")
