"""The edge as one ASGI layer: every request passes its checks in one place, and every response gets its headers
from one `send`.

In order: the request id and timing (telemetry/requests.py), CORS (Starlette's middleware answers preflights and
requests carrying an `Origin`; any other response gets `Vary: Origin` as it would from it), the body limit (413),
identity (401), then `/graphql` goes straight to the GraphQL steps (the budget, parsing, persisted documents, the
response cache, GraphQL) and any other route to the application's router; a GET or POST the response cache
remembers (`memory`: the same bytes from an anonymous reader, its answer held in memory) is answered before
those steps, its budget charged as any. On the way out: the rate-limit headers of `/graphql` answers,
`Cache-Control: private, no-store` for signed-in readers, `X-Request-Id`; once sent, the request's metrics and
log line. The server may offer such a request before the ASGI exchange (`answer_now`, edge/protocol.py): the same
checks, answer, charge, headers, metrics and line, without the exchange.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Final

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from db.cache.allowance import request_allowance
from edge.body_limit import TooLarge, declared_length, limited, reject
from edge.errors import EdgeError, send_error
from edge.identity import BearerAuthenticator, Identifier, Identity, KeyAuthenticator, Network
from edge.media import media_of
from edge.private import private as _private
from edge.ratelimit import Budget, Decision, RateLimiter, RateLimitPolicy
from edge.request import headers_of, read_body, replay, response_type
from telemetry.requests import report, request_id

if TYPE_CHECKING:
    from edge.response_cache import Recalled, ResponseCache

GRAPHQL_PATH: Final = "/graphql"
# Methods the GraphQL steps answer; any other goes to the router (405).
GRAPHQL_METHODS: Final = frozenset({"GET", "POST", "HEAD"})
VARY_ORIGIN: Final = b"Origin"
REMEMBERED_METHODS: Final = frozenset({"GET", "POST"})

Header = tuple[bytes, bytes]
# Sends a whole response: status, headers (none of those the edge adds), body.
Answer = Callable[[int, list[Header], bytes], Awaitable[None]]
# Writes a whole response: status, every header, body.
Write = Callable[[int, list[Header], bytes], None]


class Front:
    """Starlette middleware (`Middleware(Front, graphql=..., ...)`); `app` is the rest of Starlette's stack."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        graphql: ASGIApp,
        policy: RateLimitPolicy,
        cors: dict[str, Any],
        max_body_bytes: int,
        trusted_proxies: Iterable[Network] = (),
        key_authenticator: KeyAuthenticator | None = None,
        bearer_authenticator: BearerAuthenticator | None = None,
        memory: ResponseCache | None = None,
    ) -> None:
        self.app = app
        self.graphql = graphql
        self.memory = memory
        self.policy = policy
        self.max_body_bytes = max_body_bytes
        self.identifier = Identifier(
            trusted_proxies=trusted_proxies,
            key_authenticator=key_authenticator,
            bearer_authenticator=bearer_authenticator,
        )
        self.cors = CORSMiddleware(self._checked, **cors)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})
        headers = headers_of(scope)
        rid = state["request_id"] = request_id(headers.get(b"x-request-id"))
        started = time.perf_counter()
        out = _Out(send, rid)
        # One Redis timeout at most for the whole request (db/cache/allowance.py).
        with request_allowance() as allowance:
            state["redis_allowance"] = allowance
            try:
                if b"origin" in headers:
                    await self.cors(scope, receive, out)
                else:
                    out.vary = True
                    await self._checked(scope, receive, out)
            finally:
                report(scope, state, rid, out.status, out.cache, time.perf_counter() - started)

    def answer_now(self, scope: Scope, body: bytes, write: Write) -> bool | Coroutine[Any, Any, None]:
        """Answers, through `write`, a request `__call__` would answer from memory, with the same response (headers
        included), budget charge, metrics and log line: True once written, when the budget could be charged at once
        (rate limits off, or a lease holds the points); else a coroutine that answers (or refuses) once the charge
        has gone to Redis. False, having done nothing, for any other request. `scope`: an HTTP request's, its body
        complete in `body`. The server calls this (edge/protocol.py) before it starts the ASGI exchange, which is
        most of a small answer's cost."""
        started = time.perf_counter()
        headers = headers_of(scope)
        if (
            self.memory is None
            or b"origin" in headers
            or scope["method"] not in REMEMBERED_METHODS
            or _route_path(scope) != GRAPHQL_PATH
            or len(body) > self.max_body_bytes
        ):
            return False
        identity = self.identifier.anonymous(scope)
        if identity is None:
            return False
        state: dict[str, Any] = scope["state"]
        state["identity"] = identity
        recalled = self.memory.recall(scope, body)
        if recalled is None:
            return False
        rid = state["request_id"] = request_id(headers.get(b"x-request-id"))
        budget = None
        limiter = state.get("rate_limiter")
        if self.policy.enabled and isinstance(limiter, RateLimiter):
            budget = state["budget"] = Budget(limiter, self.policy, identity)
            if not budget.charge_now(recalled.held.cost):
                return self._answer_charged(scope, recalled, budget, write, started)
        status, extra, content = self.memory.answer_recalled(scope, recalled, media_of(headers))
        if budget is not None and budget.decision is not None:
            extra += budget.decision.headers()
        write(status, _edge_headers(extra, private=False, vary=True, request_id=rid), content)
        report(scope, state, rid, status, _cache_of(extra), time.perf_counter() - started)
        return True

    async def _answer_charged(
        self, scope: Scope, recalled: Recalled, budget: Budget, write: Write, started: float
    ) -> None:
        """`answer_now`'s answer once its charge has gone to Redis, as the exchange gives it, a refusal included."""
        assert self.memory is not None
        state = scope["state"]
        rid = state["request_id"]
        out = _Out(_Written(write), rid)
        out.vary = True
        out.budget = budget
        with request_allowance() as allowance:
            state["redis_allowance"] = allowance
            try:
                await self.memory.answer_charged(scope, recalled, out, out.answer)
            finally:
                report(scope, state, rid, out.status, out.cache, time.perf_counter() - started)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        """After CORS: the body limit, identity, then the route."""
        out = send if isinstance(send, _Out) else None
        length = declared_length(scope)
        if length is not None and length > self.max_body_bytes:
            await reject(send, self.max_body_bytes, response_type(scope))
            return
        try:
            identity = self.identifier.anonymous(scope) or await self.identifier.identify(scope)
        except EdgeError as exc:
            await send_error(send, exc, response_type(scope))
            return
        state = scope["state"]
        state["identity"] = identity
        if out is None:
            # Behind CORS's own send: the headers below are added on a send of this layer's.
            out = _Out(send, None)
            send = out
        out.private = identity.viewer_id is not None
        if length is None:
            # A declared length holds the body to it (the HTTP parser reads no more); any other is counted.
            receive = limited(receive, self.max_body_bytes)
        try:
            if scope["method"] in GRAPHQL_METHODS and _route_path(scope) == GRAPHQL_PATH:
                # With rate limits off an answer from memory charges nothing: its budget is made only for GraphQL.
                if self.policy.enabled:
                    self._budget(state, identity, out)
                if self.memory is not None and scope["method"] in REMEMBERED_METHODS:
                    body = await read_body(receive) if scope["method"] == "POST" else b""
                    if await self.memory.answer_remembered(scope, body, out, out.answer):
                        return
                    receive = replay(body, receive)
                if not self.policy.enabled:
                    self._budget(state, identity, out)
                await self.graphql(scope, receive, send)
            else:
                await self.app(scope, receive, send)
        except TooLarge:
            if out.started:
                raise
            await reject(send, self.max_body_bytes, response_type(scope))

    def _budget(self, state: dict[str, Any], identity: Identity, out: _Out) -> None:
        """The request's handle on its client's budget (`state["budget"]`), charged by whoever learns the cost."""
        limiter = state.get("rate_limiter")
        if not isinstance(limiter, RateLimiter):
            return
        budget = Budget(limiter, self.policy, identity)
        state["budget"] = budget
        if budget.enabled:
            out.budget = budget


class _Out:
    """The one `send` of a request: what the response says (status, X-Cache) and the headers the edge adds."""

    __slots__ = ("budget", "cache", "private", "request_id", "send", "started", "status", "vary")

    def __init__(self, send: Send, rid: str | None) -> None:
        self.send = send
        self.request_id = rid
        self.status = 500
        self.cache = ""
        self.started = False
        self.vary = False
        self.private = False
        self.budget: Budget | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            message = await self._start(message)
        await self.send(message)

    async def answer(self, status: int, headers: list[Header], body: bytes) -> None:
        """A whole response at once, in two messages built here, `headers` (a list of the caller's) extended in place:
        an answer from memory, without the copies a response of unknown make gets."""
        self._note(status, headers)
        if self.budget is not None:
            headers += (self.budget.decision or await self._standing()).headers()
        send = self.send
        await send({"type": "http.response.start", "status": status, "headers": self._add(headers)})
        await send({"type": "http.response.body", "body": body})

    async def _start(self, message: Message) -> Message:
        headers = list(message.get("headers", ()))
        self._note(message["status"], headers)
        if self.budget is not None:
            headers += (self.budget.decision or await self._standing()).headers()
        return {**message, "headers": self._add(headers)}

    def _note(self, status: int, headers: list[Header]) -> None:
        self.started = True
        self.status = status
        self.cache = _cache_of(headers) or self.cache

    async def _standing(self) -> Decision:
        """The budget as it stands, for an answer that charged nothing (an error before GraphQL ran)."""
        assert self.budget is not None
        return await self.budget.charge(0)

    def _add(self, headers: list[Header]) -> list[Header]:
        return _edge_headers(headers, private=self.private, vary=self.vary, request_id=self.request_id)


class _Written:
    """An ASGI `send` for a whole response the server writes at once (`Write`): the start is held for the body."""

    __slots__ = ("start", "write")

    def __init__(self, write: Write) -> None:
        self.write = write
        self.start: Message | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.start = message
            return
        assert self.start is not None and not message.get("more_body", False)
        self.write(self.start["status"], list(self.start.get("headers", ())), message.get("body", b""))


def _cache_of(headers: list[Header]) -> str:
    """The response's X-Cache, "" without one."""
    for name, value in headers:
        if name == b"x-cache":
            return value.decode()
    return ""


def _edge_headers(headers: list[Header], *, private: bool, vary: bool, request_id: str | None) -> list[Header]:
    """`headers` with the edge's own (the budget's apart)."""
    if private:
        headers = _private(headers)
    if vary:
        headers = _vary_origin(headers)
    if request_id is not None:
        headers.append((b"x-request-id", request_id.encode()))
    return headers


def _route_path(scope: Scope) -> str:
    """The path the router matches: without the `root_path` a proxy's prefix put in front (`--root-path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root) : len(root) + 1] == "/":
        return path[len(root) :]
    return path


def _vary_origin(headers: list[Header]) -> list[Header]:
    """What Starlette's CORS middleware does to a response without an `Origin`: `Vary` gains `Origin`."""
    vary = [v for k, v in headers if k.lower() == b"vary"]
    if not vary:
        headers.append((b"vary", VARY_ORIGIN))
        return headers
    return [*((k, v) for k, v in headers if k.lower() != b"vary"), (b"vary", b", ".join([*vary, VARY_ORIGIN]))]
