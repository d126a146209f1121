"""The /graphql endpoint: Strawberry's ASGI view with our context, limits and JSON encoder.

Answers are in the media type the request's `Accept` chose (edge/media.py). A request error (nothing executed: the
document does not parse or validate, no operation to run, variables that do not coerce, a refusal before
execution) has no `data` entry (GraphQL, "Response"); under `application/graphql-response+json` it is a 4xx (400,
or the refusal's own: 429, 503) or 5xx, and an answer with `data` is a 200 (GraphQL over HTTP, "Status Codes").
Under `application/json` statuses are as they were: 200 for a request error the document made.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import strawberry.http.async_base_view as strawberry_view
from cross_web import AsyncHTTPRequestAdapter, HTTPException, StarletteRequestAdapter
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.exceptions import MissingQueryError
from strawberry.http import GraphQLHTTPResponse, GraphQLRequestData
from strawberry.schema.exceptions import CannotGetOperationTypeError, InvalidOperationTypeError
from strawberry.types import ExecutionResult

from edge.errors import EdgeError, send_error
from edge.media import JSON
from edge.request import response_type
from request_types.state import found_state
from resolvers.context import Context
from routes.services import services
from settings import Settings

logger = logging.getLogger("wovepaper.graphql")

# Strawberry's view asks every result whether it is a subscription's stream through a runtime Protocol (an async
# iterator), whose isinstance walks each result's classes with inspect.getattr_static: 5% of the instructions of
# `{ __typename }` (bench/RESULTS.md, round 9). collections.abc.AsyncIterator asks the same (both methods on the
# type) and keeps its answer per class. (No subscriptions are served here; the question is answered the same way.)
strawberry_view.SubscriptionExecutionResult = AsyncIterator  # type: ignore[attr-defined,assignment]


class OperationTimeout(Exception):
    pass


# What a 405 names for an operation only POST may run.
MUTATIONS_ALLOWED = {"allow": "POST"}


class _SubResponse(Response):
    """What resolvers may set on the answer (status, headers), and the media type the request negotiated."""

    media: bytes = JSON


def is_request_error(result: ExecutionResult) -> bool:
    """Whether GraphQL answered before executing (no field has run): no data, and no error at a field's path."""
    return result.data is None and bool(result.errors) and all(e.path is None for e in result.errors or ())


class _RequestAdapter(StarletteRequestAdapter):
    @property
    def scope(self) -> Scope:
        return self._request.scope

    @property
    def method(self) -> Any:
        # A HEAD runs as its GET (a query only, a persisted document): the server sends the head alone.
        method = super().method
        return "GET" if method == "HEAD" else method


class GraphQLView(GraphQL[Context, None]):
    """GraphiQL for browsers (GET with Accept: text/html) unless turned off; the request as the edge parsed
    it (GET only for persisted documents, which the edge checks); one operation per request; the whole
    operation within a deadline (504 when it passes)."""

    def __init__(self, schema: Any, settings: Settings) -> None:
        super().__init__(
            schema,
            graphql_ide="graphiql" if settings.graphiql else None,
            allow_queries_via_get=True,
            multipart_uploads_enabled=False,
        )
        self.settings = settings

    request_adapter_class = _RequestAdapter

    def should_render_graphql_ide(self, request: Any) -> bool:
        # The edge's rule (edge/request.py): a browser opening /graphql, no query string; a GET with one is
        # a persisted document, whatever the Accept header.
        return request.method == "GET" and not request.query_params and "text/html" in request.headers.get("accept", "")

    async def parse_http_body(self, request: AsyncHTTPRequestAdapter) -> GraphQLRequestData:
        state = found_state(request.scope) if isinstance(request, _RequestAdapter) else None
        parsed = state.graphql if state is not None else None
        if parsed is None:
            # Only the edge's RequestParser reads bodies; without it nothing reaches GraphQL.
            raise HTTPException(400, "The request was not parsed at the edge.")
        return GraphQLRequestData(
            query=parsed.query,
            variables=parsed.variables,
            operation_name=parsed.operation_name,
            extensions=parsed.extensions,
            protocol="http",
        )

    async def get_sub_response(self, request: Request | WebSocket) -> Response:
        sub_response = _SubResponse()
        sub_response.status_code = None  # type: ignore[assignment]
        del sub_response.headers["content-length"]
        sub_response.media = response_type(request.scope)
        return sub_response

    async def process_result(self, request: Request, result: ExecutionResult) -> GraphQLHTTPResponse:
        processed = await super().process_result(request, result)
        if is_request_error(result):
            # "If an error was raised before execution begins, the data entry should not be present."
            processed.pop("data", None)
        return processed

    def create_response(
        self, response_data: GraphQLHTTPResponse | list[GraphQLHTTPResponse], sub_response: Response
    ) -> Response:
        response = super().create_response(response_data, sub_response)
        media = sub_response.media if isinstance(sub_response, _SubResponse) else JSON
        if media is not JSON and isinstance(response_data, dict):
            response.headers["content-type"] = media.decode()
            if "data" in response_data:
                # Data, even null from a field error, is a 200 (a 503 of a lost database included: data was made).
                response.status_code = 200
            elif response.status_code < 400:
                response.status_code = 500 if _masked(response_data) else 400
        return response

    async def execute_single(self, *args: Any, **kwargs: Any) -> ExecutionResult:
        try:
            return await super().execute_single(*args, **kwargs)
        except HTTPException as exc:
            cause = exc.__cause__
            if isinstance(cause, InvalidOperationTypeError):
                # GraphQL over HTTP: a mutation by GET is a 405, naming the method that may run it.
                raise EdgeError(405, "METHOD_NOT_ALLOWED", exc.reason, headers=MUTATIONS_ALLOWED) from exc
            if isinstance(cause, CannotGetOperationTypeError | MissingQueryError):
                raise EdgeError(400, "BAD_REQUEST", exc.reason) from exc
            raise

    async def get_context(self, request: Request | WebSocket, response: Response | WebSocket) -> Context:
        served = services(request.scope)
        return Context.create(
            served["pool"],
            self.settings,
            redis=served["redis"],
            request=request if isinstance(request, Request) else None,
            response=response if isinstance(response, Response) else None,
            cache=served["cache"],
            chat=served["chat"],
            purge=served["purge"],
            replicas=served["replicas"],
        )

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    async def execute_operation(self, *args: Any, **kwargs: Any) -> Any:
        context = kwargs.get("context")
        try:
            async with asyncio.timeout(self.settings.operation_timeout_s) as deadline:
                if isinstance(context, Context):
                    context.operation_deadline = deadline
                return await super().execute_operation(*args, **kwargs)
        except TimeoutError:
            raise OperationTimeout from None
        finally:
            if isinstance(context, Context):
                context.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # No subscriptions: refuse the handshake rather than keep sockets open.
            await send({"type": "websocket.close", "code": 1008})
            return
        try:
            await super().__call__(scope, receive, send)
        except EdgeError as exc:  # a request error Strawberry raises rather than answers
            await send_error(send, exc, response_type(scope))
        except OperationTimeout:
            seconds = self.settings.operation_timeout_s
            logger.warning("operation timed out after %ss", seconds)
            message = f"The operation took longer than {seconds:g}s."
            await send_error(send, EdgeError(504, "TIMEOUT", message), response_type(scope))


def _masked(response: GraphQLHTTPResponse) -> bool:
    """Whether an answer reports a bug of ours (a masked error): a 500, not the client's 400."""
    errors = response.get("errors") or ()
    return any(
        isinstance(e, dict) and (e.get("extensions") or {}).get("code") == "INTERNAL_SERVER_ERROR" for e in errors
    )
