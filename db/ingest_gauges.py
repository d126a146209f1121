"""Ingest progress as Prometheus gauges, read from the database when /metrics is scraped (at most every
REFRESH_S seconds): the ingest runs as its own command, so the database is where its progress is."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Final

import asyncpg
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from db.pool import PoolExhausted
from db.queries.ingest_progress import IngestProgress, fetch_ingest_progress

log = logging.getLogger(__name__)

REFRESH_S: Final = 30.0
READ_TIMEOUT_S: Final = 1.0


class IngestProgressCollector(Collector):
    def __init__(self) -> None:
        self._progress: IngestProgress | None = None
        self._read_at = -REFRESH_S

    async def refresh(self, pool: asyncpg.Pool) -> None:
        """Read the progress again when the last read is older than REFRESH_S; never raises."""
        if time.monotonic() - self._read_at < REFRESH_S:
            return
        self._read_at = time.monotonic()
        try:
            async with pool.acquire(timeout=READ_TIMEOUT_S) as conn:
                self._progress = await fetch_ingest_progress(conn)
        except (PoolExhausted, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError, OSError) as exc:
            # Metrics must answer while the database is down; the gauges keep their last values.
            log.warning("ingest progress not read: %s: %s", type(exc).__name__, exc)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        progress = self._progress
        if progress is None:
            return
        pages = GaugeMetricFamily("wovepaper_ingest_pages", "Pages written by the source's harvest.", labels=["source"])
        success = GaugeMetricFamily(
            "wovepaper_ingest_last_success_timestamp_seconds",
            "When the source's ingest last committed (Unix time).",
            labels=["source"],
        )
        lag = GaugeMetricFamily(
            "wovepaper_ingest_lag_seconds",
            "How far the source's harvest is behind now: seconds since the date it has harvested through.",
            labels=["source"],
        )
        running = GaugeMetricFamily(
            "wovepaper_ingest_running", "1 while a harvest of the source is under way.", labels=["source"]
        )
        now = datetime.now(UTC)
        for c in progress.checkpoints:
            pages.add_metric([c.source], c.pages)
            success.add_metric([c.source], c.updated_at.timestamp())
            running.add_metric([c.source], int(c.running))
            through = _date(c.through)
            if through is not None:
                midnight = datetime(through.year, through.month, through.day, tzinfo=UTC)
                lag.add_metric([c.source], max(0.0, (now - midnight).total_seconds()))
        records = GaugeMetricFamily(
            "wovepaper_ingest_records", "Rows stored, by table (planner estimate).", labels=["kind"]
        )
        for kind, n in sorted(progress.rows.items()):
            records.add_metric([kind], n)
        queue = GaugeMetricFamily(
            "wovepaper_ingest_enrich_queue", "Papers waiting for enrichment (counted up to 100,000)."
        )
        queue.add_metric([], progress.enrich_queue)
        yield from (pages, success, lag, running, records, queue)
        if progress.corrections is not None:
            pending = GaugeMetricFamily(
                "wovepaper_corrections_pending", "Readers' corrections waiting for an operator."
            )
            pending.add_metric([], progress.corrections.pending)
            conflicts = GaugeMetricFamily(
                "wovepaper_correction_conflicts",
                "Ingest writes the applied corrections were kept from being undone by, in all.",
            )
            conflicts.add_metric([], progress.corrections.conflicts)
            yield from (pending, conflicts)


def _date(text: str | None) -> date | None:
    if not text:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None
