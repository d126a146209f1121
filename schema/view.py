"""The /graphql endpoint: Strawberry's ASGI view with our context, limits and JSON encoder."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import strawberry.http.async_base_view as strawberry_view
from cross_web import AsyncHTTPRequestAdapter, HTTPException, StarletteRequestAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket
from strawberry.asgi import GraphQL
from strawberry.http import GraphQLRequestData

from edge.request import GraphQLRequest
from resolvers.context import Context
from settings import Settings

logger = logging.getLogger("wovepaper.graphql")

# Strawberry's view asks every result whether it is a subscription's stream through a runtime Protocol (an async
# iterator), whose isinstance walks each result's classes with inspect.getattr_static: 5% of the instructions of
# `{ __typename }` (bench/RESULTS.md, round 9). collections.abc.AsyncIterator asks the same (both methods on the
# type) and keeps its answer per class. (No subscriptions are served here; the question is answered the same way.)
strawberry_view.SubscriptionExecutionResult = AsyncIterator  # type: ignore[attr-defined,assignment]


class OperationTimeout(Exception):
    pass


def error_response(status: int, message: str, code: str) -> JSONResponse:
    """A GraphQL-shaped error body for failures outside execution (the operation timeout)."""
    return JSONResponse({"errors": [{"message": message, "extensions": {"code": code}}]}, status_code=status)


class _RequestAdapter(StarletteRequestAdapter):
    @property
    def state(self) -> Any:
        return self._request.state

    @property
    def method(self) -> Any:
        # A HEAD runs as its GET (a query only, a persisted document): the server sends the head alone.
        method = super().method
        return "GET" if method == "HEAD" else method


class GraphQLView(GraphQL[Context, None]):
    """GraphiQL for browsers (GET with Accept: text/html) unless turned off; the request as the edge parsed
    it (GET only for persisted documents, which the edge checks); one operation per request; the whole
    operation under a time budget (504 when it runs out)."""

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
        parsed = getattr(request.state, "graphql_request", None) if isinstance(request, _RequestAdapter) else None
        if not isinstance(parsed, GraphQLRequest):
            # Only the edge's RequestParser reads bodies; without it nothing reaches GraphQL.
            raise HTTPException(400, "The request was not parsed at the edge.")
        return GraphQLRequestData(
            query=parsed.query,
            variables=parsed.variables,
            operation_name=parsed.operation_name,
            extensions=parsed.extensions,
            protocol="http",
        )

    async def get_context(self, request: Request | WebSocket, response: Response | WebSocket) -> Context:
        state = request.state
        return Context.create(
            state.pool,
            self.settings,
            redis=getattr(state, "redis", None),
            request=request if isinstance(request, Request) else None,
            response=response if isinstance(response, Response) else None,
            cache=getattr(state, "cache", None),
            identity=getattr(state, "identity", None),
            chat=getattr(state, "chat", None),
            budget=getattr(state, "budget", None),
        )

    def encode_json(self, data: object) -> bytes:
        return orjson.dumps(data)

    async def execute_operation(self, *args: Any, **kwargs: Any) -> Any:
        try:
            async with asyncio.timeout(self.settings.operation_timeout_s) as budget:
                context = kwargs.get("context")
                if isinstance(context, Context):
                    context.operation_budget = budget
                return await super().execute_operation(*args, **kwargs)
        except TimeoutError:
            raise OperationTimeout from None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # No subscriptions: refuse the handshake rather than keep sockets open.
            await send({"type": "websocket.close", "code": 1008})
            return
        try:
            await super().__call__(scope, receive, send)
        except OperationTimeout:
            seconds = self.settings.operation_timeout_s
            logger.warning("operation timed out after %ss", seconds)
            message = f"The operation took longer than {seconds:g}s."
            await error_response(504, message, "TIMEOUT")(scope, receive, send)
