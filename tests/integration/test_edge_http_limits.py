"""What a request may take before the application sees it: a head past WOVEPAPER_MAX_HEADER_BYTES is refused (431, or
414 for a URL), a head or body that stops arriving is answered 408 and its connection closed. Real uvicorn servers on
loopback, raw HTTP/1.1: the edge's protocol (edge/protocol.py) refuses a head before it has read it whole; uvicorn's
own protocol reads it whole, and the edge's ASGI layer refuses it then."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson
import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from edge.protocol import EdgeHttpProtocol
from tests.integration import test_response_cache as shared
from tests.integration.test_edge_protocol import Connection, Response, request, server

operations_dir = shared.operations_dir
_ns = itertools.count()
PROTOCOLS = pytest.mark.parametrize("protocol", [EdgeHttpProtocol, HttpToolsProtocol], ids=["edge", "uvicorn"])
SMALL = orjson.dumps({"query": "{ __typename }"})
# Generous: these bound a hang (a test against a server without the limits waits this long, then fails).
WAIT_S = 10


@pytest.fixture(scope="module")
async def resp_db(make_database: Any) -> tuple[str, dict[str, int]]:
    return await shared.build_resp_db(make_database, "httplimits")


def code(response: Response) -> str:
    return str(orjson.loads(response.body)["errors"][0]["extensions"]["code"])


async def answer(conn: Connection) -> Response:
    return await asyncio.wait_for(conn.response(), WAIT_S)


@PROTOCOLS
async def test_a_head_past_the_limit_is_refused_and_one_within_it_answered(
    resp_db, redis_url, cache_namespace, protocol
) -> None:
    ns = f"{cache_namespace}-lim{next(_ns)}"
    async with server(resp_db[0], redis_url, ns, protocol, max_header_bytes=16_384) as served:
        conn = await Connection.open(served.port)
        try:
            await conn.send(request(SMALL, headers={"x-padding": "p" * 12_000}))
            assert (await answer(conn)).status == 200
            await conn.send(request(SMALL, headers={"x-padding": "p" * 20_000}))
            refused = await answer(conn)
            assert refused.status == 431 and code(refused) == "REQUEST_HEAD_TOO_LARGE", refused
        finally:
            await conn.close()


async def test_the_edge_refuses_a_head_before_it_has_read_it_whole(resp_db, redis_url, cache_namespace) -> None:
    """A header of 50 MB was read whole (and the worker kept the memory): answered once 64 KB of head came."""
    async with server(resp_db[0], redis_url, f"{cache_namespace}-lim{next(_ns)}") as served:
        for head, status in [
            (b"GET /graphql HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 100_000, 431),
            (b"GET /graphql?variables=" + b"%22" * 40_000, 414),
        ]:
            conn = await Connection.open(served.port)
            try:
                await conn.send(head)  # and never the end of it
                refused = await answer(conn)
                assert refused.status == status and code(refused) == "REQUEST_HEAD_TOO_LARGE", refused
                assert refused.header("connection") == "close" and await conn.closed()
            finally:
                await conn.close()


async def test_a_head_that_trickles_is_answered_408_and_closed(resp_db, redis_url, cache_namespace) -> None:
    ns = f"{cache_namespace}-lim{next(_ns)}"
    async with server(resp_db[0], redis_url, ns, header_timeout_s=1.0) as served:
        conn = await Connection.open(served.port)
        try:
            await conn.send(b"GET /graphql HTTP/1.1\r\nhost: x\r\nx-slow: ")
            reading = asyncio.create_task(conn.response())
            for _ in range(int(WAIT_S / 0.2)):  # a byte every 0.2 s, as a slow client would, until answered
                if reading.done():
                    break
                await conn.send(b"s")
                await asyncio.sleep(0.2)
            refused = await asyncio.wait_for(reading, WAIT_S)
            assert refused.status == 408 and code(refused) == "REQUEST_TIMEOUT", refused
            assert await conn.closed()
        finally:
            await conn.close()
        # A connection that sends nothing at all is closed, with nothing to answer.
        idle = await Connection.open(served.port)
        try:
            assert await asyncio.wait_for(idle.reader.read(), WAIT_S) == b""
        finally:
            await idle.close()


@PROTOCOLS
async def test_a_body_shorter_than_its_content_length_is_answered_408_and_closed(
    resp_db, redis_url, cache_namespace, protocol
) -> None:
    """Held 40 s without an answer before (as long as the client kept the connection)."""
    ns = f"{cache_namespace}-lim{next(_ns)}"
    async with server(resp_db[0], redis_url, ns, protocol, body_timeout_s=1.0) as served:
        conn = await Connection.open(served.port)
        try:
            await conn.send(request(SMALL).replace(b"content-length: %d" % len(SMALL), b"content-length: 1000"))
            refused = await answer(conn)
            assert refused.status == 408 and code(refused) == "REQUEST_TIMEOUT", refused
            assert refused.header("connection") == "close" and await conn.closed()
        finally:
            await conn.close()
        # A body that keeps coming, in parts, is read and answered.
        conn = await Connection.open(served.port)
        try:
            whole = request(SMALL)
            await conn.send(whole[:-10])
            await asyncio.sleep(0.2)
            await conn.send(whole[-10:])
            assert (await answer(conn)).status == 200
        finally:
            await conn.close()


async def test_a_body_answered_without_being_read_is_not_waited_for_forever(
    resp_db, redis_url, cache_namespace
) -> None:
    """A body too large (413, answered at once) or sent where none is read: its rest, trickled a byte at a time,
    held the connection for as long as the client kept sending."""
    ns = f"{cache_namespace}-lim{next(_ns)}"
    async with server(resp_db[0], redis_url, ns, body_timeout_s=1.0, keep_alive_s=60) as served:
        conn = await Connection.open(served.port)
        try:
            await conn.send(request(SMALL).replace(b"content-length: %d" % len(SMALL), b"content-length: 5000000"))
            assert (await answer(conn)).status == 413  # at once, from its Content-Length
            closed = asyncio.create_task(conn.closed())
            for _ in range(int(WAIT_S / 0.2)):
                if closed.done():
                    break
                await conn.send(b" ")
                await asyncio.sleep(0.2)
            assert await asyncio.wait_for(closed, WAIT_S)
        finally:
            await conn.close()
