"""The request line written past logging is, byte for byte, the line JsonFormatter writes for the same record."""

from __future__ import annotations

import logging
import re

import pytest

from telemetry.logs import JsonFormatter, _line

TIME = re.compile(rb'"time":"[^"]+"')


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
    got = _line("wovepaper.request", "POST /graphql 200", fields)
    assert TIME.sub(b'"time":""', got) == TIME.sub(b'"time":""', expected)
    assert re.search(rb'"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00"', got)
