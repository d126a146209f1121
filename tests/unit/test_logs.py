"""The request line written past logging is, byte for byte, the line JsonFormatter writes for the same record, and
request lines reach the stream together, in whole lines, in order with every other record."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import re
import select
import time
from collections.abc import Iterator
from typing import Any

import pytest

from telemetry import logs
from telemetry.logs import JsonFormatter, _line

REQUEST_LOG = logging.getLogger("wovepaper.request")


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"request_id": "r1", "status": 200, "duration_ms": 0.04, "error_codes": None, "client": "127.0.0.1"},
        {"operation": 'a "quoted"\nname', "odd": object(), "codes": ["BAD_USER_INPUT"]},
    ],
    ids=["no-fields", "request-line", "escapes-and-a-value-json-does-not-know"],
)
def test_direct_line_is_the_formatters(fields: dict[str, object]) -> None:
    record = logging.makeLogRecord({"name": "wovepaper.request", "msg": "POST /graphql 200", "levelname": "INFO"})
    for key, value in fields.items():
        setattr(record, key, value)
    expected = JsonFormatter().format(record).encode() + b"\n"
    head = {"time": record.created, "level": "info", "logger": "wovepaper.request", "message": "POST /graphql 200"}
    assert _line({**head, **fields}) == expected
    assert re.search(rb'"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00"', expected)


@pytest.mark.parametrize("created", [0.0, 1_764_547_200.0, 1_764_547_200.9995, 1_764_547_259.001, 4_102_444_799.999])
def test_the_line_time_is_the_formatters(created: float) -> None:
    record = logging.makeLogRecord({"name": "n", "msg": "m", "levelname": "INFO", "created": created})
    line = {"time": created, "level": "info", "logger": "n", "message": "m"}
    assert _line(line) == JsonFormatter().format(record).encode() + b"\n"


class RecordingFile(io.RawIOBase):
    """An unbuffered stderr's file (PYTHONUNBUFFERED=1): every write a write(2), recorded."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.writes.append(bytes(data))
        return len(data)


@contextlib.contextmanager
def json_logging() -> Iterator[RecordingFile]:
    """`wovepaper serve`'s logging, its stderr an unbuffered file that records each write."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level, logs._json_handler)
    file = RecordingFile()
    logs.configure("json")
    root.handlers[0].stream = io.TextIOWrapper(file, write_through=True)  # type: ignore[attr-defined]
    try:
        yield file
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        logs._json_handler = saved[2]


def request_line(i: int) -> None:
    head = {"time": time.time(), "level": "info", "logger": REQUEST_LOG.name, "message": f"POST /graphql 200 #{i}"}
    logs.emit(REQUEST_LOG, {**head, "request_id": f"r{i}", "path": "/graphql" + "x" * 250})


async def test_request_lines_are_written_together_in_whole_lines_before_any_later_record() -> None:
    with json_logging() as file:
        for i in range(100):
            request_line(i)
        assert file.writes == []  # gathered, not a write(2) each
        logging.getLogger("wovepaper.lifecycle").warning("draining")
        lines = b"".join(file.writes).splitlines()
    assert [json.loads(line)["request_id"] for line in lines[:-1]] == [f"r{i}" for i in range(100)]
    assert json.loads(lines[-1])["message"] == "draining"  # after the lines written before it
    request_writes = file.writes[:-1]
    assert len(request_writes) <= 100 * 330 // (select.PIPE_BUF // 2)
    for write in request_writes:
        # Whole lines, each write at most what a pipe shared by several workers writes without interleaving.
        assert len(write) <= select.PIPE_BUF and write.endswith(b"\n")
        assert all(json.loads(line) for line in write.splitlines())


async def test_request_lines_reach_the_stream_within_the_flush_delay() -> None:
    with json_logging() as file:
        request_line(1)
        request_line(2)
        await asyncio.sleep(logs.FLUSH_AFTER_S * 3)
        assert [json.loads(line)["request_id"] for line in b"".join(file.writes).splitlines()] == ["r1", "r2"]
        assert len(file.writes) == 1


async def test_a_full_buffer_is_written_at_once_and_shutdown_writes_the_rest() -> None:
    with json_logging() as file:
        n = logs.PENDING_MAX_LINES + 10
        for i in range(n):
            request_line(i)
        assert file.writes  # no waiting for the timer once the buffer is full
        logging.getLogger().handlers[0].flush()  # what logging.shutdown() does at exit
        ids = [json.loads(line)["request_id"] for line in b"".join(file.writes).splitlines()]
    assert ids == [f"r{i}" for i in range(n)]


def test_outside_an_event_loop_each_line_is_written_at_once() -> None:
    with json_logging() as file:
        request_line(7)
        assert [json.loads(line)["request_id"] for line in b"".join(file.writes).splitlines()] == ["r7"]


def test_lines_made_on_a_later_event_loop_are_written_on_it() -> None:
    """A flush due on a loop that closed never runs: the next loop's lines are not left waiting for it."""

    async def one_line(i: int, wait: bool) -> None:
        request_line(i)
        if wait:
            await asyncio.sleep(logs.FLUSH_AFTER_S * 3)

    with json_logging() as file:
        asyncio.run(one_line(1, wait=False))  # its loop closes before the write is due
        asyncio.run(one_line(2, wait=True))
        ids = [json.loads(line)["request_id"] for line in b"".join(file.writes).splitlines()]
    assert ids == ["r1", "r2"]


def test_a_line_another_handler_would_see_is_a_record_with_its_own_fields() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    with json_logging() as file:
        logging.getLogger().addHandler(Keep())
        request_line(3)
        lines = b"".join(file.writes).splitlines()
    assert [r.getMessage() for r in records] == ["POST /graphql 200 #3"]
    assert records[0].request_id == "r3" and records[0].name == "wovepaper.request"  # type: ignore[attr-defined]
    assert [json.loads(line)["request_id"] for line in lines] == ["r3"]  # the JSON handler, through the record
