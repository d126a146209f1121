"""`POST /chat`: a question answered as a server-sent event stream, for the site's chat dock.

Body (JSON): `{"question": "...", "scope": {"paper" | "researcher" | "institution": id} or {"papers": [ids]},
"conversationId": "..."}` (scope and conversationId optional); an `Idempotency-Key` header makes retries safe
(askPapers' `idempotencyKey`: a retry gets the stored answer again, `"replayed": true`). Answer: `text/event-stream`
with named events, each `data:` one JSON object:

    sources  {"papers": [{"arxivId", "title", "slug"}]}            the papers retrieved, before any text
    delta    {"text"}                                               the answer as it is written
    done     {"conversationId", "messageId", "citations": [{"arxivId", "title", "slug"}], "removedCitations",
              "usage": {"promptTokens", "completionTokens", "totalTokens", "estimated"}, "replayed"}
    error    {"code", "message", ...}                               instead of the rest

A question refused before any work (not signed in, bad input, quota spent, no model) is a single `error`
event under the matching HTTP status (401, 400, 404, 409 or 429 with Retry-After, 422, 503); once the stream has
started the status is 200 and a failure is an `error` event. A reader who hangs up stops the model: the
upstream request is closed and nothing of that turn is stored. Comments (`: keep-alive`) keep a quiet
stream open through proxies.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

import asyncpg
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from chat.service import ChatError, Delta, Done, Sources, unavailable
from db.paging import encode_global_id
from db.pool import PoolExhausted, is_lost_connection
from db.queries.papers import PaperRow
from resolvers.chat import CONVERSATION, MESSAGE, question_of
from resolvers.context import Context
from resolvers.errors import PublicError
from routes.services import services

log = logging.getLogger("chat")

KEEP_ALIVE_S = 15.0
# What a 503 asks the reader to wait, as for GraphQL's (schema/__init__.py).
RETRY_AFTER_S = 1
SCOPE_KEYS = frozenset({"paper", "researcher", "institution", "papers"})
STATUS = {"UNAUTHENTICATED": 401, "BAD_USER_INPUT": 400, "NOT_FOUND": 404, "RATE_LIMITED": 429}
HEADERS = {"cache-control": "private, no-store", "x-accel-buffering": "no"}


def sse(event: str, data: object) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def paper_json(paper: PaperRow) -> dict[str, str]:
    return {"arxivId": paper.arxiv_id, "title": paper.title, "slug": paper.slug}


class EventStream(Response):
    """Sends `events` as they come, a keep-alive comment after each quiet KEEP_ALIVE_S, and stops them (closing
    the generator, and with it whatever it holds open upstream) as soon as the client disconnects."""

    media_type = "text/event-stream"

    def __init__(
        self, events: AsyncGenerator[bytes, None], *, status_code: int = 200, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(status_code=status_code, headers={**HEADERS, **(headers or {})})
        # No content-length: the body is as long as the answer.
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        pump = asyncio.create_task(self._pump(send))
        hangup = asyncio.create_task(self._hang_up(receive))
        try:
            await asyncio.wait({pump, hangup}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, hangup):
                task.cancel()
            results = await asyncio.gather(pump, hangup, return_exceptions=True)
        if isinstance(results[0], Exception) and not isinstance(results[0], OSError):
            raise results[0]

    async def _hang_up(self, receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _pump(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        pending: asyncio.Future[bytes] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(self.events))
                done, _ = await asyncio.wait({pending}, timeout=KEEP_ALIVE_S)
                if not done:
                    await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
                    continue
                finished, pending = pending, None
                try:
                    chunk = finished.result()
                except StopAsyncIteration:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if pending is not None:
                pending.cancel()
                with contextlib.suppress(BaseException):
                    await pending
            await self.events.aclose()


async def _one(event: bytes) -> AsyncGenerator[bytes, None]:
    yield event


def refused(code: str, message: str, *, status: int, **extensions: Any) -> EventStream:
    headers = {}
    if (retry := extensions.get("retryAfterS")) is not None:
        headers["retry-after"] = str(retry)
    return EventStream(
        _one(sse("error", {"code": code, "message": message, **extensions})), status_code=status, headers=headers
    )


def _bad_input(message: str) -> EventStream:
    return refused("BAD_USER_INPUT", message, status=400)


async def chat_stream(request: Request) -> Response:
    served = services(request.scope)
    ctx = Context.create(
        served["pool"], served["settings"], request=request, chat=served["chat"], replicas=served["replicas"]
    )
    if ctx.identity.viewer_id is None:
        return refused("UNAUTHENTICATED", "Sign in to chat with the papers.", status=401)
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _bad_input('The body must be JSON: {"question": ..., "scope": ..., "conversationId": ...}.')
    if not isinstance(body, dict) or not isinstance(body.get("question"), str):
        return _bad_input("`question` (a string) is required.")
    scope = body.get("scope")
    conversation = body.get("conversationId")
    if scope is not None and (not isinstance(scope, dict) or not set(scope) <= SCOPE_KEYS):
        return _bad_input("`scope` is an object with one of `paper`, `researcher`, `institution` or `papers`.")
    if scope and not all(
        isinstance(v, str) or (k == "papers" and isinstance(v, list) and all(isinstance(p, str) for p in v))
        for k, v in scope.items()
    ):
        return _bad_input("`scope` ids are strings (`papers` a list of them).")
    if conversation is not None and not isinstance(conversation, str):
        return _bad_input("`conversationId` is a string.")
    try:
        key = _idempotency_key(request.headers.get("idempotency-key"))
        question = await question_of(ctx, body["question"], scope or None, conversation, key)
        if ctx.chat is None:
            raise unavailable()
        answer = await ctx.chat.start(question)
    except PublicError as exc:
        return refused(exc.code, str(exc), status=STATUS.get(exc.code, 400))
    except ChatError as exc:
        return refused(exc.code, exc.message, status=exc.status, **exc.extensions)
    except Exception as exc:
        code, message, status = _failure(exc, ctx.request_id)
        extra: dict[str, Any] = {"retryAfterS": RETRY_AFTER_S} if status == 503 else {}
        return refused(code, message, status=status, requestId=ctx.request_id, **extra)
    return EventStream(_answer_events(answer.events(), ctx.request_id, ctx.record_write))


def _idempotency_key(header: str | None) -> str | None:
    """The `Idempotency-Key` header's key: a structured-field string (`"..."`, as the IETF draft writes it) or the
    bare token most clients send."""
    if header is not None and len(header) >= 2 and header[0] == header[-1] == '"':
        return header[1:-1]
    return header


def _failure(exc: Exception, request_id: str) -> tuple[str, str, int]:
    """What an unexpected failure is for the reader, as the GraphQL errors name the same ones (schema/errors.py);
    logged with the request's id."""
    if isinstance(exc, PoolExhausted):
        log.warning("database pool exhausted request_id=%s (chat)", request_id)
        return "OVERLOADED", "The service is overloaded; retry shortly.", 503
    if is_lost_connection(exc):
        log.warning("database connection lost request_id=%s (chat): %s: %s", request_id, type(exc).__name__, exc)
        return "SERVICE_UNAVAILABLE", "The database is unavailable; retry shortly.", 503
    if isinstance(exc, asyncpg.QueryCanceledError):
        log.warning("statement timeout request_id=%s (chat)", request_id)
        return "TIMEOUT", "A database statement took too long; retry.", 504
    log.exception("chat failed request_id=%s", request_id)
    return "INTERNAL_SERVER_ERROR", "Unexpected error.", 500


async def _answer_events(
    events: AsyncGenerator[Any, None], request_id: str, wrote: Callable[[], Awaitable[None]]
) -> AsyncGenerator[bytes, None]:
    """The answer's events as server-sent events; `wrote` is awaited once the turn is stored, before the reader
    hears it is done (their next reads must see the conversation)."""
    async with contextlib.aclosing(events) as answer:
        try:
            async for event in answer:
                if isinstance(event, Sources):
                    yield sse("sources", {"papers": [paper_json(p) for p in event.papers]})
                elif isinstance(event, Delta):
                    yield sse("delta", {"text": event.text})
                elif isinstance(event, Done):
                    await wrote()
                    yield sse(
                        "done",
                        {
                            "conversationId": encode_global_id(CONVERSATION, event.conversation_id),
                            "messageId": encode_global_id(MESSAGE, event.message_id),
                            "citations": [paper_json(p) for p in event.citations],
                            "removedCitations": event.removed_citations,
                            "usage": event.usage.as_json(),
                            "replayed": event.replayed,
                        },
                    )
        except ChatError as exc:
            yield sse("error", {"code": exc.code, "message": exc.message, **exc.extensions})
        except Exception as exc:
            code, message, _ = _failure(exc, request_id)
            yield sse("error", {"code": code, "message": message, "requestId": request_id})
