"""The cache's counters: this process's own counts (what tests and the store read) and the Prometheus counters
they belong to (`telemetry.metrics`, summed over workers at /metrics), which get what was counted at most
FOLD_AFTER_S later, or at once when this process answers /metrics (`fold()`): a Prometheus increment takes a lock,
a share of a request answered from memory, and several counts of a second take one."""

from __future__ import annotations

import asyncio
from typing import Final

from telemetry.metrics import FOLD_AFTER_S, count_cache_event

# field -> (cache, event) labels of wovepaper_cache_events_total
EVENTS: Final = {
    "hits": ("aggregate", "hit"),
    "misses": ("aggregate", "miss"),
    "fallbacks": ("aggregate", "fallback"),  # answered from PostgreSQL because Redis was unavailable
    "singleflight_joins": ("aggregate", "singleflight_join"),  # waited for the same computation in flight
    "stale_stores_skipped": ("aggregate", "stale_store_skipped"),  # an invalidation ran meanwhile
    # read from a replica that had not replayed a later invalidation of it: served, not stored
    "lagging_stores_skipped": ("aggregate", "lagging_store_skipped"),
    # a value one of its tag sets no longer lists (Redis evicted the set): recomputed, not answered
    "unlisted_skipped": ("aggregate", "unlisted_skipped"),
    "response_hits": ("response", "hit"),
    "response_near_hits": ("response", "near_hit"),  # of the hits, those answered from memory (no Redis call)
    "response_misses": ("response", "miss"),
    "response_stores": ("response", "store"),
    "response_lagging_skipped": ("response", "lagging_store_skipped"),
    "response_unlisted_skipped": ("response", "unlisted_skipped"),
    "calls": ("redis", "call"),  # round trips to Redis (an MGET batch, a pipeline, a script)
    "errors": ("redis", "error"),  # calls that failed or timed out
    "short_circuits": ("redis", "short_circuit"),  # calls skipped: breaker open
    "saturated": ("redis", "saturated"),  # calls skipped: this process already had its share in flight
    "invalidation_failures": ("redis", "invalidation_deferred"),
}


class _Count:
    """An int attribute whose increments reach the Prometheus counter of its field at the next fold."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.labels = EVENTS[name]

    def __get__(self, obj: CacheMetrics | None, objtype: type | None = None) -> int:
        assert obj is not None
        return obj._counts.get(self.name, 0)

    def __set__(self, obj: CacheMetrics, value: int) -> None:
        obj._counts[self.name] = value
        if not obj._fold_due:
            obj._fold_soon()


class CacheMetrics:
    hits = _Count()
    misses = _Count()
    fallbacks = _Count()
    singleflight_joins = _Count()
    stale_stores_skipped = _Count()
    lagging_stores_skipped = _Count()
    unlisted_skipped = _Count()
    response_hits = _Count()
    response_near_hits = _Count()
    response_misses = _Count()
    response_stores = _Count()
    response_lagging_skipped = _Count()
    response_unlisted_skipped = _Count()
    calls = _Count()
    errors = _Count()
    short_circuits = _Count()
    saturated = _Count()
    invalidation_failures = _Count()

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._exported: dict[str, int] = {}
        self._fold_due = False

    def fold(self) -> None:
        """Adds what was counted since the last fold to the Prometheus counters."""
        self._fold_due = False
        for name, value in self._counts.items():
            delta = value - self._exported.get(name, 0)
            if delta:
                if delta > 0:
                    count_cache_event(*EVENTS[name], delta)
                self._exported[name] = value

    def _fold_soon(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.fold()  # no loop to wait on
            return
        self._fold_due = True
        loop.call_later(FOLD_AFTER_S, self.fold)
