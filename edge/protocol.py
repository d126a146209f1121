"""uvicorn's HTTP/1.1 protocol (httptools) with the edge's answers from memory given as soon as a request is parsed.

A request whose headers and body arrive together is offered to the application's `answer_now` (edge/front.py)
before uvicorn starts its ASGI exchange (a task, the scope's messages, Starlette, the response's checks and two
writes): an anonymous request the response cache remembers is answered with one write of the same bytes the
exchange would send, there when its budget can be charged at once, else by a task of its own once the charge has
gone to Redis. Anything else, including a request whose body is still on its way, takes the exchange as usual.
Used by `wovepaper serve`, or `uvicorn --http edge.protocol:EdgeHttpProtocol --no-proxy-headers`; `answer_now` is
looked up on the application uvicorn serves, so a server that wraps it in anything of its own (proxy headers,
message logging) leaves every request to the exchange.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Coroutine
from typing import Any

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from edge.front import Header

CONNECTION_CLOSE = b"connection: close\r\n"


class EdgeHttpProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.answer_now = getattr(self.app, "answer_now", None)
        # While uvicorn parses a request's headers: whether its exchange may wait for the body.
        self._holding = False
        # The exchange of a request held until its body is complete: started then, unless answered.
        self._held: tuple[RequestResponseCycle, ASGI3Application] | None = None

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        held, self._held = self._held, None
        if held is not None and not self.transport.is_closing():
            # The rest of the body comes later: the exchange reads it as it arrives.
            super()._start_asgi_task(*held)

    def on_headers_complete(self) -> None:
        self._holding = self.answer_now is not None and not self.expect_100_continue
        try:
            super().on_headers_complete()
        finally:
            self._holding = False

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        if self.timeout_keep_alive_task is not None:
            # An answer written while this data was parsed armed the idle timer; this request, in the same data,
            # is the connection's work now (uvicorn stops the timer only when data arrives).
            self._unset_keepalive_if_required()
        if self._holding and app is self.app:
            self._held = (cycle, app)
            return
        super()._start_asgi_task(cycle, app)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        held, self._held = self._held, None
        if held is not None and not self._answered(held[0]):
            super()._start_asgi_task(*held)

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
