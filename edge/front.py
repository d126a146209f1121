"""The edge as one ASGI layer: every request passes its checks in one place, and every response gets its headers
from one `send`.

In order: the request id and timing (telemetry/requests.py), CORS (Starlette's middleware answers preflights and
requests carrying an `Origin`; any other response gets `Vary: Origin` as it would from it), the head's size (431, or
414 for a URL: edge/protocol.py refuses such heads before they are read whole, uvicorn's own parser does not), the
body limit (413) and its time (a body that stops arriving for `body_timeout_s` is answered 408 and its connection
closed), identity (401), then `/graphql` goes straight to the GraphQL steps (the budget, parsing, persisted documents,
the response cache, GraphQL) and any other route to the application's router; a GET or POST the response cache
remembers (`memory`: the same bytes from an anonymous reader, its answer held in memory) is answered before
those steps, its budget charged as any. On the way out: the rate-limit headers of `/graphql` answers,
`Cache-Control: private, no-store` for signed-in readers, `X-Request-Id`; once sent, the request's metrics and
log line. The server may offer such a request before the ASGI exchange (`answer_now`, edge/protocol.py): the same
checks, answer, charge, headers, metrics and line, without the exchange. What the edge keeps of a request for the
next ones (its anonymous identity, the media type its `Accept` chose) is kept once it was answered, never for a
refused one.
"""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import Coroutine, Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from db.cache.allowance import request_allowance
from edge.answers import Header, Write
from edge.body_limit import TooLarge, declared_length, limited, reject
from edge.errors import EVENT_STREAM, EdgeError, send_error
from edge.identity import BearerAuthenticator, Identifier, KeyAuthenticator, client_ip
from edge.media import media_of, remember
from edge.private import private as _private
from edge.ratelimit import RateCharge, RateLimiter, RateLimitPolicy
from edge.request import headers_of, read_body, replay, response_type
from request_types.identity import Identity, Network
from request_types.rate import Decision
from request_types.state import RequestState, request_state
from telemetry.metrics import count_rejection
from telemetry.requests import report, request_id

if TYPE_CHECKING:
    from edge.response_cache import Recalled, ResponseCache

GRAPHQL_PATH: Final = "/graphql"
# Methods the GraphQL steps answer; any other goes to the router (405).
GRAPHQL_METHODS: Final = frozenset({"GET", "POST", "HEAD"})
VARY_ORIGIN: Final = b"Origin"
REMEMBERED_METHODS: Final = frozenset({"GET", "POST"})
# Methods whose requests carry no body to read.
BODILESS_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})
CLOSE: Final = {"connection": "close"}


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
        max_header_bytes: int = 65_536,
        body_timeout_s: float = 10.0,
        trusted_proxies: Iterable[Network] = (),
        key_authenticator: KeyAuthenticator | None = None,
        bearer_authenticator: BearerAuthenticator | None = None,
        memory: ResponseCache | None = None,
        event_streams: Iterable[str] = (),
    ) -> None:
        """`event_streams`: the paths of routes that answer with server-sent events (`/chat`), whose refusals here are
        an `error` event as theirs are."""
        self.app = app
        self.event_streams = frozenset(event_streams)
        self.graphql = graphql
        self.memory = memory
        self.policy = policy
        self.max_body_bytes = max_body_bytes
        self.max_header_bytes = max_header_bytes
        self.body_timeout_s = body_timeout_s
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
        # The state `answer_now` made, when it was offered the request and left it to the exchange.
        state = request_state(scope)
        headers = headers_of(scope)
        rid = state.request_id = request_id(headers.get(b"x-request-id"))
        started = time.perf_counter()
        out = _Out(send, rid)
        # One Redis timeout at most for the whole request (db/cache/allowance.py).
        with request_allowance() as allowance:
            state.redis = allowance
            try:
                if b"origin" in headers:
                    await self.cors(scope, receive, out)
                else:
                    out.vary = True
                    await self._checked(scope, receive, out)
            finally:
                report(scope, state, out.status, out.cache, time.perf_counter() - started)
                if out.status < 400:
                    self._keep(state, headers)

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
        state = request_state(scope)
        state.identity = identity
        recalled = self.memory.recall(scope, body)
        if recalled is None:
            return False
        rid = state.request_id = request_id(headers.get(b"x-request-id"))
        charge = None
        limiter = scope["state"].get("rate_limiter")
        if self.policy.enabled and isinstance(limiter, RateLimiter):
            charge = state.rate_charge = RateCharge(limiter, self.policy, identity)
            if not charge.charge_now(recalled.held.cost):
                return self._answer_charged(scope, state, recalled, charge, write, started)
        status, extra, content = self.memory.answer_recalled(scope, recalled, media_of(headers))
        if charge is not None and charge.decision is not None:
            extra += charge.decision.headers()
        write(status, _edge_headers(extra, private=False, vary=True, request_id=rid), content)
        report(scope, state, status, _cache_of(extra), time.perf_counter() - started)
        self._keep(state, headers)
        return True

    async def _answer_charged(
        self, scope: Scope, state: RequestState, recalled: Recalled, charge: RateCharge, write: Write, started: float
    ) -> None:
        """`answer_now`'s answer once its charge has gone to Redis, as the exchange gives it, a refusal included."""
        assert self.memory is not None
        rid = state.request_id
        out = _Out(_Written(write), rid)
        out.vary = True
        out.charge = charge
        with request_allowance() as allowance:
            state.redis = allowance
            try:
                await self.memory.answer_charged(scope, recalled, out, out.answer)
            finally:
                report(scope, state, out.status, out.cache, time.perf_counter() - started)
                if out.status < 400:
                    self._keep(state, headers_of(scope))

    def _keep(self, state: RequestState, headers: Mapping[bytes, bytes]) -> None:
        """What the next requests of an answered one reuse: its anonymous identity, its `Accept`'s media type."""
        remember(headers)
        if state.identity is not None:
            self.identifier.keep(state.identity)

    async def _checked(self, scope: Scope, receive: Receive, send: Send) -> None:
        """After CORS: the head's size, the body's size and time, identity, then the route."""
        out = send if isinstance(send, _Out) else None
        head = self._head_refused(scope)
        if head is not None:
            count_rejection(head.code)
            await send_error(send, head, self._media(scope))
            return
        length = declared_length(scope)
        if length is not None and length > self.max_body_bytes:
            await reject(send, self.max_body_bytes, self._media(scope))
            return
        state = request_state(scope)
        try:
            identity = self.identifier.anonymous(scope) or await self._identify(scope, state)
        except EdgeError as exc:
            # The log line names who failed, and why.
            state.identity = Identity(client_ip=client_ip(scope, self.identifier.trusted_proxies))
            state.error_codes = [exc.code]
            await send_error(send, exc, self._media(scope))
            return
        state.identity = identity
        if out is None:
            # Behind CORS's own send: the headers below are added on a send of this layer's.
            out = _Out(send, None)
            send = out
        out.private = identity.viewer_id is not None
        receive = self._timed(receive, send, out, scope)
        if length is None:
            # A declared length holds the body to it (the HTTP parser reads no more); any other is counted.
            receive = limited(receive, self.max_body_bytes)
        try:
            if scope["method"] in GRAPHQL_METHODS and _route_path(scope) == GRAPHQL_PATH:
                # With rate limits off an answer from memory charges nothing: its charge is made only for GraphQL.
                if self.policy.enabled:
                    self._charge(scope, state, identity, out)
                if self.memory is not None and scope["method"] in REMEMBERED_METHODS:
                    body = await read_body(receive) if scope["method"] == "POST" else b""
                    if await self.memory.answer_remembered(scope, body, out, out.answer):
                        return
                    receive = replay(body, receive)
                if not self.policy.enabled:
                    self._charge(scope, state, identity, out)
                await self.graphql(scope, receive, send)
            else:
                # Other routes that cost something (the feeds) charge the same points themselves, and add its headers
                # to what they answer.
                if self.policy.enabled and isinstance(limiter := scope["state"].get("rate_limiter"), RateLimiter):
                    state.rate_charge = RateCharge(limiter, self.policy, identity)
                if length is None and scope["method"] not in BODILESS_METHODS:
                    # Read here, within the limit: past it, a route's own read would raise through Starlette's error
                    # middleware, which answers 500 before the 413 below could.
                    receive = replay(await read_body(receive), receive)
                await self.app(scope, receive, send)
        except TooLarge:
            if out.started:
                raise
            await reject(send, self.max_body_bytes, self._media(scope))
        except ClientDisconnect:
            pass  # gone, or its body timed out (answered then): nobody to answer

    def _head_refused(self, scope: Scope) -> EdgeError | None:
        """A head past `max_header_bytes`: what the protocol refuses before reading it whole (edge/protocol.py), for
        a server that read it whole (uvicorn's own parser)."""
        target = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        size = target + sum(len(name) + len(value) + 4 for name, value in scope.get("headers", ()))
        if size <= self.max_header_bytes:
            return None
        status, what = (414, "URL") if 2 * target > size else (431, "request line and headers")
        message = f"The {what} take more than {self.max_header_bytes} bytes."
        return EdgeError(status, "REQUEST_HEAD_TOO_LARGE", message)

    def _timed(self, receive: Receive, send: Send, out: _Out, scope: Scope) -> Receive:
        """`receive`, answering 408 (and closing the connection) when a part of the body does not come within
        `body_timeout_s`; the application then reads a disconnect. Once the body is complete, a wait (for the client
        to go, as a stream's) is not timed."""
        complete = False
        timeout = self.body_timeout_s

        async def timed() -> Message:
            nonlocal complete
            if complete:
                return await receive()
            # A part already there (a body the server read whole, as most are) is taken without a timer; only a
            # receive that has to wait is timed, from where it waits.
            pending = receive().__await__()
            try:
                waiting = pending.send(None)
            except StopIteration as ready:
                message = _message(ready)
            else:
                try:
                    async with asyncio.timeout(timeout):
                        message = await _resumed(pending, waiting)
                except TimeoutError:
                    complete = True
                    count_rejection("REQUEST_TIMEOUT")
                    if not out.started:
                        text = f"The request's body did not arrive within {timeout:g} s."
                        late = EdgeError(408, "REQUEST_TIMEOUT", text)
                        late.headers = CLOSE
                        await send_error(send, late, self._media(scope))
                    out.closed = True
                    return {"type": "http.disconnect"}
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        return timed

    async def _identify(self, scope: Scope, state: RequestState) -> Identity:
        """Verifies the request's credentials. A failed authentication is charged to the client address's points for
        them (`address_charge`, edge/api_keys.py): that charge is made here, before them."""
        limiter = scope["state"].get("rate_limiter")
        if self.policy.enabled and isinstance(limiter, RateLimiter):
            address = Identity(client_ip=client_ip(scope, self.identifier.trusted_proxies))
            state.address_charge = RateCharge(
                limiter, self.policy, address, subject=self.policy.failed_auth_subject(address)
            )
        return await self.identifier.identify(scope)

    def _media(self, scope: Scope) -> bytes:
        """The media type of the edge's refusals of this request."""
        return EVENT_STREAM if _route_path(scope) in self.event_streams else response_type(scope)

    def _charge(self, scope: Scope, state: RequestState, identity: Identity, out: _Out) -> None:
        """The request's charge on its client's points (`rate_charge`), made by whoever learns the cost."""
        limiter = scope["state"].get("rate_limiter")
        if not isinstance(limiter, RateLimiter):
            return
        charge = RateCharge(limiter, self.policy, identity)
        state.rate_charge = charge
        if charge.enabled:
            out.charge = charge


@types.coroutine
def _resumed(pending: Generator[Any, Any, Message], waiting: Any) -> Generator[Any, Any, Message]:
    """Awaits `pending`, an awaitable's iterator already run to its first wait (`waiting`, what it yielded): what
    `await` does, from there on (`yield from` cannot start part way)."""
    while True:
        try:
            sent = yield waiting
        except GeneratorExit:
            pending.close()
            raise
        except BaseException as exc:  # a cancellation (the timeout's) goes on to where the coroutine waits
            try:
                waiting = pending.throw(exc)
            except StopIteration as done:
                return _message(done)
        else:
            try:
                waiting = pending.send(sent)
            except StopIteration as done:
                return _message(done)


def _message(done: StopIteration) -> Message:
    message: Message = done.value
    return message


class _Out:
    """The one `send` of a request: what the response says (status, X-Cache) and the headers the edge adds."""

    __slots__ = ("cache", "charge", "closed", "private", "request_id", "send", "started", "status", "vary")

    def __init__(self, send: Send, rid: str | None) -> None:
        self.send = send
        self.request_id = rid
        self.status = 500
        self.cache = ""
        self.started = False
        self.vary = False
        self.private = False
        self.charge: RateCharge | None = None
        # Answered by the edge (a body that timed out): what the application sends after is dropped.
        self.closed = False

    async def __call__(self, message: Message) -> None:
        if self.closed:
            return
        if message["type"] == "http.response.start":
            message = await self._start(message)
        await self.send(message)

    async def answer(self, status: int, headers: list[Header], body: bytes) -> None:
        """A whole response at once, in two messages built here, `headers` (a list of the caller's) extended in place:
        an answer from memory, without the copies a response of unknown make gets."""
        if self.closed:
            return
        self._note(status, headers)
        if self.charge is not None:
            headers += (self.charge.decision or await self._standing()).headers()
        send = self.send
        await send({"type": "http.response.start", "status": status, "headers": self._add(headers)})
        await send({"type": "http.response.body", "body": body})

    async def _start(self, message: Message) -> Message:
        headers = list(message.get("headers", ()))
        self._note(message["status"], headers)
        if self.charge is not None:
            headers += (self.charge.decision or await self._standing()).headers()
        return {**message, "headers": self._add(headers)}

    def _note(self, status: int, headers: list[Header]) -> None:
        self.started = True
        self.status = status
        self.cache = _cache_of(headers) or self.cache

    async def _standing(self) -> Decision:
        """The client's points as they stand, for an answer that charged nothing (an error before GraphQL ran)."""
        assert self.charge is not None
        return await self.charge.charge(0)

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
