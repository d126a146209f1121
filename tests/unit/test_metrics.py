"""Metrics go through prometheus_client: counters of the cache, rejections by reason, bounded labels."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from db.cache import metrics as cache_metrics
from db.cache.metrics import CacheMetrics
from telemetry import metrics


def _value(name: str, labels: dict[str, str]) -> float:
    for family in text_string_to_metric_families(metrics.generate_latest().decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    return 0.0


def test_cache_counters_count_locally_and_in_prometheus() -> None:
    before = _value("wovepaper_cache_events_total", {"cache": "aggregate", "event": "hit"})
    m = CacheMetrics()
    m.hits += 1
    m.hits += 2
    assert m.hits == 3 and m.misses == 0
    assert _value("wovepaper_cache_events_total", {"cache": "aggregate", "event": "hit"}) == before + 3


async def test_cache_counters_reach_prometheus_together_soon_or_when_metrics_are_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cache_metrics, "FOLD_AFTER_S", 0.05)
    hits = {"cache": "response", "event": "hit"}
    misses = {"cache": "response", "event": "miss"}
    before_hits, before_misses = (
        _value("wovepaper_cache_events_total", hits),
        _value("wovepaper_cache_events_total", misses),
    )
    m = CacheMetrics()
    for _ in range(5):
        m.response_hits += 1
    assert m.response_hits == 5
    assert _value("wovepaper_cache_events_total", hits) == before_hits  # counted here first
    await asyncio.sleep(0.2)
    assert _value("wovepaper_cache_events_total", hits) == before_hits + 5
    m.response_misses += 2
    m.fold()  # what reading /metrics in this process does
    assert _value("wovepaper_cache_events_total", misses) == before_misses + 2
    assert _value("wovepaper_cache_events_total", hits) == before_hits + 5


def test_rejections_are_counted_by_reason() -> None:
    before = _value("wovepaper_rejected_requests_total", {"reason": "RATE_LIMITED"})
    metrics.count_rejection("RATE_LIMITED")
    assert _value("wovepaper_rejected_requests_total", {"reason": "RATE_LIMITED"}) == before + 1


def test_operation_labels_are_bounded() -> None:
    metrics.set_operation_names(["ResearcherPage"])
    assert metrics.operation_label("ResearcherPage") == "ResearcherPage"
    assert metrics.operation_label("Anything_a_client_invents_123") == "other"
    assert metrics.operation_label(None) == "anonymous"


async def test_latencies_counted_here_read_as_if_each_was_observed_in_prometheus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics, "FOLD_AFTER_S", 0.05)
    registry = CollectorRegistry()
    direct = Histogram("direct_seconds", "", ["op"], buckets=metrics.LATENCY_BUCKETS, registry=registry)
    counted = Histogram("counted_seconds", "", ["op"], buckets=metrics.LATENCY_BUCKETS, registry=registry)
    latency = metrics.Latency(counted.labels("x"))
    # Each bound itself (a bucket's bounds are inclusive), either side of it, past the last one, and zero.
    values = [0.0, *metrics.LATENCY_BUCKETS, *(b * 0.999 for b in metrics.LATENCY_BUCKETS), 0.0001, 31.0, 400.0]

    def samples(name: str) -> list[tuple[str, dict[str, str], float]]:
        text = generate_latest(registry).decode()
        return [
            (s.name.removeprefix(name), s.labels, s.value)
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name.startswith(name) and not s.name.endswith("_created")
        ]

    for value in values:
        direct.labels("x").observe(value)
        latency.observe(value)
    assert all(s[2] == 0 for s in samples("counted_seconds"))  # counted here first
    await asyncio.sleep(0.2)
    assert samples("counted_seconds") == samples("direct_seconds")
    latency.observe(0.003)
    direct.labels("x").observe(0.003)
    metrics.fold_latencies()  # what reading /metrics in this process does
    assert samples("counted_seconds") == samples("direct_seconds")
    assert ("_count", {"op": "x"}, len(values) + 1.0) in samples("counted_seconds")


def _lag_buckets() -> dict[str, float]:
    return {
        sample.labels["le"]: sample.value
        for family in text_string_to_metric_families(metrics.generate_latest().decode())
        for sample in family.samples
        if sample.name == "wovepaper_event_loop_lag_seconds_bucket"
    }


async def test_a_stalled_event_loop_shows_in_the_lag_histogram_and_a_quiet_one_does_not() -> None:
    import time

    from telemetry import loop_lag

    before = _lag_buckets()
    watcher = asyncio.create_task(loop_lag.watch(interval_s=0.01))
    try:
        await asyncio.sleep(0.2)  # quiet: about 20 samples
        quiet = _lag_buckets()
        asyncio.get_running_loop().call_soon(time.sleep, 0.3)  # one synchronous step of 300 ms
        await asyncio.sleep(0.35)
        stalled = _lag_buckets()
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    samples = quiet["+Inf"] - before.get("+Inf", 0.0)
    assert samples >= 5
    # A quiet loop is late by well under 100 ms (a loaded test machine included).
    assert quiet["0.1"] - before.get("0.1", 0.0) >= samples - 1
    # The stall is one sample of at least 250 ms, and the lag is not counted twice.
    assert stalled["+Inf"] - stalled["0.25"] == quiet["+Inf"] - quiet["0.25"] + 1
