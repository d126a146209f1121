"""Per request: an id (the caller's `X-Request-Id` when it is sane, else a new one) echoed in the response,
one JSON log line, and the latency and SQL metrics.

The request's typed state (request_types/state.py) gathers what the steps learned: the operation and its errors'
codes (GraphQL), its SQL and cache figures (db/), the server it read from; the edge (edge/front.py) takes the id when
a request arrives and reports it all once the response has been sent.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import time
from typing import Final

from starlette.types import Scope

from request_types.state import RequestState
from request_types.stats import RequestStats
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


def report(scope: Scope, state: RequestState, status: int, cache: str, seconds: float) -> None:
    """The request's metrics and its log line (none for probes and scrapes that succeeded)."""
    path = scope.get("path", "")
    name = state.operation
    if path == "/graphql":
        label = operation_label(name)
    else:
        label = f"route:{path}" if path in ROUTES else "route:other"
    stats = state.stats or _NO_STATS
    statements = stats.statements
    sql_seconds = stats.sql_seconds
    request_seconds(label, status).observe(seconds)
    if statements:
        SQL_STATEMENTS.labels(label).inc(statements)
        SQL_SECONDS.labels(label).inc(sql_seconds)
    codes = state.error_codes
    if codes:
        count_error_codes(codes)
    if path in QUIET and status < 500:
        return  # probes and scrapes every few seconds would drown the log
    identity = state.identity
    method = scope.get("method", "")
    redis = state.redis
    logs.emit(
        log,
        {
            "time": time.time(),
            "level": "info",
            "logger": LOGGER,
            "message": f"{method} {path} {status}",
            "request_id": state.request_id,
            "method": method,
            "path": path,
            "operation": name,
            "status": status,
            "duration_ms": _milliseconds(seconds),
            "statements": statements,
            "sql_ms": _milliseconds(sql_seconds),
            "response_cache": cache or None,
            "cache_hits": stats.cache_hits,
            "cache_misses": stats.cache_misses,
            "cache_fallbacks": stats.cache_fallbacks,
            # Redis waits of this request that ran out of time (at most one), and Redis uses skipped after a failure.
            "redis_timeouts": redis.timeouts if redis is not None else 0,
            "redis_skipped": redis.skipped if redis is not None else 0,
            "error_codes": codes or None,
            # With replicas configured: the server the request read from (`primary` or a replica's host:port/db).
            "db": state.db_target,
            "client": identity.client_ip if identity is not None else None,
        },
    )


# The figures of a request that ran no operation.
_NO_STATS: Final = RequestStats()


def _milliseconds(seconds: float) -> float:
    """Milliseconds to two decimals: `round(seconds * 1000, 2)` but for ties, without its exact decimal rounding."""
    return round(seconds * 100_000) / 100
