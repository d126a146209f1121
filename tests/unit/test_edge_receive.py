"""The edge's timed receive taken up part way (edge/front.py `_resumed`): what `await` would give, a value, an
exception or a cancellation, from a receive that had to wait."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from edge.front import _resumed


async def _later(value: Any, delay: float, log: list[str]) -> Any:
    try:
        await asyncio.sleep(delay)
        await asyncio.sleep(0)
    finally:
        log.append("finally")
    if isinstance(value, Exception):
        raise value
    return value


async def test_a_receive_that_waited_gives_its_value() -> None:
    log: list[str] = []
    pending = _later({"type": "http.request", "body": b"x"}, 0.01, log).__await__()
    waiting = pending.send(None)
    assert await _resumed(pending, waiting) == {"type": "http.request", "body": b"x"}
    assert log == ["finally"]


async def test_a_receive_that_waited_raises_its_error() -> None:
    log: list[str] = []
    pending = _later(ValueError("gone"), 0.01, log).__await__()
    waiting = pending.send(None)
    with pytest.raises(ValueError, match="gone"):
        await _resumed(pending, waiting)


async def test_a_timeout_cancels_the_receive_where_it_waits() -> None:
    log: list[str] = []
    pending = _later({"type": "http.request"}, 5, log).__await__()
    waiting = pending.send(None)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.02):
            await _resumed(pending, waiting)
    assert log == ["finally"]


async def test_a_future_awaited_part_way() -> None:
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    pending = future.__await__()
    waiting = pending.send(None)
    asyncio.get_running_loop().call_later(0.01, future.set_result, {"type": "http.disconnect"})
    assert await _resumed(pending, waiting) == {"type": "http.disconnect"}
