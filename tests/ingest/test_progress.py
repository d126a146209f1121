from __future__ import annotations

import io
import logging

import pytest

from ingest.progress import RunProgress, Summary


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_log_lines_when_not_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    stream = io.StringIO()
    with caplog.at_level(logging.INFO, logger="ingest"), RunProgress("arxiv", stream=stream) as progress:
        progress.update(Summary(seen=2500, inserted=2400, updated=90, skipped=10), "page 1")
    assert stream.getvalue() == ""
    assert "arxiv: 2500 seen" in caplog.text and "+2400 ~90 skip 10 fail 0" in caplog.text


def test_progress_bar_on_a_terminal() -> None:
    stream = Terminal()
    with RunProgress("enrich", total=10, stream=stream) as progress:
        progress.update(Summary(seen=4, inserted=3))
    out = stream.getvalue()
    assert "enrich" in out and "4/10" in out


def test_summary_line_names_every_count() -> None:
    line = Summary(seen=5, inserted=1, updated=2, skipped=1, failed=1, requests=7, retries=3, stopped="budget").line(
        "x"
    )
    assert line == (
        "x: seen 5, inserted 1, updated 2, skipped 1, failed 1, requests 7, retries 3; stopped early: budget"
    )
