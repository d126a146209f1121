"""Per request: an id (the caller's `X-Request-Id` when it is sane, else a new one) echoed in the response,
one JSON log line, and the latency and SQL metrics.

The GraphQL layer writes what it learned into the request's state (`operation`, `statements`, `sql_seconds`,
`error_codes`, cache counts); the edge (edge/front.py) takes the id when a request arrives and reports it all
once the response has been sent.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from typing import Any, Final

from starlette.types import Scope

from telemetry import logs
from telemetry.metrics import SQL_SECONDS, SQL_STATEMENTS, count_error_codes, operation_label, request_seconds

LOGGER: Final = "wovepaper.request"
log = logging.getLogger(LOGGER)

# Ids from upstream proxies and clients are kept when they look like ids (no spaces, quotes or control bytes).
_SANE_ID: Final = re.compile(rb"^[A-Za-z0-9._:-]{1,64}$")
ROUTES: Final = frozenset({"/graphql", "/healthz", "/readyz", "/metrics", "/rss/latest.xml"})
QUIET: Final = frozenset({"/healthz", "/readyz", "/metrics"})


# A random prefix per process and a counter: unique across workers and restarts, and no syscall per request.
_ID_PREFIX: Final = os.urandom(4).hex()
_id_counter = itertools.count(1)


def new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_id_counter) & 0xFFFFFFFF:08x}"


def request_id(given: bytes | None) -> str:
    """The caller's id (its `X-Request-Id`) when it looks like one, else a new one."""
    return given.decode() if given is not None and _SANE_ID.match(given) else new_request_id()


def report(scope: Scope, state: dict[str, Any], request_id: str, status: int, cache: str, seconds: float) -> None:
    """The request's metrics and its log line (none for probes and scrapes that succeeded)."""
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
    codes = state.get("error_codes")
    if codes:
        count_error_codes(codes)
    if path in QUIET and status < 500:
        return  # probes and scrapes every few seconds would drown the log
    identity = state.get("identity")
    method = scope.get("method", "")
    redis = state.get("redis_allowance")
    logs.emit(
        log,
        {
            "time": time.time(),
            "level": "info",
            "logger": LOGGER,
            "message": f"{method} {path} {status}",
            "request_id": request_id,
            "method": method,
            "path": path,
            "operation": name,
            "status": status,
            "duration_ms": _milliseconds(seconds),
            "statements": statements,
            "sql_ms": _milliseconds(sql_seconds),
            "response_cache": cache or None,
            "cache_hits": state.get("cache_hits", 0),
            "cache_misses": state.get("cache_misses", 0),
            "cache_fallbacks": state.get("cache_fallbacks", 0),
            # Redis waits of this request that ran out of time (at most one), and Redis uses skipped after a failure.
            "redis_timeouts": getattr(redis, "timeouts", 0),
            "redis_skipped": getattr(redis, "skipped", 0),
            "error_codes": state.get("error_codes") or None,
            # With replicas configured: the server the request read from (`primary` or a replica's host:port/db).
            "db": state.get("db_target"),
            "client": getattr(identity, "client_ip", None),
        },
    )


def _milliseconds(seconds: float) -> float:
    """Milliseconds to two decimals: `round(seconds * 1000, 2)` but for ties, without its exact decimal rounding."""
    return round(seconds * 100_000) / 100
