"""The cache's counters: this process's own counts (what tests and the store read) and, with every change, the
Prometheus counter they belong to (`telemetry.metrics`, summed over workers at /metrics)."""

from __future__ import annotations

from typing import Final

from telemetry.metrics import count_cache_event

# field -> (cache, event) labels of wovepaper_cache_events_total
EVENTS: Final = {
    "hits": ("aggregate", "hit"),
    "misses": ("aggregate", "miss"),
    "fallbacks": ("aggregate", "fallback"),  # answered from PostgreSQL because Redis was unavailable
    "singleflight_joins": ("aggregate", "singleflight_join"),  # waited for the same computation in flight
    "stale_stores_skipped": ("aggregate", "stale_store_skipped"),  # an invalidation ran meanwhile
    "response_hits": ("response", "hit"),
    "response_near_hits": ("response", "near_hit"),  # of the hits, those answered from memory (no Redis call)
    "response_misses": ("response", "miss"),
    "response_stores": ("response", "store"),
    "calls": ("redis", "call"),  # round trips to Redis (an MGET batch, a pipeline, a script)
    "errors": ("redis", "error"),  # calls that failed or timed out
    "short_circuits": ("redis", "short_circuit"),  # calls skipped: breaker open
    "saturated": ("redis", "saturated"),  # calls skipped: this process already had its share in flight
    "invalidation_failures": ("redis", "invalidation_deferred"),
}


class _Count:
    """An int attribute whose increments also go to the Prometheus counter of its field."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.labels = EVENTS[name]

    def __get__(self, obj: CacheMetrics | None, objtype: type | None = None) -> int:
        assert obj is not None
        return obj._counts.get(self.name, 0)

    def __set__(self, obj: CacheMetrics, value: int) -> None:
        delta = value - obj._counts.get(self.name, 0)
        obj._counts[self.name] = value
        if delta > 0:
            count_cache_event(*self.labels, delta)


class CacheMetrics:
    hits = _Count()
    misses = _Count()
    fallbacks = _Count()
    singleflight_joins = _Count()
    stale_stores_skipped = _Count()
    response_hits = _Count()
    response_near_hits = _Count()
    response_misses = _Count()
    response_stores = _Count()
    calls = _Count()
    errors = _Count()
    short_circuits = _Count()
    saturated = _Count()
    invalidation_failures = _Count()

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
