"""Every Prometheus metric the API exports, in one place (prometheus_client).

With `PROMETHEUS_MULTIPROC_DIR` set before this module is imported (`wovepaper serve --workers N` sets it),
each worker writes its values to files there and `/metrics`, whichever worker answers it, reports one set
summed over the live workers. Without it, values live in this process only.

Label values are bounded: operation names come from `operation_label` (the site's operations by name, the rest
"other"), reasons and outcomes are fixed words.
"""

from __future__ import annotations

import asyncio
import functools
import os
from bisect import bisect_left
from collections.abc import Iterable
from typing import Final

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import generate_latest as _generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from error_codes import ERROR_CODES

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE: Final = CONTENT_TYPE_LATEST

# Latency buckets from a cached page (milliseconds) to the operation timeout (10 s).
LATENCY_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

REQUEST_SECONDS = Histogram(
    "wovepaper_request_duration_seconds",
    "Time to answer an HTTP request, by GraphQL operation (or route) and HTTP status.",
    ["operation", "status"],
    buckets=LATENCY_BUCKETS,
)
REQUEST_ERRORS = Counter(
    "wovepaper_request_errors_total",
    "Requests answered with a GraphQL error, by its code (error_codes/); each code once per request.",
    ["code"],
)
SQL_STATEMENTS = Counter(
    "wovepaper_sql_statements_total", "SQL statements run while answering requests, by operation.", ["operation"]
)
SQL_SECONDS = Counter(
    "wovepaper_sql_seconds_total", "Time PostgreSQL spent on those statements, by operation.", ["operation"]
)
CACHE_EVENTS = Counter(
    "wovepaper_cache_events_total",
    "Cache outcomes: cache=aggregate|response|redis, event=hit|miss|fallback|store|error|short_circuit|...",
    ["cache", "event"],
)
REJECTIONS = Counter(
    "wovepaper_rejected_requests_total",
    "Requests refused or cut short, by reason (OVERLOADED, TIMEOUT, SERVICE_UNAVAILABLE, rate limits, ...).",
    ["reason"],
)
BREAKER_STATE = Gauge(
    "wovepaper_cache_breaker_state",
    "Redis circuit breaker, the worst over the workers: 0 closed, 1 open, 2 half-open.",
    multiprocess_mode="livemax",
)
BREAKER_OPENS = Counter("wovepaper_cache_breaker_opens_total", "Times the Redis circuit breaker opened.")
REDIS_CONFIGURED = Gauge("wovepaper_cache_redis_configured", "1 when REDIS_URL is set.", multiprocess_mode="livemax")
POOL_CONNECTIONS = Gauge(
    "wovepaper_db_pool_connections",
    "PostgreSQL connections of the API's pools: state=open|in_use|max.",
    ["state"],
    multiprocess_mode="livesum",
)
POOL_WAITERS = Gauge(
    "wovepaper_db_pool_waiters", "Callers waiting for a PostgreSQL connection.", multiprocess_mode="livesum"
)
CHAT_ANSWERS = Counter(
    "wovepaper_chat_answers_total",
    "Chat questions by outcome: answered, nothing_found (no paper matched; the model is not asked), "
    "model_unavailable, cancelled (the reader hung up).",
    ["outcome"],
)
MODEL_TOKENS = Counter(
    "wovepaper_chat_model_tokens_total", "Language-model tokens chat answers cost, kind=prompt|completion.", ["kind"]
)
REPLICA_LAG = Gauge(
    "wovepaper_db_replica_lag_seconds",
    "How far each replica is behind the primary, in seconds (the worst over the workers; +Inf until it is known).",
    ["replica"],
    multiprocess_mode="livemax",
)
REPLICA_USABLE = Gauge(
    "wovepaper_db_replica_usable",
    "1 while a replica is in the rotation, 0 while it is out (unreachable, lagging, not in recovery), by any worker.",
    ["replica"],
    multiprocess_mode="livemin",
)
DB_READS = Counter(
    "wovepaper_db_reads_total",
    "Requests that read (queries, feeds), by the server they read from: target=primary or a replica's label.",
    ["target"],
)
REPLICA_FALLBACKS = Counter(
    "wovepaper_db_replica_fallbacks_total",
    "Reads sent to the primary although replicas are configured, by reason: read_your_writes (no replica has the "
    "reader's own latest write yet), lagging (every replica is too far behind), unavailable (none answers as a "
    "replica).",
    ["reason"],
)
DB_RETRIES = Counter(
    "wovepaper_db_lost_connection_retries_total", "Read operations run again after a lost PostgreSQL connection."
)
# From a millisecond (a quiet loop) to seconds (a stalled one).
LOOP_LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
EVENT_LOOP_LAG = Histogram(
    "wovepaper_event_loop_lag_seconds",
    "How late a worker's event loop ran a timer it was due to run (telemetry/loop_lag.py): the time a request that "
    "is ready to go on waits for the work ahead of it in the same process.",
    buckets=LOOP_LAG_BUCKETS,
)
SITE_STRAINED = Counter(
    "wovepaper_site_strained_marks_total",
    "Times this process marked the site strained for the ingest, which then waits before its next write "
    "(db/cache/strain.py): its event loop ran 100 ms late or requests waited for a database connection; at most four "
    "a second.",
)

_operation_names: frozenset[str] = frozenset()


def count_rejection(reason: str) -> None:
    """One request refused or cut short for `reason` (a fixed, upper-case word such as "RATE_LIMITED")."""
    REJECTIONS.labels(reason).inc()


def count_error_codes(codes: Iterable[str]) -> None:
    """A request's error codes, each once; a code not in error_codes/ (none should be) counts as `other`, so that
    the label values stay the documented few."""
    for code in codes:
        _request_errors(code if code in ERROR_CODES else "other").inc()


@functools.cache
def _request_errors(code: str) -> Counter:
    return REQUEST_ERRORS.labels(code)


def count_cache_event(cache: str, event: str, amount: int = 1) -> None:
    _cache_events(cache, event).inc(amount)


# Label values are bounded (see above), so their children are looked up once: `labels()` takes a lock and builds
# a key on every call, a noticeable share of a request answered from memory.
@functools.cache
def _cache_events(cache: str, event: str) -> Counter:
    return CACHE_EVENTS.labels(cache, event)


# Counts kept in this process reach Prometheus together, at most this long later or when this process answers
# /metrics.
FOLD_AFTER_S: Final = 1.0


class Latency:
    """One operation's (or route's) and status's latency histogram, counted here and added to the Prometheus
    histogram at the next fold (`fold_latencies`): `observe()` there takes two locks (the sum's and a bucket's),
    9,000 instructions against 3,600 here, which a second's observations pay once. What a scrape reads is the same as
    if each request had been observed there."""

    __slots__ = ("_child", "_counts", "_sum", "_clean")

    def __init__(self, child: Histogram) -> None:
        self._child = child
        self._counts = [0] * (len(LATENCY_BUCKETS) + 1)  # the last one: +Inf
        self._sum = 0.0
        self._clean = True

    def observe(self, seconds: float) -> None:
        # Prometheus's buckets are upper bounds, inclusive: the first bound at or above the value.
        self._counts[bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self._sum += seconds
        if self._clean:
            self._clean = False
            _unfolded.append(self)
            if len(_unfolded) == 1:
                _fold_soon()

    def _fold(self) -> None:
        # prometheus_client has no bulk observe: its child's values take the counts (docs/architecture/upgrading.md).
        child = self._child
        child._sum.inc(self._sum)
        for bucket, count in zip(child._buckets, self._counts, strict=True):
            if count:
                bucket.inc(count)
        self._counts = [0] * len(self._counts)
        self._sum = 0.0
        self._clean = True


_unfolded: list[Latency] = []


def fold_latencies() -> None:
    """Adds the latencies observed since the last fold to the Prometheus histogram."""
    while _unfolded:
        _unfolded.pop()._fold()


def _fold_soon() -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        fold_latencies()  # no loop to wait on
        return
    loop.call_later(FOLD_AFTER_S, fold_latencies)


@functools.cache
def request_seconds(operation: str, status: int) -> Latency:
    """The latency histogram of one operation (or route) label and HTTP status."""
    return Latency(REQUEST_SECONDS.labels(operation, str(status)))


def set_operation_names(names: Iterable[str]) -> None:
    """The operation names reported as they are (the site's); any other name is reported as "other"."""
    global _operation_names
    _operation_names = frozenset(names)


def operation_label(name: str | None) -> str:
    if not name:
        return "anonymous"
    return name if name in _operation_names else "other"


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def generate_latest(extra: Iterable[Collector] = ()) -> bytes:
    """The exposition text: every worker's values when in multiprocess mode, plus `extra` collectors
    (computed now, in this process)."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    else:
        registry = CollectorRegistry()
        registry.register(_Forward(REGISTRY))
    for collector in extra:
        registry.register(collector)
    return _generate_latest(registry)


def mark_process_dead(pid: int) -> None:
    """Drop a finished worker's live gauges (its counters stay counted)."""
    directory = multiprocess_dir()
    if directory:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


class _Forward(Collector):
    """The default registry's metrics, so a per-scrape registry can add collectors of its own."""

    def __init__(self, source: CollectorRegistry) -> None:
        self._source = source

    def collect(self) -> Iterable[object]:  # type: ignore[override]
        return self._source.collect()
