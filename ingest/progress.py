"""Run reporting: a rich progress bar on a terminal, plain log lines otherwise, and a summary."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from db.queries.ingest_state import EnrichFailure, IngestStatus
from db.queries.matching import UnlinkedPosition

log = logging.getLogger("ingest")


@dataclass(slots=True)
class Summary:
    seen: int = 0
    inserted: int = 0
    updated: int = 0
    skipped: int = 0
    failed: int = 0
    requests: int = 0
    retries: int = 0
    tokens: int = 0  # language-model tokens spent (the analysis stage)
    yielded_s: float = 0.0  # time spent waiting for a strained site (ingest/pacing.py)
    stopped: str | None = None  # why the run stopped early (budget spent, upstream down), if it did

    def add(self, other: Summary) -> None:
        for f in fields(self):
            if f.name != "stopped":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        self.stopped = self.stopped or other.stopped

    def line(self, what: str) -> str:
        text = (
            f"{what}: seen {self.seen}, inserted {self.inserted}, updated {self.updated}, "
            f"skipped {self.skipped}, failed {self.failed}, requests {self.requests}, retries {self.retries}"
        )
        if self.tokens:
            text += f", tokens {self.tokens}"
        if self.yielded_s:
            text += f", waited {self.yielded_s:.1f} s for a strained site"
        return text + (f"; stopped early: {self.stopped}" if self.stopped else "")


class RunProgress:
    """Counts and rate while a run goes; a bar when `stream` is a terminal, log lines when not."""

    def __init__(self, what: str, total: int | None = None, stream: TextIO | None = None) -> None:
        self.what = what
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._bar: Progress | None = None
        self._task: TaskID | None = None
        self._start = time.monotonic()

    def __enter__(self) -> RunProgress:
        if self.tty:
            self._bar = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[counts]}"),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=Console(file=self.stream),
                transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.what, total=self.total, counts="", rate="")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def update(self, summary: Summary, note: str = "") -> None:
        elapsed = max(time.monotonic() - self._start, 1e-6)
        rate = f"{summary.seen / elapsed:,.0f}/s"
        counts = f"+{summary.inserted} ~{summary.updated} skip {summary.skipped} fail {summary.failed}"
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=summary.seen, counts=counts, rate=rate)
        else:
            log.info("%s: %d seen (%s) %s %s", self.what, summary.seen, rate, counts, note)


# ------------------------------------------------------------------------------------ `ingest status`

UNLINKED_REASONS = ("ambiguous", "no_identity", "no_match")


@dataclass(frozen=True, slots=True)
class MatchingStatus:
    """Author positions the enrichment left unlinked: counts by reason, and some of them."""

    counts: dict[str, int]
    listed: list[UnlinkedPosition]

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    s = int(max(seconds, 0))
    if s >= 86400:
        return f"{s // 86400} d {s % 86400 // 3600} h"
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60} min"
    if s >= 60:
        return f"{s // 60} min {s % 60} s"
    return f"{s} s"


def _when(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ") if value is not None else "never"


def status_lines(
    status: IngestStatus, set_aside: list[EnrichFailure], matching: MatchingStatus | None = None
) -> list[str]:
    """`wovepaper ingest status` for people: one line per source, the enrichment backlog, the papers set aside,
    and the author positions left unlinked (counts, then the ambiguous ties listed)."""
    lines = []
    for s in status.sources:
        unit = "batches" if s.source == "enrich" else "pages"
        line = f"{s.source}: {s.records:,} records in {s.pages:,} {unit}; last success {_when(s.last_success_at)}"
        line += f" ({_ago(s.since_success_s)} ago)" if s.last_success_at else ""
        if s.caught_up_to is not None:
            line += f"; complete up to {_when(s.caught_up_to)} (lag {_ago(s.lag_s)})"
        lines.append(line)
    if not status.sources:
        lines.append("nothing ingested yet")
    retry = f" (next retry {_when(status.enrich_next_retry_at)})" if status.enrich_next_retry_at else ""
    lines.append(f"enrich queue: {status.enrich_waiting:,} papers waiting, {status.enrich_failed:,} set aside{retry}")
    lines += [f"  {f.arxiv_id}: {f.attempts} attempt(s), retry {_when(f.retry_at)}: {f.reason}" for f in set_aside]
    if matching is not None:
        counts = ", ".join(f"{matching.counts.get(r, 0):,} {r.replace('_', ' ')}" for r in UNLINKED_REASONS)
        lines.append(f"author matching: {matching.total:,} positions unlinked ({counts})")
        for u in matching.listed:
            if u.reason == "ambiguous":
                lines.append(f"  {u.arxiv_id} #{u.position} {u.name}: ambiguous between {', '.join(u.candidates)}")
    c = status.corrections
    if c is not None:
        line = f"corrections: {c.in_effect:,} in effect, {c.pending:,} waiting for an operator"
        if c.conflicts:
            line += (
                f"; {c.conflicts:,} ingest write(s) kept from undoing {c.in_conflict:,} of them"
                f" (last {_when(c.last_conflict_at)}; `wovepaper corrections show ID`)"
            )
        lines.append(line)
    return lines


def status_json(
    status: IngestStatus, set_aside: list[EnrichFailure], matching: MatchingStatus | None = None
) -> dict[str, Any]:
    """The same as data (`--json`), timestamps in ISO 8601."""

    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value is not None else None

    out: dict[str, Any] = {
        "sources": [
            {
                "source": s.source,
                "records": s.records,
                "pages": s.pages,
                "last_success_at": iso(s.last_success_at),
                "seconds_since_success": s.since_success_s,
                "caught_up_to": iso(s.caught_up_to),
                "lag_seconds": s.lag_s,
            }
            for s in status.sources
        ],
        "enrich": {
            "waiting": status.enrich_waiting,
            "set_aside": status.enrich_failed,
            "next_retry_at": iso(status.enrich_next_retry_at),
            "papers_set_aside": [
                {"arxiv_id": f.arxiv_id, "attempts": f.attempts, "reason": f.reason, "retry_at": iso(f.retry_at)}
                for f in set_aside
            ],
        },
        "corrections": {
            "in_effect": c.in_effect,
            "pending": c.pending,
            "conflicts": c.conflicts,
            "corrections_in_conflict": c.in_conflict,
            "last_conflict_at": iso(c.last_conflict_at),
        }
        if (c := status.corrections) is not None
        else None,
    }
    if matching is not None:
        out["matching"] = {
            "unlinked": matching.total,
            **{r: matching.counts.get(r, 0) for r in UNLINKED_REASONS},
            "positions": [
                {
                    "arxiv_id": u.arxiv_id,
                    "position": u.position,
                    "name": u.name,
                    "reason": u.reason,
                    "candidates": u.candidates,
                    "noted_at": iso(u.noted_at),
                }
                for u in matching.listed
            ],
        }
    return out
