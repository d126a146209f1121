"""An open-loop load generator: every request is sent at its scheduled time whatever the server is doing, and its
latency is counted from that time, so a server that stalls is charged for every request queued behind it (no
coordinated omission, the flaw of closed-loop tools such as wrk, whose clients wait for an answer before asking
again and so stop asking exactly when the server is slow).

The HTTP client is the smallest that does the job at thousands of requests a second on a core shared with the
server: keep-alive HTTP/1.1 connections on asyncio (uvloop), one request at a time each, responses parsed by
httptools (llhttp, the parser uvicorn serves with). httpx costs several times the CPU per request, which on a
2-core machine would be taken from the server being measured. No load library fitted: Locust and wrk are
closed-loop; k6 and vegeta keep a fixed rate but time each request from when it actually left.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import httptools
import numpy as np


class TransportError(Exception):
    """The connection failed, closed before the answer was complete, or the answer did not come in time."""


@dataclass(slots=True)
class Response:
    status: int
    headers: dict[bytes, bytes]  # names lower-cased; a repeated header keeps its last value
    body: bytes


def encode_request(
    method: str, target: str, host: str, headers: Sequence[tuple[str, str]] = (), body: bytes = b""
) -> bytes:
    """One HTTP/1.1 request, keep-alive, ready to write."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request in flight at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Response] | None = None
        self.closed = False
        self.answered = False  # a byte of the current request's answer has arrived
        self.idle_since = 0.0
        self._headers: dict[bytes, bytes] = {}
        self._body: list[bytes] = []
        self._status = 0

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(TransportError(f"unparsable response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(TransportError(f"connection lost: {exc or 'closed by the server'}"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.lower()] = value

    def on_headers_complete(self) -> None:
        self._status = self.parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        response = Response(self._status, self._headers, b"".join(self._body))
        if not self.parser.should_keep_alive():
            self.close()
        self._headers, self._body = {}, []
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    def send(self, request: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.answered = False
        self.transport.write(request)
        return self.waiter

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        self.close()


class Client:
    """Keep-alive connections to one server, opened as requests need them, up to `max_connections` (then a request
    waits for one, and its wait counts in its latency).

    As browsers and HTTP client libraries do, a connection idle for `idle_s` is not reused (less than the server's
    keep-alive, uvicorn's 5 s by default), and a request sent on a reused connection that the server closed before
    answering a byte is sent once more on a new one: the server may close an idle connection as a request is on its
    way, which is no failure of the server's."""

    def __init__(
        self, host: str, port: int, *, max_connections: int = 2048, timeout_s: float = 30.0, idle_s: float = 4.0
    ) -> None:
        self.host, self.port = host, port
        self.authority = f"{host}:{port}"
        self.timeout_s = timeout_s
        self.idle_s = idle_s
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(max_connections)

    async def request(self, raw: bytes) -> Response:
        async with self._slots:
            conn = self._reusable()
            if conn is not None:
                try:
                    return await self._exchange(conn, raw)
                except TransportError:
                    if conn.answered:
                        raise
            return await self._exchange(await self._connect(), raw)

    def _reusable(self) -> _Connection | None:
        now = asyncio.get_running_loop().time()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.idle_s:
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Connection, self.host, self.port), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            raise TransportError(f"connect: {exc!r}") from exc
        return conn

    async def _exchange(self, conn: _Connection, raw: bytes) -> Response:
        try:
            response = await asyncio.wait_for(conn.send(raw), self.timeout_s)
        except TimeoutError as exc:
            conn.close()
            raise TransportError(f"no answer within {self.timeout_s} s") from exc
        except BaseException:
            conn.close()
            raise
        if not conn.closed:
            conn.idle_since = asyncio.get_running_loop().time()
            self._idle.append(conn)
        return response

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()


# ------------------------------------------------------------------------------------------------ the schedule


def arrival_times(rate: float, duration_s: float, rng: random.Random, *, poisson: bool = True) -> Iterator[float]:
    """Send times (seconds from the start) at `rate` a second: a Poisson process (independent visitors), or evenly
    spaced."""
    t = 0.0
    while True:
        t += rng.expovariate(rate) if poisson else 1.0 / rate
        if t >= duration_s:
            return
        yield t


def zipf_rank(rng: random.Random, n: int, s: float) -> int:
    """A rank in 1..n drawn Zipf-like (P(r) ~ r^-s), by inverting the continuous approximation of its distribution:
    exact enough for cache behaviour, and O(1) for n in the millions."""
    if n <= 1:
        return 1
    u = rng.random()
    if abs(s - 1.0) < 1e-9:
        r = math.exp(u * math.log(n + 1))
    else:
        a = 1.0 - s
        r = (u * ((n + 1) ** a - 1.0) + 1.0) ** (1.0 / a)
    return min(n, max(1, int(r)))


# ------------------------------------------------------------------------------------------------- recording

# "ok", "hit" (answered by the response cache: X-Cache), "not_modified", or an error kind ("HTTP_503", "TIMEOUT",
# "GRAPHQL:<code>", "CHECK: ...")
Outcome = str
ANSWERED = frozenset({"ok", "hit"})
OK_OUTCOMES = ANSWERED | {"not_modified"}


@dataclass
class Record:
    """What happened to the requests of one class: latencies from the intended send time, outcomes."""

    latencies_ms: list[float] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    lags_ms: list[float] = field(default_factory=list)  # how late the client was in sending
    due_s: list[float] = field(default_factory=list)  # when each was due, from the start of the run
    failed: list[bool] = field(default_factory=list)
    hit: list[bool] = field(default_factory=list)

    def add(self, latency_ms: float, outcome: Outcome, lag_ms: float, due_s: float = 0.0) -> None:
        self.latencies_ms.append(latency_ms)
        self.lags_ms.append(lag_ms)
        self.due_s.append(due_s)
        self.failed.append(outcome not in OK_OUTCOMES)
        self.hit.append(outcome == "hit")
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    def timeline(self, step_s: float) -> list[dict[str, Any]]:
        """The requests by when they were due, `step_s` at a time: how a run went, not only how it ended (an ingest's
        phases, a burst the server did not work off)."""
        if not self.due_s:
            return []
        due = np.asarray(self.due_s)
        latency = np.asarray(self.latencies_ms)
        failed = np.asarray(self.failed)
        hit = np.asarray(self.hit)
        windows = (due // step_s).astype(int)
        out = []
        for w in range(int(windows.max()) + 1):
            here = windows == w
            if not here.any():
                continue
            p50, p99 = np.percentile(latency[here], [50, 99])
            out.append(
                {
                    "from_s": round(w * step_s, 1),
                    "sent": int(here.sum()),
                    "errors": int(failed[here].sum()),
                    "hits": int(hit[here].sum()),
                    "p50_ms": round(float(p50), 1),
                    "p99_ms": round(float(p99), 1),
                }
            )
        return out

    @property
    def sent(self) -> int:
        return len(self.latencies_ms)

    @property
    def errors(self) -> int:
        return sum(n for k, n in self.outcomes.items() if k not in OK_OUTCOMES)

    def summary(self) -> dict[str, Any]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else np.zeros(1)
        p50, p99, p999 = np.percentile(lat, [50, 99, 99.9])
        return {
            "sent": self.sent,
            "errors": self.errors,
            "p50_ms": round(float(p50), 2),
            "p99_ms": round(float(p99), 2),
            "p999_ms": round(float(p999), 2),
            "max_ms": round(float(lat.max()), 2),
            "not_modified": self.outcomes.get("not_modified", 0),
            "hits": self.outcomes.get("hit", 0),
            "error_kinds": {k: n for k, n in sorted(self.outcomes.items()) if k not in OK_OUTCOMES},
        }

    def merge(self, other: Record) -> None:
        self.latencies_ms += other.latencies_ms
        self.lags_ms += other.lags_ms
        self.due_s += other.due_s
        self.failed += other.failed
        self.hit += other.hit
        for k, n in other.outcomes.items():
            self.outcomes[k] = self.outcomes.get(k, 0) + n


Job = Callable[[], Awaitable[Outcome]]


async def open_loop(
    schedule: Iterator[tuple[float, str, Job]], records: dict[str, Record], *, grace_s: float = 30.0
) -> float:
    """Start each job at its time (seconds from now), whatever happened to the earlier ones; record each under its
    class with its latency from the scheduled time. Returns the seconds the schedule took (its last send)."""
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    running: set[asyncio.Task[None]] = set()

    async def one(cls: str, job: Job, due: float) -> None:
        lag = loop.time() - due
        try:
            outcome = await job()
        except TransportError as exc:
            outcome = "TIMEOUT" if "no answer" in str(exc) else "TRANSPORT"
        records.setdefault(cls, Record()).add(
            (loop.time() - due) * 1000.0, outcome, max(0.0, lag) * 1000.0, due_s=due - start
        )

    last = 0.0
    for at, cls, job in schedule:
        due = start + at
        delay = due - loop.time()
        if delay > 0.0005:
            await asyncio.sleep(delay)
        task = loop.create_task(one(cls, job, due))
        running.add(task)
        task.add_done_callback(running.discard)
        last = at
    if running:
        await asyncio.wait(running, timeout=grace_s)
    for task in running:
        task.cancel()
    return last


async def closed_loop(
    jobs: Iterator[tuple[str, Job]], concurrency: int, duration_s: float, records: dict[str, Record]
) -> tuple[int, float]:
    """`concurrency` workers each running the next job as soon as their last one ended, for `duration_s`: the most
    the server completes. Returns (completed, seconds)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    deadline = start + duration_s
    done = 0

    async def worker() -> None:
        nonlocal done
        while loop.time() < deadline:
            cls, job = next(jobs)
            t = loop.time()
            try:
                outcome = await job()
            except TransportError as exc:
                outcome = "TIMEOUT" if "no answer" in str(exc) else "TRANSPORT"
            records.setdefault(cls, Record()).add((loop.time() - t) * 1000.0, outcome, 0.0, due_s=t - start)
            done += 1

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done, loop.time() - start
