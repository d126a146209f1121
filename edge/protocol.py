"""uvicorn's HTTP/1.1 protocol (httptools) with the edge's answers from memory given as soon as a request is parsed.

A request whose headers and body arrive together is offered to the application's `answer_now` (edge/front.py)
before uvicorn starts its ASGI exchange (a task, the scope's messages, Starlette, the response's checks and two
writes): an anonymous request the response cache remembers is answered with one write of the same bytes the
exchange would send, there when its budget can be charged at once, else by a task of its own once the charge has
gone to Redis. Anything else, including a request whose body is still on its way, takes the exchange as usual.
Used by `wovepaper serve`, or `uvicorn --http edge.protocol:EdgeHttpProtocol --no-proxy-headers`; `answer_now` is
looked up on the application uvicorn serves, so a server that wraps it in anything of its own (proxy headers,
message logging) leaves every request to the exchange.

It also holds clients to what a request may take before the application sees it (`HttpLimits`, from the settings the
application carries): a request head (request line and headers) past `max_header_bytes` is answered 431 (414 when
most of it is the URL) as soon as that many bytes arrived, so a worker never holds a larger one; a head must arrive
within `header_timeout_s` of its first byte (of the connection's opening, for its first request), else 408; a
connection that opens and sends nothing is closed then, and so is one whose request was answered without its body
once the rest of it took `body_timeout_s`. Both answers close the connection. uvicorn's own parser has
neither bound: a 50 MB header was read whole, and a client sending a byte of head every few seconds held its
connection forever. (A body that stops arriving is the application's to time out, under any server: edge/front.py.)
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import orjson
from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from edge.answers import Header
from telemetry.metrics import count_rejection

CONNECTION_CLOSE = b"connection: close\r\n"


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """What a request may take before the application sees it (the application's `http_limits`: the settings)."""

    max_header_bytes: int = 65_536
    header_timeout_s: float = 10.0
    body_timeout_s: float = 10.0


def refusal(status: int, code: str, message: str) -> bytes:
    """A whole response that closes the connection, its body a GraphQL error (as the edge's own, edge/errors.py)."""
    body = orjson.dumps({"errors": [{"message": message, "extensions": {"code": code}}]})
    head = [
        STATUS_LINE[status],
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"cache-control: no-store\r\n",
        CONNECTION_CLOSE,
        b"\r\n",
    ]
    return b"".join(head) + body


class EdgeHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answer_now = getattr(self.app, "answer_now", None)
        limits = getattr(self.app, "http_limits", None)
        self.limits = limits if isinstance(limits, HttpLimits) else HttpLimits()
        # While uvicorn parses a request's headers: whether its exchange may wait for the body.
        self._holding = False
        # The exchange of a request held until its body is complete: started then, unless answered.
        self._held: tuple[RequestResponseCycle, ASGI3Application] | None = None
        # The head being read: whether one is (rather than a body), its bytes so far, since when (loop time; None
        # before its first byte), and how many heads were complete (a head that ends within some data counts there).
        self._in_head = True
        self._head_bytes = 0
        self._head_since: float | None = None
        self._heads = 0
        # Whether a body is being read (rather than a head): the rest of one the application answered without is
        # given `body_timeout_s`, then the connection is closed.
        self._in_body = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # A connection's first head is timed from its opening: one that sends nothing is closed then.
        self._head_since = self.loop.time()
        self._arm(self.limits.header_timeout_s, self._head_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_head:
            if self._head_since is None:
                self._head_since = self.loop.time()
            room = self.limits.max_header_bytes - self._head_bytes
            if len(data) > room:
                # Only what may still be head is parsed: past it, the head must have ended within it.
                heads = self._heads
                self._head_bytes += room
                self._parse(data[:room])
                if self._heads == heads:
                    if not self.transport.is_closing():
                        self._refuse_head()
                    return
                data = data[room:]
            else:
                self._head_bytes += len(data)
        # Bytes of a pipelined head that begins within this data count from the next data on.
        self._parse(data)
        held, self._held = self._held, None
        if held is not None and not self.transport.is_closing():
            # The rest of the body comes later: the exchange reads it as it arrives.
            super()._start_asgi_task(*held)
        self._time_what_is_incomplete()

    def _parse(self, data: bytes) -> None:
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head, self._in_body = False, True
        self._heads += 1
        self._disarm()
        self._holding = self.answer_now is not None and not self.expect_100_continue
        try:
            super().on_headers_complete()
        finally:
            self._holding = False

    def _time_what_is_incomplete(self) -> None:
        """After data was parsed: a head begun must end by its deadline; the rest of a body the application left
        unread (it answered without it) must arrive within `body_timeout_s`, however it trickles (a body it reads,
        it times itself)."""
        if self.transport.is_closing() or self._timer is not None:
            return
        if self._in_head and self._head_since is not None:
            delay = self._head_since + self.limits.header_timeout_s - self.loop.time()
            self._arm(max(0.0, delay), self._head_timed_out)
        elif self._in_body and self.cycle is not None and self.cycle.response_complete:
            self._arm(self.limits.body_timeout_s, self.transport.close)

    def _arm(self, delay: float, callback: Any) -> None:
        self._timer = self.loop.call_later(delay, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_timed_out(self) -> None:
        self._timer = None
        if self.transport.is_closing() or not self._in_head:
            return
        if self._head_bytes == 0:
            self.transport.close()  # nothing asked: nothing to answer
            return
        seconds = self.limits.header_timeout_s
        self._refuse(408, "REQUEST_TIMEOUT", f"The request's head did not arrive within {seconds:g} s.")

    def _refuse_head(self) -> None:
        limit = self.limits.max_header_bytes
        url = len(getattr(self, "url", b"") or b"")
        status, what = (414, "URL") if 2 * url > self._head_bytes else (431, "request line and headers")
        self._refuse(status, "REQUEST_HEAD_TOO_LARGE", f"The {what} take more than {limit} bytes.")

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answers and closes, unless an answer is still being sent (a pipelined request's): then just closes."""
        self._disarm()
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self.transport.write(refusal(status, code, message))
        count_rejection(code)
        self.transport.close()

    def on_message_complete(self) -> None:
        self._in_head, self._in_body = True, False
        self._head_bytes, self._head_since = 0, None
        self._disarm()
        if self.cycle is not None and self.cycle.response_complete:
            # Answered before its body ended: the idle timer uvicorn armed then was stopped by the body's data.
            self._head_since = self.loop.time()
            self._arm(self.limits.header_timeout_s, self._head_timed_out)
        super().on_message_complete()
        held, self._held = self._held, None
        if held is not None and not self._answered(held[0]):
            super()._start_asgi_task(*held)

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if self.timeout_keep_alive_task is not None:
            # An answer written while this data was parsed armed the idle timer; this request, in the same data,
            # is the connection's work now (uvicorn stops the timer only when data arrives).
            self._unset_keepalive_if_required()
        if self._holding and app is self.app:
            self._held = (cycle, app)
            return
        super()._start_asgi_task(cycle, app)

    def _answered(self, cycle: RequestResponseCycle) -> bool:
        if self.flow.write_paused or self.answer_now is None:
            return False  # the exchange waits for the client to read
        try:
            answered = self.answer_now(cycle.scope, bytes(cycle.body), functools.partial(self._write, cycle))
        except Exception as exc:
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            if not cycle.response_started:
                return False  # the exchange answers it, a 500 if it fails there too
            self.transport.close()
            return True
        if isinstance(answered, bool):
            return answered
        # It waits for its budget's charge: a task, as the exchange would be (graceful shutdown waits for it).
        task = self.loop.create_task(self._answer_later(cycle, answered))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)
        return True

    async def _answer_later(self, cycle: RequestResponseCycle, answering: Coroutine[Any, Any, None]) -> None:
        try:
            await answering
        except Exception as exc:
            # As uvicorn's exchange ends an application's failure.
            self.logger.error("Exception in ASGI application\n", exc_info=exc)
            if cycle.response_started:
                self.transport.close()
            else:
                await cycle.send_500_response()

    def _write(self, cycle: RequestResponseCycle, status: int, headers: list[Header], body: bytes) -> None:
        """What RequestResponseCycle.send writes for this response (`headers` lower-case and valid), in one write;
        then the exchange is complete."""
        cycle.response_started = True
        if cycle.disconnected:
            return
        scope = cycle.scope
        if self.access_log and self.access_logger.isEnabledFor(logging.INFO):
            client, path = get_client_addr(scope), get_path_with_query_string(scope)
            version = scope["http_version"]
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', client, scope["method"], path, version, status)
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content += (name, b": ", value, b"\r\n")
        for name, value in headers:
            content += (name, b": ", value, b"\r\n")
        if not cycle.keep_alive:
            content.append(CONNECTION_CLOSE)
        content.append(b"\r\n")
        # Head and body in one system call, without joining them.
        self.transport.writelines((b"".join(content), body))
        cycle.response_complete = True
        if not cycle.keep_alive:
            self.transport.close()
        cycle.on_response()
