"""Per-process cache counters, exported at /metrics in the Prometheus text format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields


@dataclass(slots=True)
class CacheMetrics:
    hits: int = 0
    misses: int = 0
    errors: int = 0  # Redis calls that failed or timed out
    short_circuits: int = 0  # Redis calls skipped because the breaker was open
    fallbacks: int = 0  # answers computed from PostgreSQL because Redis was unavailable
    singleflight_joins: int = 0  # misses that waited for a computation already in flight
    stale_stores_skipped: int = 0  # results not stored because an invalidation ran meanwhile
    invalidation_failures: int = 0
    response_hits: int = 0
    response_misses: int = 0
    response_stores: int = 0


_HELP = {
    "hits": "Aggregate cache reads answered from Redis.",
    "misses": "Aggregate cache reads computed in PostgreSQL and stored.",
    "errors": "Redis calls that failed or timed out.",
    "short_circuits": "Redis calls skipped because the circuit breaker was open.",
    "fallbacks": "Aggregates answered from PostgreSQL because Redis was unavailable.",
    "singleflight_joins": "Cache misses that waited for the same computation already in flight.",
    "stale_stores_skipped": "Computed values not stored because an invalidation happened meanwhile.",
    "invalidation_failures": "Invalidations that could not reach Redis (retried on the next one).",
    "response_hits": "Whole-response cache hits (GraphQL execution skipped).",
    "response_misses": "Whole-response cache misses for cacheable operations.",
    "response_stores": "Whole responses stored.",
}


def render(metrics: CacheMetrics, *, breaker_state: int, breaker_opens: int, redis_configured: bool) -> str:
    """The Prometheus text exposition format (version 0.0.4)."""
    out: list[str] = []

    def emit(name: str, kind: str, help_text: str, value: int) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.append(f"{name} {value}")

    for f in fields(metrics):
        emit(f"wovepaper_cache_{f.name}_total", "counter", _HELP[f.name], getattr(metrics, f.name))
    emit(
        "wovepaper_cache_breaker_state",
        "gauge",
        "Redis circuit breaker: 0 closed, 1 open, 2 half-open.",
        breaker_state,
    )
    emit("wovepaper_cache_breaker_opens_total", "counter", "Times the Redis circuit breaker opened.", breaker_opens)
    emit("wovepaper_cache_redis_configured", "gauge", "1 when REDIS_URL is set.", int(redis_configured))
    return "\n".join(out) + "\n"


MetricsSource = Callable[[], str]
