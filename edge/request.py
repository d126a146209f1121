"""The GraphQL request, read and parsed once at the edge: the request state's `graphql` (request_types/state.py).

POST takes `application/json` only (a form or `text/plain` body is a CSRF vector and not GraphQL); GET
carries its fields in the query string. Anything that is not one GraphQL request (a body of `42` or
`null`, broken JSON or UTF-8, a number too large for a double, JSON nested past MAX_NESTING, fields of
the wrong type, a batch) is a 400 with a GraphQL error body, never a 500. Variables holding more than any argument
takes (a string, a list or all of them past the bounds below) are refused here with BAD_USER_INPUT, before any step
reads or remembers them. Every later step (persisted documents, the response cache, GraphQL itself) uses this one
parse.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from edge.errors import EdgeError, send_error
from edge.media import media_of
from request_types.graphql_request import GraphQLRequest
from request_types.state import KEY, request_state

MAX_NESTING = 32
# What variables may hold (also `extensions`), checked before anything reads them: the longest string an argument
# takes (a site path, 2,048 characters; a question, 2,000), the longest list (`nodes(ids:)`, a chat scope: 100), and
# all of them together (strings and names; 100 ids of 300 characters take 30,000).
MAX_STRING = 2048
MAX_LIST = 100
MAX_VARIABLES = 65_536
JSON_TYPES = (b"application/json", b"application/graphql-response+json")


def bad_request(message: str) -> EdgeError:
    return EdgeError(400, "BAD_REQUEST", message)


def bad_input(message: str, **figures: object) -> EdgeError:
    """Variables the edge refuses before anything reads them: a request error, as GraphQL answers variables that do
    not coerce (200 under `application/json`, 400 under `application/graphql-response+json`)."""
    error = EdgeError(200, "BAD_USER_INPUT", message, status_without_data=400)
    error.extensions = figures
    return error


def check_sizes(value: dict[str, Any] | None, field: str) -> None:
    """Refuses `variables` (or `extensions`) nested past MAX_NESTING (BAD_REQUEST: no GraphQL request nests so), or
    holding more than any argument takes (BAD_USER_INPUT): a string past MAX_STRING, a list past MAX_LIST items,
    MAX_VARIABLES characters in all (strings and names; 8 for any other value). One walk, which stops at the first
    list too long, before its items."""
    if not value:
        return
    prefix = "$" if field == "variables" else f"{field}."
    total = sum(len(name) for name in value)
    stack: list[tuple[str, object, int]] = [(name, item, 2) for name, item in value.items()]
    while stack:
        name, item, depth = stack.pop()
        if isinstance(item, str):
            if len(item) > MAX_STRING:
                raise bad_input(
                    f"`{prefix}{name}` holds a string of {len(item)} characters; at most {MAX_STRING} are accepted.",
                    maxLength=MAX_STRING,
                )
            total += len(item)
        elif isinstance(item, list | dict):
            if depth > MAX_NESTING:
                raise bad_request(f"`variables` and `extensions` may nest at most {MAX_NESTING} levels.")
            if isinstance(item, dict):
                total += sum(len(k) for k in item)
                stack.extend((name, v, depth + 1) for v in item.values())
            elif len(item) > MAX_LIST:
                raise bad_input(
                    f"`{prefix}{name}` holds a list of {len(item)} items; at most {MAX_LIST} are accepted.",
                    maxItems=MAX_LIST,
                )
            else:
                stack.extend((name, v, depth + 1) for v in item)
        else:
            total += 8
        if total > MAX_VARIABLES:
            raise bad_input(f"`{field}` hold more than {MAX_VARIABLES} characters.", maxSize=MAX_VARIABLES)


def _json_field(raw: str | None, name: str) -> object:
    if raw is None or raw == "":
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise bad_request(f"`{name}` is not valid JSON.") from None


def from_fields(method: str, data: dict[str, Any]) -> GraphQLRequest:
    query = data.get("query")
    variables = data.get("variables")
    operation_name = data.get("operationName")
    extensions = data.get("extensions")
    document_id = data.get("documentId")
    if not isinstance(query, str | None):
        raise bad_request("`query` must be a string.")
    if not isinstance(variables, dict | None):
        raise bad_request("`variables` must be an object.")
    if not isinstance(operation_name, str | None):
        raise bad_request("`operationName` must be a string.")
    if not isinstance(extensions, dict | None):
        raise bad_request("`extensions` must be an object.")
    if not isinstance(document_id, str | None):
        raise bad_request("`documentId` must be a string.")
    for name, text in (("operationName", operation_name), ("documentId", document_id)):
        if text is not None and len(text) > MAX_STRING:
            raise bad_request(f"`{name}` is longer than {MAX_STRING} characters.")
    check_sizes(variables, "variables")
    check_sizes(extensions, "extensions")
    if query is None and document_id is None and not (extensions or {}).get("persistedQuery"):
        raise bad_request("No GraphQL document: send `query`, `documentId` or a persisted query hash.")
    return GraphQLRequest(method, query, variables, operation_name, extensions, document_id)


def parse_get(query_string: bytes) -> GraphQLRequest:
    try:
        params = dict(parse_qsl(query_string.decode("utf-8"), keep_blank_values=True, strict_parsing=False))
    except UnicodeDecodeError:
        raise bad_request("The query string is not UTF-8.") from None
    data: dict[str, Any] = {
        "query": params.get("query"),
        "operationName": params.get("operationName") or None,
        "documentId": params.get("documentId") or params.get("id"),
        "variables": _json_field(params.get("variables"), "variables"),
        "extensions": _json_field(params.get("extensions"), "extensions"),
    }
    return from_fields("GET", data)


def parse_post(content_type: bytes, body: bytes) -> GraphQLRequest:
    media_type = content_type.split(b";", 1)[0].strip().lower()
    if media_type not in JSON_TYPES:
        raise EdgeError(415, "UNSUPPORTED_MEDIA_TYPE", "POST a JSON body with `Content-Type: application/json`.")
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise bad_request(f"The body is not valid JSON: {exc}.") from None
    if isinstance(data, list):
        raise bad_request("Batched requests are not supported: send one operation per request.")
    if not isinstance(data, dict):
        raise bad_request("The body must be a JSON object with a `query`.")
    return from_fields("POST", data)


def headers_of(scope: Scope) -> Mapping[bytes, bytes]:
    """The request's headers by name (lower case), the first value of each: built once per request and kept in its
    state, since every step of the edge asks for some."""
    state = scope.get("state")
    request = state.get(KEY) if state is not None else None
    found = request.headers if request is not None else None
    if found is None:
        headers = scope.get("headers", ())
        # Reversed, so that the first of a repeated header wins.
        found = request_state(scope).headers = dict(
            reversed(headers if isinstance(headers, list | tuple) else list(headers))
        )
    return found


def header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of a request header (`name` in lower case)."""
    value = headers_of(scope).get(name)
    return None if value is None else bytes(value)


def response_type(scope: Scope) -> bytes:
    """The media type of the answer to this request (edge/media.py): `edge.media.JSON` or `GRAPHQL_RESPONSE`."""
    return media_of(headers_of(scope))


def wants_graphiql(scope: Scope) -> bool:
    """A browser opening /graphql: no query string, HTML accepted."""
    return (
        scope["method"] == "GET" and not scope.get("query_string") and b"text/html" in (header(scope, b"accept") or b"")
    )


class RequestParser:
    """Reads the body once (the body-size limit sits before this step) and parses the request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or wants_graphiql(scope):
            await self.app(scope, receive, send)
            return
        try:
            if scope["method"] in ("GET", "HEAD"):  # a HEAD is answered as its GET; the server drops the body
                request = parse_get(scope.get("query_string", b""))
            elif scope["method"] == "POST":
                request = parse_post(header(scope, b"content-type") or b"", await read_body(receive))
            else:
                raise EdgeError(
                    405, "METHOD_NOT_ALLOWED", "GraphQL takes GET and POST.", headers={"allow": "GET, HEAD, POST"}
                )
        except EdgeError as exc:
            await send_error(send, exc, response_type(scope))
            return
        request_state(scope).graphql = request
        await self.app(scope, receive, send)


def replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for a request whose body was read already: that body once, then what `receive` brings next."""
    pending = True

    async def again() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect  # the client went (or its body timed out): no request to answer
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
