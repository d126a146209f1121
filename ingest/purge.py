"""The CDN purge, once the replicas have the write (with WOVEPAPER_DATABASE_REPLICA_URLS set).

A purge that reaches the CDN before the replicas have replayed the write makes the CDN ask again at once, and the
API may answer it from a replica that has not: the old answer, kept by the CDN for its max-age. So each purge waits,
in the background and in order, until every replica has replayed the write's WAL position, or until the replicas'
maximum lag has passed since the commit (any replica the API still reads from has it by then: a replica further
behind is out of the rotation); then it goes. The ingest does not wait for it, except when it closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Final

import asyncpg

from db.cache.invalidation import Purge
from db.queries.replication import standby_status

log = logging.getLogger("ingest")

# Beyond the maximum lag: an asynchronous commit reaches the WAL on disk (and so the replicas) within this.
MARGIN_S: Final = 1.0
ASK_EVERY_S: Final = 0.1
ASK_TIMEOUT_S: Final = 1.0
ASK_FAILURES: Final = (OSError, TimeoutError, ValueError, asyncpg.PostgresError, asyncpg.InterfaceError)


class PurgeAfterReplicas:
    def __init__(
        self,
        purge: Purge,
        replica_dsns: Sequence[str],
        *,
        max_lag_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.purge = purge
        self.dsns = list(replica_dsns)
        self.wait_s = max_lag_s + MARGIN_S
        self.clock = clock
        self._queue: asyncio.Queue[tuple[list[str], int | None, float]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._conns: dict[str, asyncpg.Connection] = {}

    async def __call__(self, tags: list[str], position: int | None = None) -> None:
        self._queue.put_nowait((tags, position, self.clock() + self.wait_s))
        if self._worker is None:
            self._worker = asyncio.create_task(self._work())

    async def _work(self) -> None:
        while True:
            tags, position, deadline = await self._queue.get()
            try:
                await self._replayed(position, deadline)
                await self.purge(tags, position)
            except Exception:  # a purge is never worth stopping the ones after it
                log.exception("CDN purge of %d tags failed", len(tags))
            finally:
                self._queue.task_done()

    async def _replayed(self, position: int | None, deadline: float) -> None:
        """Until every replica has replayed `position` (unknown: the deadline), or the deadline."""
        while self.clock() < deadline:
            if position is not None and all(await asyncio.gather(*(self._has(d, position) for d in self.dsns))):
                return
            await asyncio.sleep(min(ASK_EVERY_S, max(deadline - self.clock(), 0.0)))

    async def _has(self, dsn: str, position: int) -> bool:
        try:
            async with asyncio.timeout(ASK_TIMEOUT_S):
                conn = self._conns.get(dsn)
                if conn is None or conn.is_closed():
                    conn = self._conns[dsn] = await asyncpg.connect(dsn, timeout=ASK_TIMEOUT_S)
                status = await standby_status(conn)
        except ASK_FAILURES:
            self._forget(dsn)
            return False  # cannot tell: wait for the deadline
        return status.in_recovery and status.replayed is not None and status.replayed >= position

    def _forget(self, dsn: str) -> None:
        conn = self._conns.pop(dsn, None)
        if conn is not None:
            conn.terminate()

    async def aclose(self) -> None:
        """Send the purges still waiting (each within its deadline), then close."""
        if self._worker is not None:
            await self._queue.join()
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        for dsn in list(self._conns):
            self._forget(dsn)
        closing = getattr(self.purge, "aclose", None)
        if closing is not None:
            await closing()
