"""Answers from memory given by the server's protocol (edge/protocol.py), before the ASGI exchange.

Real uvicorn servers on loopback, raw HTTP/1.1 over a socket: what a client receives from a remembered request must
be the bytes the exchange sends (but the date), with the same budget charge, metrics and log line; everything the
exchange handles differently (bodies still arriving, pipelining, `Connection: close`, HTTP/1.0, `Expect`, CORS,
credentials, a budget that needs Redis) must still be answered right."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import itertools
import logging
import random
import socket
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app import create_app
from db.cache.invalidation import invalidate
from db.records import Touched
from edge.protocol import EdgeHttpProtocol
from edge.ratelimit import RateLimiter
from localservers import free_port
from settings import Settings
from tests.integration import test_response_cache as shared
from tests.integration.test_edge_keys_limits import limiters
from tests.integration.test_near_cache import listening
from tests.integration.test_response_cache import RESEARCHER_PAGE

operations_dir = shared.operations_dir
_ns = itertools.count()


@pytest.fixture(scope="module")
async def resp_db(make_database: Any) -> tuple[str, dict[str, int]]:
    return await shared.build_resp_db(make_database, "protocol")


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests uvicorn ran through the ASGI exchange, in order."""
    seen: list[str] = []
    run_asgi = RequestResponseCycle.run_asgi

    async def counted(self: RequestResponseCycle, app: Any) -> None:
        seen.append(self.scope["path"])
        await run_asgi(self, app)

    monkeypatch.setattr(RequestResponseCycle, "run_asgi", counted)
    return seen


@dataclass
class Server:
    port: int
    state: dict[str, Any]
    # Its open connections' protocols.
    connections: set[Any]


@contextlib.asynccontextmanager
async def server(
    dsn: str,
    redis_url: str,
    namespace: str,
    protocol: type = EdgeHttpProtocol,
    prepare: Callable[[Starlette], None] | None = None,
    keep_alive_s: float = 5,
    **settings: Any,
) -> AsyncIterator[Server]:
    """One uvicorn worker serving the app as `wovepaper serve` does (or with uvicorn's own protocol); `prepare` sees
    the application first."""
    application = create_app(Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, cache_namespace=namespace, **settings))
    if prepare is not None:
        prepare(application)
    config = uvicorn.Config(
        application,
        host="127.0.0.1",
        port=free_port(),
        http=protocol,
        proxy_headers=False,
        timeout_keep_alive=keep_alive_s,  # type: ignore[arg-type]
        lifespan="on",
        log_config=None,
        log_level="warning",
    )
    served = uvicorn.Server(config)
    task = asyncio.create_task(served.serve())
    try:
        while not served.started:
            assert not task.done(), task
            await asyncio.sleep(0.01)
        state = served.lifespan.state if hasattr(served, "lifespan") else {}
        await listening(state["near"])
        yield Server(config.port, state, served.server_state.connections)
    finally:
        served.should_exit = True
        await task


@dataclass
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def comparable(self) -> tuple[int, list[tuple[str, str]], bytes]:
        """All but the date and the budget's figures, which move between two answers."""
        moving = {"date", "x-ratelimit-remaining", "x-ratelimit-used", "x-ratelimit-reset"}
        return self.status, [(k, "" if k in moving else v) for k, v in self.headers], self.body


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self, *, bodiless: bool = False) -> Response:
        """The next response; `bodiless`: one that has none whatever its Content-Length says (to a HEAD)."""
        while True:
            head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            if status != 100:
                break
        headers = [(k.lower(), v) for k, _, v in (line.partition(": ") for line in lines[1:] if line)]
        length = 0 if bodiless else int(next(v for k, v in headers if k == "content-length"))
        body = await asyncio.wait_for(self.reader.readexactly(length), 10)
        return Response(status, headers, body)

    async def closed(self) -> bool:
        return await asyncio.wait_for(self.reader.read(), 10) == b""

    async def close(self) -> None:
        with contextlib.suppress(OSError):  # the server may have closed it first
            self.writer.close()
            await self.writer.wait_closed()


def request(
    body: bytes, *, path: str = "/graphql", version: str = "1.1", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"POST {path} HTTP/{version}", "host: wovepaper.test", "content-type: application/json"]
    lines += [f"{k}: {v}" for k, v in {"x-request-id": "req-0001", **(headers or {})}.items()]
    lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def page_body(resp_db: tuple[str, dict[str, int]], key: str = "A") -> bytes:
    return orjson.dumps({"query": RESEARCHER_PAGE, "variables": {"id": str(resp_db[1][key])}})


async def held(server: Server, entries: int = 1) -> None:
    """Waits until the server holds `entries` answers in memory: it keeps one after sending it."""
    near = server.state["near"]
    for _ in range(500):
        if len(near) >= entries:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{len(near)} answers held, not {entries}")


@contextlib.asynccontextmanager
async def remembering(
    resp_db: tuple[str, dict[str, int]],
    redis_url: str,
    cache_namespace: str,
    exchanges: list[str],
    page: bytes,
    **settings: Any,
) -> AsyncIterator[tuple[Server, Response]]:
    """A server that has answered `page` once and holds that answer in memory; `exchanges` counted from then on."""
    async with server(resp_db[0], redis_url, f"{cache_namespace}-proto{next(_ns)}", **settings) as early:
        first = await ask(early.port, page)
        await held(early)
        exchanges.clear()
        yield early, first


async def ask(port: int, data: bytes) -> Response:
    conn = await Connection.open(port)
    try:
        await conn.send(data)
        return await conn.response()
    finally:
        await conn.close()


async def test_a_remembered_request_is_answered_before_the_exchange_with_the_bytes_the_exchange_sends(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    ns = f"{cache_namespace}-proto{next(_ns)}"
    page = request(page_body(resp_db))
    async with (
        server(resp_db[0], redis_url, ns) as early,
        server(resp_db[0], redis_url, ns, HttpToolsProtocol) as plain,
    ):
        first = await ask(early.port, page)
        assert first.status == 200 and first.header("x-cache") == "miss"
        assert await ask(plain.port, page)  # remembered by the plain server too
        await held(early)
        await held(plain)
        exchanges.clear()
        from_memory = await ask(early.port, page)
        assert exchanges == []  # no ASGI exchange
        through_exchange = await ask(plain.port, page)
        assert exchanges == ["/graphql"]
        assert from_memory.header("x-cache") == "hit" and through_exchange.header("x-cache") == "hit"
        assert from_memory.comparable() == through_exchange.comparable()
        assert from_memory.body == first.body
        names = [k for k, _ in from_memory.headers]
        assert names[:2] == ["date", "server"] and "x-ratelimit-limit" in names
        assert from_memory.header("x-request-id") == "req-0001" and from_memory.header("vary") == "Origin"


async def test_the_budget_is_charged_exactly_whichever_way_a_request_is_answered(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    """Points spent from a lease without the exchange, then over Redis once the lease is spent: the figures each
    answer shows move by the page's cost, and what Redis holds afterwards is what was spent."""
    ns = f"{cache_namespace}-proto{next(_ns)}"
    page = request(page_body(resp_db))
    started = time.monotonic()
    async with server(resp_db[0], redis_url, ns, anon_points_per_hour=1_000) as early:
        conn = await Connection.open(early.port)
        try:
            answers = []
            for _ in range(40):
                await conn.send(page)
                answers.append(await conn.response())
        finally:
            await conn.close()
    assert all(a.status == 200 for a in answers)
    used = [int(a.header("x-ratelimit-used") or 0) for a in answers]
    cost = used[0]  # the first answer was computed, and charged its cost
    assert cost >= 1
    # Each answer's figures move by exactly its cost, but that a point refills every 3.6 s.
    refills = 1 + (time.monotonic() - started) / 3.6
    steps = [b - a for a, b in itertools.pairwise(used)]
    assert set(steps) <= {cost, cost - 1} and steps.count(cost - 1) <= refills
    assert exchanges.count("/graphql") <= 40 // 2  # most answered from a lease, without the exchange
    # The server stopped and gave its lease back: Redis holds what was spent.
    async with limiters(redis_url, ns, 1) as (fresh,):
        held = (await fresh.charge("ip:127.0.0.1", 0, 1_000)).used
    assert 40 * cost - (1 + (time.monotonic() - started) / 3.6) <= held <= 40 * cost


async def test_a_charge_that_goes_to_redis_is_awaited_without_the_exchange_refusals_included(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    """Many anonymous clients each asking a few pages: no lease to spend, every charge goes to Redis. The answer (or
    the refusal) still comes from memory, with the exchange's headers and figures."""
    ns = f"{cache_namespace}-proto{next(_ns)}"
    page = request(page_body(resp_db))
    # Too small a budget to lease from: every charge goes to Redis, the last ones refused.
    async with (
        server(resp_db[0], redis_url, ns, anon_points_per_hour=60) as early,
        server(resp_db[0], redis_url, f"{ns}-plain", HttpToolsProtocol, anon_points_per_hour=60) as plain,
    ):
        first = await ask(early.port, page)
        await held(early)
        exchanges.clear()
        answers = [await ask(early.port, page) for _ in range(69)]
        assert exchanges == []
        statuses = [a.status for a in answers]
        assert 429 in statuses and all(s == 200 for s in statuses[: statuses.index(429)])
        used = [int(a.header("x-ratelimit-used") or 0) for a in [first, *answers[: statuses.index(429)]]]
        cost = used[0]
        assert used == [cost * (i + 1) for i in range(len(used))] and used[-1] <= 60 < used[-1] + cost
        refused = answers[statuses.index(429)]
        assert orjson.loads(refused.body)["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        # The same answers, headers included, as the exchange gives for the same budget (each server computed its
        # first answer, which says when).
        plain_answers = [await ask(plain.port, page) for _ in range(70)]
        assert exchanges.count("/graphql") == 70
        for mine, theirs in zip([first, *answers], plain_answers, strict=True):
            assert mine.comparable()[:2] == theirs.comparable()[:2]
            if mine.status == 200:
                assert (mine.body, theirs.body) == (first.body, plain_answers[0].body)
            else:
                errors = orjson.loads(mine.body)["errors"], orjson.loads(theirs.body)["errors"]
                assert [sorted(e[0]["extensions"]) for e in errors] == [
                    ["code", "cost", "limit", "remaining", "retryAfter"]
                ] * 2


async def test_pipelined_requests_are_answered_in_order_whichever_way_each_goes(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    ns = f"{cache_namespace}-proto{next(_ns)}"
    a, b = request(page_body(resp_db, "A")), request(page_body(resp_db, "B"))
    health = b"GET /healthz HTTP/1.1\r\nhost: wovepaper.test\r\n\r\n"
    async with server(resp_db[0], redis_url, ns) as early:
        first_a, first_b = await ask(early.port, a), await ask(early.port, b)
        await held(early, 2)
        conn = await Connection.open(early.port)
        try:
            exchanges.clear()
            # Four requests in one write: two remembered, one not for memory, one remembered. The last waits for the
            # exchange of the one before it, as uvicorn has pipelined requests wait, and takes the exchange too.
            await conn.send(a + b + health + a)
            got = [await conn.response() for _ in range(4)]
            assert [r.body for r in got] == [first_a.body, first_b.body, b'{"status":"ok"}', first_a.body]
            assert exchanges == ["/healthz", "/graphql"]
            # The connection is kept alive for more.
            await conn.send(b)
            assert (await conn.response()).body == first_b.body
        finally:
            await conn.close()


async def test_a_request_pipelined_behind_an_answer_from_memory_outlives_the_idle_timeout(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    """The answer from memory leaves the connection idle, so uvicorn arms its keep-alive timer; the request already
    parsed behind it is in progress, and must not be cut off when the timer fires."""

    async def slow(_: Request) -> PlainTextResponse:
        await asyncio.sleep(0.6)
        return PlainTextResponse("slow")

    def add_slow(application: Starlette) -> None:
        application.add_route("/slow", slow)

    page = request(page_body(resp_db))
    later = b"GET /slow HTTP/1.1\r\nhost: wovepaper.test\r\n\r\n"
    # Rate limits off: the answer is written while the data is parsed, before the next request's headers.
    settings = {"keep_alive_s": 0.2, "prepare": add_slow, "rate_limits": "off"}
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, page, **settings) as (early, first):
        conn = await Connection.open(early.port)
        try:
            await conn.send(page + later)
            assert (await conn.response()).body == first.body
            assert (await conn.response()).body == b"slow"
            assert exchanges == ["/slow"]
            # Idle again: closed once the timer fires.
            assert await conn.closed()
        finally:
            await conn.close()


async def test_a_client_that_does_not_read_gets_every_answer_and_is_not_buffered_without_bound(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    """Requests one after another from a client that reads nothing until it has sent them all: once its socket is
    full, the next request waits for the client to read (through the exchange, with the requests behind it queued
    as uvicorn queues them), instead of answers piling up in the server's memory."""
    page = request(page_body(resp_db))
    count = 400  # 0.9 MB of answers
    settings = {"rate_limits": "off", "keep_alive_s": 0.3}  # closed once idle: the client reads to the end
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, page, **settings) as (early, first):
        conn = socket.socket()
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)  # fixed: it fills
        conn.settimeout(30)
        conn.connect(("127.0.0.1", early.port))
        await asyncio.sleep(0.05)
        (protocol,) = early.connections
        protocol.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 16)
        try:
            for _ in range(count):  # each its own read at the server, so each may be answered from memory
                conn.sendall(page)
                await asyncio.sleep(0.001)
            # Both sockets are full: answers wait in the server's buffer, about its high-water mark of them.
            assert protocol.flow.write_paused and protocol.transport.get_write_buffer_size() < 200_000
            received: list[bytes] = []
            await asyncio.to_thread(lambda: received.extend(iter(functools.partial(conn.recv, 1 << 20), b"")))
        finally:
            conn.close()
    answers = responses_in(b"".join(received))
    assert len(answers) == count and all(a.body == first.body for a in answers)
    assert 0 < len(exchanges) < count  # from memory until the client fell behind, then through the exchange


@pytest.mark.parametrize("rate_limits", ["on", "off"])  # off: written while the data is parsed
async def test_connection_close_and_http_1_0_close_after_the_answer(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges, rate_limits
) -> None:
    """Nothing more is answered on that connection, not even requests already sent behind it."""
    body = page_body(resp_db)
    health = b"GET /healthz HTTP/1.1\r\nhost: wovepaper.test\r\n\r\n"
    settings = {"rate_limits": rate_limits}
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, request(body), **settings) as (early, first):
        for data in (request(body, headers={"connection": "close"}), request(body, version="1.0")):
            conn = await Connection.open(early.port)
            try:
                await conn.send(data + request(body) + health)
                answer = await conn.response()
                assert answer.body == first.body and answer.header("connection") == "close"
                assert await conn.closed()
            finally:
                await conn.close()
        assert exchanges == []


async def test_a_body_still_arriving_and_expect_100_continue_are_answered_through_the_exchange(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    body = page_body(resp_db)
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, request(body)) as (early, first):
        conn = await Connection.open(early.port)
        try:
            data = request(body)
            await conn.send(data[:-20])
            await asyncio.sleep(0.1)
            await conn.send(data[-20:])
            assert (await conn.response()).body == first.body
        finally:
            await conn.close()
        continued = await ask(early.port, request(body, headers={"expect": "100-continue"}))
        assert continued.body == first.body
        assert exchanges == ["/graphql", "/graphql"]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"origin": "https://wovepaper.org"}, "access-control-allow-origin"),
        ({"x-api-key": "wp_not_a_key"}, None),
    ],
)
async def test_requests_the_edge_must_see_whole_take_the_exchange(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges, headers, expected
) -> None:
    """CORS answers requests with an Origin; a credential is verified (here: refused)."""
    body = page_body(resp_db)
    cors = {"cors_origins": "https://wovepaper.org"}
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, request(body), **cors) as (early, _):
        answer = await ask(early.port, request(body, headers=headers))
        assert exchanges == ["/graphql"]
        if expected:
            assert answer.status == 200 and answer.header(expected) == "https://wovepaper.org"
        else:
            assert answer.status == 401


async def test_with_tracing_on_every_request_takes_the_exchange_and_is_traced(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from telemetry.tracing import instrument, tracer_provider, uninstrument

    exporter = InMemorySpanExporter()
    page = request(page_body(resp_db))

    def traced(application: Starlette) -> None:
        instrument(application, service_name="wovepaper-test", provider=tracer_provider("wovepaper-test", exporter))

    try:
        async with remembering(resp_db, redis_url, cache_namespace, exchanges, page, prepare=traced) as (early, first):
            assert first.header("x-cache") == "miss"
            exporter.clear()
            assert (await ask(early.port, page)).header("x-cache") == "hit"
        assert exchanges == ["/graphql"]
        assert any(s.kind.name == "SERVER" for s in exporter.get_finished_spans())
    finally:
        uninstrument()


async def test_an_answer_from_memory_is_logged_and_counted(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges, caplog
) -> None:
    page = request(page_body(resp_db), headers={"x-request-id": "req-logged"})
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, page) as (early, _):
        store = early.state["cache"]
        hits = store.metrics.response_near_hits
        before = await served_requests(early.port)
        exchanges.clear()  # the scrape
        with caplog.at_level(logging.INFO, logger="wovepaper.request"):
            await ask(early.port, page)
            for _ in range(100):
                if any(getattr(r, "request_id", None) == "req-logged" for r in caplog.records):
                    break
                await asyncio.sleep(0.02)
        assert exchanges == []
        assert store.metrics.response_near_hits == hits + 1
        lines = [r for r in caplog.records if getattr(r, "request_id", None) == "req-logged"]
        (line,) = lines
        assert (line.status, line.operation, line.response_cache, line.path) == (
            200,
            "ResearcherPage",
            "hit",
            "/graphql",
        )
        assert await served_requests(early.port) == before + 1


async def served_requests(port: int) -> float:
    """The server's count of ResearcherPage requests answered 200."""
    metrics = await ask(port, b"GET /metrics HTTP/1.1\r\nhost: wovepaper.test\r\n\r\n")
    for line in metrics.body.decode().splitlines():
        if line.startswith("wovepaper_request_duration_seconds_count") and 'operation="ResearcherPage"' in line:
            if 'status="200"' in line:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_an_entry_dropped_while_its_charge_is_out_is_still_the_answer_and_the_next_request_misses(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges, monkeypatch
) -> None:
    """The request came before the write that dropped its entry, as it would through the exchange."""
    page = request(page_body(resp_db))
    budget = {"anon_points_per_hour": 60}
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, page, **budget) as (early, first):
        charge = RateLimiter.charge

        async def dropped_meanwhile(self: RateLimiter, subject: str, points: int, limit: int) -> Any:
            # A write elsewhere drops the page while this charge is on its way to Redis.
            await invalidate(early.state["cache"], Touched(researchers={resp_db[1]["A"]}))
            monkeypatch.setattr(RateLimiter, "charge", charge)
            return await charge(self, subject, points, limit)

        monkeypatch.setattr(RateLimiter, "charge", dropped_meanwhile)
        again = await ask(early.port, page)
        assert exchanges == []
        assert (again.status, again.header("x-cache"), again.body) == (200, "hit", first.body)
        assert (await ask(early.port, page)).header("x-cache") == "miss"
        assert exchanges == ["/graphql"]


def responses_in(stream: bytes) -> list[Response]:
    """Every response in the bytes a connection received until it closed."""
    answers = []
    while stream:
        head, _, stream = stream.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = [(k.lower(), v) for k, _, v in (line.partition(": ") for line in lines[1:] if line)]
        length = int(next((v for k, v in headers if k == "content-length"), 0))
        answers.append(Response(int(lines[0].split(" ")[1]), headers, stream[:length]))
        stream = stream[length:]
    return answers


def persisted_get(resp_db: tuple[str, dict[str, int]], *headers: str) -> bytes:
    """The page as the site's CDN asks for it: its persisted document by GET."""
    document = hashlib.sha256(RESEARCHER_PAGE.encode()).hexdigest()
    variables = orjson.dumps({"id": str(resp_db[1]["A"])})
    query = urllib.parse.urlencode({"documentId": f"sha256:{document}", "variables": variables})
    lines = [f"GET /graphql?{query} HTTP/1.1", "host: wovepaper.test", "x-request-id: req-cdn", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def test_head_is_answered_as_its_get_without_the_body(
    resp_db, redis_url, cache_namespace, operations_dir, exchanges
) -> None:
    """RFC 9110 9.3.2: the GET's status and headers, its Content-Length included, and no body (uptime checks and
    some caches ask with HEAD); the connection goes on with the next request."""
    get = persisted_get(resp_db)
    head = get.replace(b"GET ", b"HEAD ", 1)
    async with remembering(resp_db, redis_url, cache_namespace, exchanges, get) as (early, first):
        conn = await Connection.open(early.port)
        try:
            await conn.send(head + get)
            headed = await conn.response(bodiless=True)
            got = await conn.response()
        finally:
            await conn.close()
    assert got.body == first.body  # nothing of a body came between
    assert headed.comparable()[:2] == got.comparable()[:2] and headed.header("x-cache") == "hit"


def hostile_streams(
    resp_db: tuple[str, dict[str, int]], count: int, seed: int, more: Sequence[bytes] = ()
) -> list[list[bytes]]:
    """Requests a client may pipeline in one connection (`more` among them), well-formed or not, cut into pieces
    at random bytes."""
    body = page_body(resp_db)
    chunked = request(body).replace(f"content-length: {len(body)}".encode(), b"transfer-encoding: chunked")
    chunked = (
        chunked[: -len(body)] + b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:7], body[7:])) + b"0\r\n\r\n"
    )
    query = urllib.parse.urlencode({"query": RESEARCHER_PAGE, "variables": orjson.dumps({"id": str(resp_db[1]["A"])})})
    kinds = [
        request(body),
        request(body),
        request(page_body(resp_db, "B")),
        request(body, headers={"connection": "close"}),
        request(body, version="1.0"),
        request(body, headers={"connection": "keep-alive"}, version="1.0"),
        chunked,
        request(body + b" "),  # other bytes: a miss, computed
        request(b'{"query": "{ nope }"}'),
        request(b"{not json"),
        request(body[: len(body) // 2]),  # declares more than it sends: the rest is the next request's bytes
        f"GET /graphql?{query} HTTP/1.1\r\nhost: wovepaper.test\r\nx-request-id: req-get\r\n\r\n".encode(),
        b"GET /healthz HTTP/1.1\r\nhost: wovepaper.test\r\nx-request-id: req-health\r\n\r\n",
        b"POST /graphql HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n",  # smuggling: a 400
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # TLS to a plain port
        b"GET /\x00 HTTP/1.1\r\n\r\n",
        *more,
    ]
    rng = random.Random(seed)
    streams = []
    for _ in range(count):
        data = b"".join(rng.choices(kinds, k=rng.randint(1, 4)))
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.choice([0, 0, 1, 2, 5]))))
        streams.append([data[a:b] for a, b in itertools.pairwise([0, *cuts, len(data)])])
    return streams


def same_answers(mine: list[Response], theirs: list[Response]) -> bool:
    """The same responses; but where invalid bytes end the stream, uvicorn sends its 400 and closes at once, losing
    the answers of requests before them still being computed (answers from memory are written as their requests
    are parsed, so fewer are lost): then the same 400 last, and before it the same answers as far as both go."""
    ours, its = [r.comparable() for r in mine], [r.comparable() for r in theirs]
    if ours == its:
        return True
    invalid = bool(ours and its) and its[-1][0] == 400 and its[-1][2] == b"Invalid HTTP request received."
    both = min(len(ours), len(its)) - 1
    return invalid and ours[-1] == its[-1] and ours[:both] == its[:both]


def received(port: int, pieces: list[bytes]) -> bytes:
    """What the server sends back until it closes the connection (it does once idle). A blocking socket, in a
    thread: a send refused once the server closed must not lose what it sent before."""
    got = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        with contextlib.suppress(OSError):
            for piece in pieces:
                conn.sendall(piece)
                time.sleep(0.002)
        with contextlib.suppress(ConnectionResetError):
            while data := conn.recv(65536):
                got.append(data)
    return b"".join(got)


async def test_any_bytes_a_client_sends_get_the_answers_uvicorn_s_own_protocol_gives(
    resp_db, redis_url, cache_namespace, operations_dir
) -> None:
    """Differential: the same byte streams, cut the same way, to a server answering from memory and to one with
    uvicorn's own protocol (sharing one cache, so holding the same answers): the same responses, in the same order,
    on the same connections, but for the date and the budget's figures."""
    ns = f"{cache_namespace}-proto{next(_ns)}"
    settings = {"keep_alive_s": 0.2, "anon_points_per_hour": 10_000_000}
    async with (
        server(resp_db[0], redis_url, ns, **settings) as early,
        server(resp_db[0], redis_url, ns, HttpToolsProtocol, **settings) as plain,
    ):
        cdn = persisted_get(resp_db)
        for port in (early.port, plain.port):
            for key in ("A", "B"):
                await ask(port, request(page_body(resp_db, key)))
            etag = (await ask(port, cdn)).header("etag")  # the same answer as by POST: no more held
        await held(early, 2)
        await held(plain, 2)
        assert etag is not None
        revalidations = [persisted_get(resp_db, f"if-none-match: {tag}") for tag in (etag, '"other"', "*")]
        statuses: set[int] = set()
        for number, pieces in enumerate(hostile_streams(resp_db, 60, seed=1205, more=[cdn, *revalidations])):
            got = await asyncio.gather(
                *(asyncio.to_thread(received, port, pieces) for port in (early.port, plain.port))
            )
            mine, theirs = map(responses_in, got)
            assert same_answers(mine, theirs), (number, pieces)
            statuses.update(r.status for r in mine)
        assert statuses >= {200, 304, 400}
