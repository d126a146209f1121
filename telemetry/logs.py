"""Structured logs: one JSON object per line, with the fields a record carries in `extra`.

The request line (one per request) is written by `emit()`: when the JSON handler `configure()` installed is the
only one that would see it, the line is built as one dict and written to the handler's stream in bytes, without a
LogRecord, a formatter or the handler's lock (as structlog does with orjson and a bytes logger), the lines of
FLUSH_AFTER_S written out together; the same fields, the same line. Anything else (another handler, a filter,
text format, a test's log capture) gets a record.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from datetime import UTC, datetime
from typing import Any, Final

import orjson

# LogRecord attributes that are plumbing, not content.
_STANDARD: Final = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime", "color_message", "taskName"}
)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry, default=str).decode()


# The handler `configure("json")` installed on the root logger: the one `emit()` may write past.
_json_handler: logging.StreamHandler[Any] | None = None


def configure(fmt: str, level: str = "info") -> None:
    """Send every log line to stderr as JSON (`fmt="json"`) or as plain text; uvicorn's loggers too."""
    global _json_handler
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _json_handler = handler if fmt == "json" else None
    # What a record would gather and no line prints (the logging HOWTO's "Optimization"): the caller's frame,
    # thread and process names.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # One line per request comes from wovepaper.request; uvicorn's access line would repeat it.
    logging.getLogger("uvicorn.access").disabled = True


def emit(logger: logging.Logger, message: str, fields: dict[str, Any]) -> None:
    """`logger.info(message, extra=fields)`, written directly when only the JSON handler would see the record."""
    if not logger.isEnabledFor(logging.INFO):
        return
    handler = _json_handler
    root = logging.root
    if (
        handler is None
        or logger.handlers
        or not logger.propagate
        or logger.filters
        or len(root.handlers) != 1
        or root.handlers[0] is not handler
        or root.filters
        or handler.filters
        or handler.level > logging.INFO
    ):
        logger.info("%s", message, extra=fields)
        return
    line = _line(logger.name, message, fields)
    stream = handler.stream
    raw = getattr(stream, "buffer", None)
    try:
        if raw is not None:
            # Past the text layer to its byte buffer: the one stderr's text layer writes through, so lines stay in
            # order (any other line flushes these first).
            raw.write(line)
            _flush_soon(raw)
        else:
            stream.write(line.decode())
            stream.flush()
    except (OSError, ValueError):
        handler.handleError(logging.makeLogRecord({"msg": message, "name": logger.name}))


# Request lines are written out together, at most FLUSH_AFTER_S after the first of them (or when the buffer is
# full, or the process exits: logging's shutdown flushes the stream): a write(2) per request costs more than
# building its line. A process killed outright loses at most that long's lines.
FLUSH_AFTER_S: Final = 0.05
_flush_due: list[bool] = [False]


def _flush_soon(raw: Any) -> None:
    if _flush_due[0]:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raw.flush()  # not serving: nothing to gather
        return
    _flush_due[0] = True
    loop.call_later(FLUSH_AFTER_S, _flush, raw)


def _flush(raw: Any) -> None:
    _flush_due[0] = False
    try:
        raw.flush()
    except (OSError, ValueError):
        pass  # a closed or broken stream: the next line's write reports it


def _line(name: str, message: str, fields: dict[str, Any]) -> bytes:
    """JsonFormatter's line for these `fields` (none named time, level, logger or message), its head spliced onto
    the fields' JSON rather than merged into one more dict."""
    head = b'{"time":"%b","level":"info","logger":%b,"message":%b' % (_now(), orjson.dumps(name), orjson.dumps(message))
    return head + (b"," + orjson.dumps(fields, default=str)[1:] if fields else b"}") + b"\n"


# The formatted second, kept until the clock moves to the next one; the formatted millisecond, until it does.
_second: list[Any] = [-1, ""]
_milli: list[Any] = [-1, b""]


def _now() -> bytes:
    """JsonFormatter's `time` (UTC, milliseconds), formatting the date and time once a second."""
    ms = int(time.time() * 1000)
    if _milli[0] == ms:
        stamp: bytes = _milli[1]
        return stamp
    second, millis = divmod(ms, 1000)
    if _second[0] != second:
        _second[0], _second[1] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    stamp = f"{_second[1]}.{millis:03d}+00:00".encode()
    _milli[0], _milli[1] = ms, stamp
    return stamp
