"""Per request: an id (the caller's `X-Request-Id` when it is sane, else a new one) echoed in the response,
one JSON log line, and the latency and SQL metrics.

The GraphQL layer writes what it learned into the request's state (`operation`, `statements`, `sql_seconds`,
`error_codes`, cache counts); this outermost layer reports it once the response has been sent.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from typing import Any, Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from telemetry.metrics import SQL_SECONDS, SQL_STATEMENTS, operation_label, request_seconds

log = logging.getLogger("wovepaper.request")

# Ids from upstream proxies and clients are kept when they look like ids (no spaces, quotes or control bytes).
_SANE_ID: Final = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")
ROUTES: Final = frozenset({"/graphql", "/healthz", "/readyz", "/metrics", "/rss/latest.xml"})


# A random prefix per process and a counter: unique across workers and restarts, and no syscall per request.
_ID_PREFIX: Final = os.urandom(4).hex()
_id_counter = itertools.count(1)


def new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_id_counter) & 0xFFFFFFFF:08x}"


class RequestTelemetry:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)
        request_id = incoming.decode() if incoming is not None and _SANE_ID.match(incoming) else new_request_id()
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        started = time.perf_counter()
        status = 500
        cache = ""

        async def send_with_id(message: Message) -> None:
            nonlocal status, cache
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                cache = next((v.decode() for k, v in headers if k == b"x-cache"), "")
                headers.append((b"x-request-id", request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._report(scope, state, request_id, status, cache, time.perf_counter() - started)

    def _report(
        self, scope: Scope, state: dict[str, Any], request_id: str, status: int, cache: str, seconds: float
    ) -> None:
        path = scope.get("path", "")
        name = state.get("operation")
        if path == "/graphql":
            label = operation_label(name)
        else:
            label = f"route:{path}" if path in ROUTES else "route:other"
        statements = int(state.get("statements", 0))
        sql_seconds = float(state.get("sql_seconds", 0.0))
        request_seconds(label, status).observe(seconds)
        if statements:
            SQL_STATEMENTS.labels(label).inc(statements)
            SQL_SECONDS.labels(label).inc(sql_seconds)
        if path in ("/healthz", "/readyz", "/metrics") and status < 500:
            return  # probes and scrapes every few seconds would drown the log
        identity = state.get("identity")
        log.info(
            "%s %s %s",
            scope.get("method", ""),
            path,
            status,
            extra={
                "request_id": request_id,
                "method": scope.get("method", ""),
                "path": path,
                "operation": name,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "statements": statements,
                "sql_ms": round(sql_seconds * 1000, 2),
                "response_cache": cache or None,
                "cache_hits": state.get("cache_hits", 0),
                "cache_misses": state.get("cache_misses", 0),
                "cache_fallbacks": state.get("cache_fallbacks", 0),
                "error_codes": state.get("error_codes") or None,
                "client": getattr(identity, "client_ip", None),
            },
        )
