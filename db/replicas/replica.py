"""One replica: its pool, its health (asked on a connection of its own), and what it has replayed.

It is healthy while it answers, is in recovery (a hot standby) and no request lost a connection to it since its
last good check; whether it is also recent enough is decided at each request from `caught_at` (lag.py), so a
replica falling behind leaves the rotation the moment its lag passes the maximum, not at the next check.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Final

import asyncpg

from db.pool import ServingPool
from db.queries.replication import standby_status
from db.replicas.dsn import ReplicaDsn
from db.replicas.lag import PrimaryTimeline
from telemetry.metrics import REPLICA_LAG, REPLICA_USABLE

log = logging.getLogger("wovepaper.replicas")

SETTING: Final = "WOVEPAPER_DATABASE_REPLICA_URLS"
# One health question (connecting included) may take this long; a replica that does not answer within it is out.
CHECK_TIMEOUT_S: Final = 1.0
# What a health question may fail with: the replica is then out until it answers again.
CHECK_FAILURES: Final = (
    OSError,
    TimeoutError,
    ValueError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
)
NEVER: Final = -math.inf

PoolOpener = Callable[[str, Callable[[], None]], Awaitable[ServingPool]]


class Replica:
    def __init__(self, dsn: ReplicaDsn | None, label: str, *, max_lag_s: float, open_pool: PoolOpener) -> None:
        self.dsn = dsn
        self.label = label
        self.max_lag_s = max_lag_s
        self._open_pool = open_pool
        self.pool: ServingPool | None = None
        # Everything the primary had written at `caught_at` (monotonic time) is here; replayed up to `replayed`.
        self.caught_at = NEVER
        self.replayed = 0
        self.healthy = False
        self.failed_at = NEVER
        self.state = "starting" if dsn is not None else "invalid"
        self._conn: asyncpg.Connection | None = None
        self._watched_since = time.monotonic()
        self._lag_gauge = REPLICA_LAG.labels(label)
        self._usable_gauge = REPLICA_USABLE.labels(label)
        self._lag_gauge.set(math.inf)
        self._usable_gauge.set(0)

    def usable(self, now: float) -> bool:
        return self.healthy and now - self.caught_at <= self.max_lag_s

    def lag_s(self, now: float) -> float:
        return now - self.caught_at

    def lost(self) -> None:
        """A request's connection to it was lost or refused: out at once, until a health check started later
        answers."""
        self.healthy = False
        self.failed_at = time.monotonic()
        self._report(self.failed_at)
        self._now("unavailable", "lost a connection")

    async def check(self, started: float, timeline: PrimaryTimeline) -> None:
        """One health round (`started`: when the round began, after the primary was sampled)."""
        if self.dsn is None:
            return
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(
                        self.dsn.dsn, timeout=CHECK_TIMEOUT_S, server_settings={"application_name": "wovepaper-health"}
                    )
                status = await standby_status(self._conn)
            if status.in_recovery and self.pool is None:
                self.pool = await self._open_pool(self.dsn.dsn, self.lost)
        except CHECK_FAILURES as exc:
            await self._drop_connection()
            self.healthy = False
            self._report(time.monotonic())
            self._now("unavailable", f"does not answer ({type(exc).__name__})")
            return
        if not status.in_recovery:
            # Promoted, or the primary itself named as a replica: reading from it would serve another history.
            self.healthy = False
            await self._close_pool()
            self._report(time.monotonic())
            self._now("not_in_recovery", "is not in recovery (a primary, or a promoted replica): refused as a replica")
            return
        if status.replayed is not None:
            self.replayed = max(self.replayed, status.replayed)
        caught = timeline.caught_at(status.replayed)
        if caught is not None:
            self.caught_at = max(self.caught_at, caught)
        if self.failed_at < started and not self.healthy:
            if self.pool is not None:
                # Connections opened before it failed would each fail once more.
                await self.pool.expire_connections()
            self.healthy = True
        now = time.monotonic()
        self._report(now)
        if not self.healthy:
            return
        if self.usable(now):
            self._now("ok", f"in the rotation ({self.lag_s(now):.1f} s behind the primary)")
        elif self.caught_at == NEVER and now - self._watched_since <= self.max_lag_s:
            pass  # just started, or reached again: still catching up with the primary's first samples
        else:
            lag = self.lag_s(now)
            behind = f"{lag:.1f} s" if math.isfinite(lag) else "an unknown time"
            self._now(
                "lagging",
                f"is {behind} behind the primary (WOVEPAPER_REPLICA_MAX_LAG_S={self.max_lag_s:g}): out of the "
                "rotation until it catches up",
            )

    def _report(self, now: float) -> None:
        self._lag_gauge.set(max(self.lag_s(now), 0.0))
        self._usable_gauge.set(1 if self.usable(now) else 0)

    def _now(self, state: str, detail: str) -> None:
        """Logs a change of state (not every round)."""
        if state == self.state:
            return
        self.state = state
        if state == "ok":
            log.info("replica %s %s", self.label, detail)
        elif state == "not_in_recovery":
            log.error("%s: %s %s", SETTING, self.label, detail)
        elif state == "unavailable":
            log.warning("%s: replica %s %s: out of the rotation until it answers", SETTING, self.label, detail)
        else:
            log.warning("replica %s %s", self.label, detail)

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def _close_pool(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            try:
                async with asyncio.timeout(CHECK_TIMEOUT_S):
                    await pool.close()
            except TimeoutError:
                pool.terminate()

    async def aclose(self) -> None:
        with contextlib.suppress(*CHECK_FAILURES):
            await self._drop_connection()
        await self._close_pool()
