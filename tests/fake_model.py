"""A fake OpenAI-compatible model server on loopback, speaking the real wire format of `/v1/chat/completions`.

A plain asyncio HTTP/1.1 server (one request per connection, `Connection: close`), so that a test controls
every byte: JSON completions, streams of `data: {chunk}` events ended by `data: [DONE]` (chunked transfer
encoding, as the hosted APIs send them), structured output for `response_format` json_schema, usage,
429 with and without Retry-After, error pages, malformed JSON, a connection dropped mid-stream, a slow first
token, a server that never answers. It records each request (headers, JSON body) and notices when a client
hangs up before its answer is complete.

Each request takes the next scripted behaviour (`script`), else the `responder`'s for that request.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

Behaviour = Callable[["Received", "Responder"], Awaitable[None]]


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    # Set when the client closed its side before the answer was complete (it hung up mid-stream).
    hung_up: asyncio.Event = field(default_factory=asyncio.Event)
    completed: bool = False

    @property
    def messages(self) -> list[dict[str, str]]:
        return list(self.body.get("messages", [])) if isinstance(self.body, dict) else []

    @property
    def streamed(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    def prompt_text(self) -> str:
        return "\n".join(m.get("content", "") for m in self.messages)


class Responder:
    """Writes one HTTP response on a connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer

    async def head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
        lines += [f"{k}: {v}" for k, v in {**headers, "connection": "close"}.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def whole(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        await self.head(status, {"content-type": content_type, "content-length": str(len(body)), **(headers or {})})
        self.writer.write(body)
        await self.writer.drain()

    async def chunk(self, data: bytes) -> None:
        self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await self.writer.drain()

    async def end_chunks(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    def drop(self) -> None:
        """Close the connection at once, mid-answer."""
        transport = self.writer.transport
        transport.abort()


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 429: "Too Many Requests", 500: "Internal Server Error"}


class FakeModel:
    def __init__(self, responder: Callable[[Received], Behaviour] | None = None) -> None:
        self.script: deque[Behaviour] = deque()
        self.responder = responder or (lambda received: reply("A plain answer."))
        self.requests: list[Received] = []
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def start(self) -> FakeModel:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._handlers):
                task.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)
            await self._server.wait_closed()

    def then(self, *behaviours: Behaviour) -> FakeModel:
        self.script.extend(behaviours)
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            received = await _read_request(reader)
            if received is None:
                return
            self.requests.append(received)
            watcher = asyncio.create_task(_watch_hang_up(reader, received))
            behaviour = self.script.popleft() if self.script else self.responder(received)
            try:
                await behaviour(received, Responder(writer))
                received.completed = True
            except (ConnectionError, OSError):
                received.hung_up.set()
            finally:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    await watcher
        except asyncio.CancelledError:
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self._handlers.discard(task)


async def _read_request(reader: asyncio.StreamReader) -> Received | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    try:
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
    except (asyncio.IncompleteReadError, ConnectionError):
        return None  # the client gave up while sending
    try:
        body = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        body = raw
    return Received(method, path, headers, body)


async def _watch_hang_up(reader: asyncio.StreamReader, received: Received) -> None:
    with contextlib.suppress(ConnectionError):
        while await reader.read(1024):
            pass
    received.hung_up.set()


# -- behaviours --------------------------------------------------------------------------------------------


def _completion(text: str, usage: tuple[int, int] | None, model: str) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
    }
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return orjson.dumps(body)


def _chunk(model: str, *, content: str | None = None, role: bool = False, finish: str | None = None) -> bytes:
    delta: dict[str, Any] = {}
    if role:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def _usage_chunk(model: str, usage: tuple[int, int]) -> bytes:
    body = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def pieces_of(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def reply(
    text: str,
    *,
    usage: tuple[int, int] | None = (100, 20),
    pieces: Sequence[str] | None = None,
    first_delay_s: float = 0.0,
    interval_s: float = 0.0,
    drop_after: int | None = None,
    finish: str | None = "stop",
    done: bool = True,
) -> Behaviour:
    """The answer `text`: whole, or streamed when the request asks for a stream.

    Streamed: a role chunk, `pieces` (default: 7-character slices) `interval_s` apart after `first_delay_s`,
    a finish chunk, the usage chunk (when `stream_options.include_usage` and `usage`), then `data: [DONE]`.
    `drop_after=n` aborts the connection after n pieces; `finish=None, done=False` ends the body without
    saying the answer is complete.
    """

    async def behave(received: Received, out: Responder) -> None:
        model = str(received.body.get("model", "fake")) if isinstance(received.body, dict) else "fake"
        if not received.streamed:
            if first_delay_s:
                await asyncio.sleep(first_delay_s)
            await out.whole(200, _completion(text, usage, model), "application/json")
            return
        await out.head(200, {"content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"})
        if first_delay_s:
            await asyncio.sleep(first_delay_s)
        await out.chunk(_chunk(model, role=True, content=""))
        for n, piece in enumerate(pieces if pieces is not None else pieces_of(text)):
            if drop_after is not None and n == drop_after:
                out.drop()
                return
            if n and interval_s:
                await asyncio.sleep(interval_s)
            await out.chunk(_chunk(model, content=piece))
        if finish is not None:
            await out.chunk(_chunk(model, finish=finish))
        options = received.body.get("stream_options") or {}
        if usage is not None and options.get("include_usage"):
            await out.chunk(_usage_chunk(model, usage))
        if done:
            await out.chunk(b"data: [DONE]\n\n")
        await out.end_chunks()

    return behave


def structured(obj: Any, **kw: Any) -> Behaviour:
    """A structured-output answer: the JSON text of `obj` as the message content."""
    return reply(orjson.dumps(obj).decode(), **kw)


def status(code: int, body: bytes | dict[str, Any] = b"", headers: dict[str, str] | None = None) -> Behaviour:
    """An unsuccessful answer; a dict body is sent as an OpenAI-style JSON error object."""

    async def behave(received: Received, out: Responder) -> None:
        if isinstance(body, dict):
            await out.whole(code, orjson.dumps(body), "application/json", headers)
        else:
            ctype = "text/html; charset=utf-8" if body.lstrip().startswith(b"<") else "text/plain"
            await out.whole(code, body, ctype, headers)

    return behave


def rate_limited(retry_after: str | None = None) -> Behaviour:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    error = {
        "message": "Rate limit reached for requests",
        "type": "requests",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    return status(429, {"error": error}, headers)


# OpenAI's own refusals of what its reasoning models (o-series, GPT-5 and later) do not take, word for word.
REFUSALS: dict[str, dict[str, Any]] = {
    "max_tokens": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
        "Use 'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "param": "max_tokens",
        "code": "unsupported_parameter",
    },
    "temperature": {
        "message": "Unsupported value: 'temperature' does not support 0.2 with this model. "
        "Only the default (1) value is supported.",
        "type": "invalid_request_error",
        "param": "temperature",
        "code": "unsupported_value",
    },
    # A server whose model has no structured outputs (as Groq answers for some of its models).
    "response_format": {
        "message": "response_format `json_schema` is not supported with this model",
        "type": "invalid_request_error",
        "param": "response_format",
    },
    # Azure OpenAI's older API versions, without a `param`.
    "stream_options": {
        "message": "Unrecognized request argument supplied: stream_options",
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    },
}


def refused(param: str) -> Behaviour:
    return status(400, {"error": REFUSALS[param]})


def reasoning_model(answer: Callable[[Received], Behaviour]) -> Callable[[Received], Behaviour]:
    """A responder that refuses, as OpenAI's reasoning models do, `max_tokens` and any temperature but 1, and
    otherwise answers as `answer` does."""

    def respond(received: Received) -> Behaviour:
        if "max_tokens" in received.body:
            return refused("max_tokens")
        if received.body.get("temperature", 1) != 1:
            return refused("temperature")
        return answer(received)

    return respond


def malformed_json() -> Behaviour:
    """200 with a JSON content type and a body that is not JSON."""

    async def behave(received: Received, out: Responder) -> None:
        await out.whole(200, b'{"id": "chatcmpl-fake", "choices": [{"message": ', "application/json")

    return behave


def hang(seconds: float = 3600.0) -> Behaviour:
    """Accept the request and say nothing."""

    async def behave(received: Received, out: Responder) -> None:
        await asyncio.sleep(seconds)

    return behave


@contextlib.asynccontextmanager
async def fake_model(responder: Callable[[Received], Behaviour] | None = None) -> AsyncIterator[FakeModel]:
    server = await FakeModel(responder).start()
    try:
        yield server
    finally:
        await server.stop()


@contextlib.contextmanager
def fake_model_in_thread(responder: Callable[[Received], Behaviour] | None = None) -> Iterator[FakeModel]:
    """The fake on an event loop of its own, for code that runs its own loop (a CLI command under test)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-model", daemon=True)
    thread.start()
    try:
        server = asyncio.run_coroutine_threadsafe(FakeModel(responder).start(), loop).result(timeout=30)
        try:
            yield server
        finally:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


# -- a model that analyses papers ---------------------------------------------------------------------------

ANALYSIS_USAGE = (480, 140)


def paper_in(received: Received) -> dict[str, Any]:
    """The paper a request of `ingest analyse` carries (the JSON document in its user message)."""
    for message in received.messages:
        if message.get("role") == "user" and "{" in message.get("content", ""):
            return dict(orjson.loads(message["content"][message["content"].index("{") :]))
    raise AssertionError("no paper in the request")


def analysis_of(paper: dict[str, Any]) -> dict[str, Any]:
    """A valid analysis, derived from the paper so that tests can tell which paper it was made from."""
    title = paper["title"]
    return {
        "summary": f"This paper studies {title.lower()}. It reports what the abstract says and no more.",
        "topics": [max(title.split(), key=len).lower(), "test topic", paper["categories"][0]],
        "paper_type": "METHOD",
        "research_field": "Testing",
        "novelty": f"A new look at {title.lower()}.",
        "significance_score": 0.42,
    }


def analyst(received: Received) -> Behaviour:
    """Answers every analysis request with a valid analysis of its paper."""
    return structured(analysis_of(paper_in(received)), usage=ANALYSIS_USAGE)
