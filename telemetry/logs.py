"""Structured logs: one JSON object per line, with the fields a record carries in `extra`.

The request line (one per request) is written by `emit()`: when the JSON handler `configure()` installed is the
only one that would see it, the request's time and fields are kept without a LogRecord, and the lines of
FLUSH_AFTER_S are built together (one dict each, as structlog does with orjson and a bytes logger) and written out
together, whole lines in writes a shared pipe keeps whole; the same fields, the same line. Anything else (another
handler, a filter, text format, a test's log capture) gets a record.
"""

from __future__ import annotations

import asyncio
import logging
import select
import sys
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


# Request lines are built and written out together, at most FLUSH_AFTER_S after the first of them (or once
# PENDING_MAX_LINES are waiting, or when the process exits: logging's shutdown flushes its handlers): a write(2) per
# request costs more than building its line, and stderr is often unbuffered (PYTHONUNBUFFERED=1, as containers set
# it). A process killed outright loses at most that long's lines.
FLUSH_AFTER_S: Final = 0.05
PENDING_MAX_LINES: Final = 256
# Each write is whole lines and at most this long: a pipe that several workers share (their common stderr) writes
# it whole, never interleaved with another worker's.
WRITE_MAX_BYTES: Final = select.PIPE_BUF


class JsonLines(logging.StreamHandler):  # type: ignore[type-arg]
    """The JSON handler: records as JsonFormatter lines, and request lines from `emit()` gathered, then built and
    written out together, before any record that comes after them."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.setFormatter(JsonFormatter())
        self._pending: list[dict[str, Any]] = []
        self._due: asyncio.AbstractEventLoop | None = None

    def add_line(self, line: dict[str, Any]) -> None:
        """A line from `emit()`, built when written out."""
        with self.lock:  # type: ignore[union-attr]
            self._pending.append(line)
            full = len(self._pending) >= PENDING_MAX_LINES
        if full:
            self.write_pending()
            return
        due = self._due
        if due is not None and not due.is_closed():
            return  # a write is due already (asking for the running loop costs a getpid(2) before Python 3.12)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_pending()  # not serving: nothing to gather
            return
        # The write is due on the loop serving now (a loop closed meanwhile would never run it).
        self._due = loop
        loop.call_later(FLUSH_AFTER_S, self._write_due, loop)

    def emit(self, record: logging.LogRecord) -> None:
        self.write_pending()
        super().emit(record)

    def flush(self) -> None:
        self.write_pending()
        super().flush()

    def _write_due(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._due is loop:
            self._due = None
        self.write_pending()

    def write_pending(self) -> None:
        if not self._pending:
            return
        with self.lock:  # type: ignore[union-attr]
            self._write([_line(line) for line in self._pending])
            self._pending = []

    def _write(self, lines: list[bytes]) -> None:
        stream = self.stream
        try:
            raw = getattr(stream, "buffer", None)
            if raw is None:
                stream.write(b"".join(lines).decode())
                stream.flush()
                return
            stream.flush()  # what the text layer holds was written first
            for chunk in _chunks(lines, WRITE_MAX_BYTES):
                view = memoryview(chunk)
                while view:
                    # An unbuffered stream's raw file may take part of it; a buffered one takes it all.
                    written = raw.write(view)
                    if written is None:
                        raise BlockingIOError("stream would block")
                    view = view[written:]
                raw.flush()
        except (OSError, ValueError):
            # A closed or broken stream: reported once, as logging reports a failed write.
            self.handleError(logging.makeLogRecord({"msg": "request lines", "name": "wovepaper.request"}))


def _chunks(lines: list[bytes], limit: int) -> list[bytes]:
    """`lines` joined into as few pieces as fit in `limit` bytes each (a longer line is a piece of its own)."""
    chunks: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for line in lines:
        if group and size + len(line) > limit:
            chunks.append(b"".join(group))
            group, size = [], 0
        group.append(line)
        size += len(line)
    if group:
        chunks.append(b"".join(group))
    return chunks


# The handler `configure("json")` installed on the root logger: the one `emit()` may write past.
_json_handler: JsonLines | None = None


def configure(fmt: str, level: str = "info") -> None:
    """Send every log line to stderr as JSON (`fmt="json"`) or as plain text; uvicorn's loggers too."""
    global _json_handler
    handler: logging.StreamHandler[Any]
    if fmt == "json":
        handler = _json_handler = JsonLines(sys.stderr)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        _json_handler = None
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


# A line's first fields, in JsonFormatter's order; `emit()` is given them with the record's own.
HEAD: Final = ("time", "level", "logger", "message")


def emit(logger: logging.Logger, line: dict[str, Any]) -> None:
    """An INFO line of `logger`: `line` holds JsonFormatter's fields in its order, `time` (epoch seconds),
    `level`, `logger` and `message` first, then the record's own; the handler owns it from here. Written directly
    when only the JSON handler would see the record, else logged as `logger.info(message, extra=the record's own)`.
    """
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
        logger.info("%s", line["message"], extra={k: v for k, v in line.items() if k not in HEAD})
        return
    handler.add_line(line)


def _line(line: dict[str, Any]) -> bytes:
    """JsonFormatter's line for `line` (see `emit()`), its time formatted in place: one dict, one dumps."""
    line["time"] = _stamp(line["time"])
    return orjson.dumps(line, default=str, option=orjson.OPT_APPEND_NEWLINE)


# The formatted second, kept until a line of another second is built; the formatted millisecond, likewise.
_second: list[Any] = [-1, ""]
_milli: list[Any] = [-1, ""]


def _stamp(created: float) -> str:
    """JsonFormatter's `time` (UTC, milliseconds) of `created`, formatting the date and time once a second."""
    ms = int(created * 1000)
    if _milli[0] == ms:
        stamp: str = _milli[1]
        return stamp
    second, millis = divmod(ms, 1000)
    if _second[0] != second:
        _second[0], _second[1] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    stamp = f"{_second[1]}.{millis:03d}+00:00"
    _milli[0], _milli[1] = ms, stamp
    return stamp
