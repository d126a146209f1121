"""Run reporting: a rich progress bar on a terminal, plain log lines otherwise, and a summary."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass, fields
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

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
