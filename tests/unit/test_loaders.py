"""Work a request starts early (Loaders.started): shared by every caller, gone with the request."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from resolvers.loaders import Loaders


async def test_work_started_early_runs_once_and_is_cancelled_with_the_request() -> None:
    loaders = Loaders(None)  # type: ignore[arg-type]  # no loader of the pool is asked for
    runs = 0
    release = asyncio.Event()

    async def read() -> int:
        nonlocal runs
        runs += 1
        await release.wait()
        return 7

    first = loaders.started(("stats", 1), read)
    assert loaders.started(("stats", 1), read) is first
    other = loaders.started(("stats", 2), read)
    await asyncio.sleep(0)
    assert runs == 2
    release.set()
    assert await first == 7
    # A request answered with work still running (its parent was not found) does not leave it running.
    pending = loaders.started(("stats", 3), asyncio.Event().wait)
    await asyncio.sleep(0)
    loaders.close()
    await asyncio.sleep(0)
    assert pending.cancelled() and other.done()
    # Started again after the request's loaders were closed (renewed): made afresh.
    assert loaders.started(("stats", 1), read) is not first


async def test_a_failure_nobody_awaited_is_not_reported_as_lost(caplog: pytest.LogCaptureFixture) -> None:
    async def fail() -> None:
        raise ValueError("no such researcher")

    task = Loaders(None).started("x", fail)  # type: ignore[arg-type]
    await asyncio.sleep(0.01)
    assert task.done()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        del task
        gc.collect()
    assert "never retrieved" not in caplog.text
