"""deploy/prometheus/alerts.yaml: every expression parses as PromQL, every alert says what to do (a section of
docs/operations.md), and every metric an expression names is one the API exports at /metrics."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.inprocess import served

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
# Prometheus's own series, not the API's.
PROMETHEUS_OWN = {"up"}
# The names a family of each type gives its samples (prometheus_client's text format).
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
    "unknown": ("",),
}


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def selectors(expr: str) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: object) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a document's headings."""
    out = set()
    for heading in re.findall(r"^#+\s+(.+)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_every_alert_parses_and_says_what_to_do() -> None:
    documented = anchors(OPERATIONS.read_text())
    names = set()
    for rule in rules():
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule
        assert rule["alert"] not in names, rule["alert"]
        names.add(rule["alert"])
        assert selectors(rule["expr"]), rule["alert"]
        assert rule["labels"]["severity"] in ("page", "warning", "info")
        assert rule["annotations"]["summary"]
        runbook = rule["annotations"]["runbook_url"]
        assert runbook.startswith("docs/operations.md#") and runbook.split("#")[1] in documented, runbook
        if "for" in rule:
            assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["for"]
    # What the issue asked to be alerted on, each at least once.
    text = ALERTS.read_text()
    for metric in (
        "wovepaper_request_errors_total",
        "wovepaper_request_duration_seconds_bucket",
        "wovepaper_db_pool_waiters",
        "wovepaper_cache_breaker_state",
        "wovepaper_db_replica_lag_seconds",
        "wovepaper_ingest_lag_seconds",
        "wovepaper_ingest_last_success_timestamp_seconds",
    ):
        assert metric in text


def exported(exposition: str) -> tuple[set[str], dict[str, set[str]]]:
    """Every sample name the exposition's families can have, and the label names each sample name was seen with."""
    names: set[str] = set()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(exposition):
        names |= {family.name + suffix for suffix in SUFFIXES[family.type]}
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return names, labels


PARSE_FAILED = ("wovepaper_request_errors_total", {"code": "GRAPHQL_PARSE_FAILED"})


def _sample(scrape: Any, wanted: tuple[str, dict[str, str]]) -> float:
    """A sample's value in a scrape (0 when absent: a counter not yet incremented)."""
    name, sample_labels = wanted
    for family in text_string_to_metric_families(scrape.text):
        for sample in family.samples:
            if sample.name == name and sample.labels == sample_labels:
                return float(sample.value)
    return 0.0


async def test_every_metric_the_alerts_name_is_exported_by_metrics(database_url: str, redis_url: str) -> None:
    async with served(database_url, redis_url) as (client, _):
        # A request that answers data, and one that answers an error with its code (the counters are the process's:
        # other tests in it may have counted before).
        parse_failures = _sample(await client.get("/metrics"), PARSE_FAILED)
        assert (await client.post("/graphql", json={"query": "{ __typename }"})).status_code == 200
        await client.post("/graphql", json={"query": "{ papers(first: "})
        scrape = await client.get("/metrics")
    assert scrape.status_code == 200
    names, labels = exported(scrape.text)
    assert _sample(scrape, PARSE_FAILED) == parse_failures + 1
    named = {s.name for rule in rules() for s in selectors(rule["expr"])}
    missing = named - names - PROMETHEUS_OWN
    assert not missing, f"the alerts name metrics /metrics does not export: {sorted(missing)}"
    # The labels an expression matches on are the metric's (where the scrape has samples to show them).
    for rule in rules():
        for selector in selectors(rule["expr"]):
            if selector.name in labels:
                used = {m.name for m in selector.matchers.matchers} - {"__name__"}
                assert used <= labels[selector.name], (rule["alert"], selector.name, used)
