"""Metrics go through prometheus_client: counters of the cache, rejections by reason, bounded labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

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


def test_rejections_are_counted_by_reason() -> None:
    before = _value("wovepaper_rejected_requests_total", {"reason": "RATE_LIMITED"})
    metrics.count_rejection("RATE_LIMITED")
    assert _value("wovepaper_rejected_requests_total", {"reason": "RATE_LIMITED"}) == before + 1


def test_operation_labels_are_bounded() -> None:
    metrics.set_operation_names(["ResearcherPage"])
    assert metrics.operation_label("ResearcherPage") == "ResearcherPage"
    assert metrics.operation_label("Anything_a_client_invents_123") == "other"
    assert metrics.operation_label(None) == "anonymous"
