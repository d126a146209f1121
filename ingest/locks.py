"""One run of each ingest stage at a time, whichever host starts it.

Two hosts with the same cron line, a CronJob started again by hand, `ingest all` beside an `ingest enrich`: each
stage takes its own PostgreSQL advisory lock (`db.queries.ingest_locks`) on the connection it works on, before any
upstream request. A run that finds its stage's lock taken stops at once, naming the run that holds it; with
`wait` it waits for the lock instead. The name a run gives its connections (`run_name`) is what the other one
reads.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Final

import asyncpg

from db.queries.ingest_locks import LockHolder, lock_holder, try_lock, unlock

# Each stage's half of its lock's key. `all` has one of its own besides its stages': a second `ingest all` stops
# at once instead of running whichever stages the first is not in at that moment.
STAGES: Final = {"arxiv": 1, "enrich": 2, "analyse": 3, "embed": 4, "all": 5}
# How often a run that waits (`--wait`) tries the lock again.
WAIT_POLL_S: Final = 2.0
# PostgreSQL keeps at most this many bytes of an application_name.
_NAME_BYTES: Final = 63


class StageBusy(Exception):
    """Another run holds the stage's lock."""

    def __init__(self, stage: str, holder: LockHolder | None) -> None:
        self.stage = stage
        self.holder = holder
        who = holder.describe() if holder is not None else "a run that has just finished"
        super().__init__(f"{stage}: not run: another run holds the {stage} lock: {who}")


def run_name(stage: str) -> str:
    """What this run calls its connections (PostgreSQL's application_name): the stage, the host and the process,
    so that a run that finds the lock taken can say which run took it."""
    name = f"wovepaper-ingest {stage} {socket.gethostname()}:{os.getpid()}"
    return name.encode()[:_NAME_BYTES].decode(errors="ignore")


@asynccontextmanager
async def stage_lock(
    conn: asyncpg.Connection,
    stage: str,
    *,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    poll_s: float = WAIT_POLL_S,
) -> AsyncIterator[None]:
    """Hold the stage's lock on `conn` for the block. Raises StageBusy when another session holds it, unless
    `wait`: then try again every `poll_s` seconds, telling `on_wait` once who it waits for."""
    key = STAGES[stage]
    told = False
    while not await try_lock(conn, key):
        holder = await lock_holder(conn, key)
        if not wait:
            raise StageBusy(stage, holder)
        if not told and on_wait is not None:
            on_wait(
                f"{stage}: waiting for the run that holds the {stage} lock: "
                f"{holder.describe() if holder is not None else 'a run that has just finished'}"
            )
            told = True
        await asyncio.sleep(poll_s)
    try:
        yield
    finally:
        # A connection that broke has lost the lock with it: nothing to give back.
        if not conn.is_closed():
            try:
                await unlock(conn, key)
            except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                pass
