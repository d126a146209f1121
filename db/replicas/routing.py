"""Which server a request reads from: one target per request, chosen at its start.

Writes (mutations, the key check, chat, the ingest) go to the primary. A read goes to a replica in the rotation
(healthy, and at most WOVEPAPER_REPLICA_MAX_LAG_S behind) that has replayed the reader's own latest write, if the
reader wrote within WOVEPAPER_READ_YOUR_WRITES_S (writers.py); else to the primary. Replicas take turns.
A health round every HEALTH_EVERY_S samples the primary's WAL position and asks each replica how far it has
replayed (replica.py, lag.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import asyncpg
from prometheus_client import Counter

from db.cache.positions import UNKNOWN
from db.cache.store import CacheStore
from db.pool import PoolExhausted, ServingPool
from db.queries.replication import committed_position, written_position
from db.replicas.dsn import BadDsn, parse_replica_dsn
from db.replicas.lag import PrimaryTimeline
from db.replicas.replica import CHECK_FAILURES, CHECK_TIMEOUT_S, SETTING, PoolOpener, Replica
from db.replicas.writers import WritePositions
from telemetry.metrics import DB_READS, REPLICA_FALLBACKS

log = logging.getLogger("wovepaper.replicas")

HEALTH_EVERY_S: Final = 0.5
# A purge waits for the replicas at most the maximum lag and this (an asynchronous commit reaches them within it),
# asking every this often.
PURGE_MARGIN_S: Final = 1.0
PURGE_POLL_S: Final = 0.1
PRIMARY: Final = "primary"


@dataclass(frozen=True, slots=True)
class Target:
    """Where one request reads: a pool, and how far that server had replayed when chosen (None: the primary)."""

    pool: asyncpg.Pool
    replayed: int | None
    label: str

    @property
    def is_replica(self) -> bool:
        return self.replayed is not None


class ReplicaSet:
    """One per process: the primary's pool, the replicas, the health rounds (`run()`, a task of the lifespan)."""

    def __init__(
        self,
        primary: ServingPool,
        dsns: Sequence[str],
        *,
        open_pool: PoolOpener,
        max_lag_s: float,
        read_your_writes_s: float,
        cache: CacheStore | None,
        primary_dsn: str,
    ) -> None:
        self.primary = Target(primary, None, PRIMARY)
        self.primary_dsn = primary_dsn
        self.max_lag_s = max_lag_s
        self.timeline = PrimaryTimeline(max_lag_s)
        self.writers = WritePositions(cache, read_your_writes_s)
        self.replicas: list[Replica] = []
        for n, dsn in enumerate(dsns, 1):
            try:
                parsed = parse_replica_dsn(dsn)
            except BadDsn as exc:
                log.error("%s: replica %d of %d does not parse (%s): it is left out", SETTING, n, len(dsns), exc)
                self.replicas.append(Replica(None, f"invalid-dsn-{n}", max_lag_s=max_lag_s, open_pool=open_pool))
            else:
                self.replicas.append(Replica(parsed, parsed.label, max_lag_s=max_lag_s, open_pool=open_pool))
        self._turn = 0
        self._primary_conn: asyncpg.Connection | None = None
        self._reads: dict[str, Counter] = {r.label: DB_READS.labels(r.label) for r in self.replicas}
        self._primary_reads = DB_READS.labels(PRIMARY)
        self._fallbacks = {
            reason: REPLICA_FALLBACKS.labels(reason) for reason in ("read_your_writes", "lagging", "unavailable")
        }

    # -- per request ---------------------------------------------------------------------------------------------

    def choose(self, position: int = 0, now: Callable[[], float] = time.monotonic) -> Target:
        """The next replica in the rotation that has replayed `position`, else the primary."""
        at = now()
        replicas = self.replicas
        count = len(replicas)
        behind = False
        for step in range(count):
            replica = replicas[(self._turn + step) % count]
            if replica.healthy and at - replica.caught_at <= self.max_lag_s:
                if replica.replayed >= position and replica.pool is not None:
                    self._turn = (self._turn + step + 1) % count
                    self._reads[replica.label].inc()
                    return Target(replica.pool, replica.replayed, replica.label)
                behind = True
        if behind:
            reason = "read_your_writes"
        elif any(r.healthy for r in replicas):
            reason = "lagging"
        else:
            reason = "unavailable"
        self._fallbacks[reason].inc()
        self._primary_reads.inc()
        return self.primary

    def primary_read(self) -> Target:
        """The primary, for a read that must not go to a replica (one run again after a replica failed it)."""
        self._primary_reads.inc()
        return self.primary

    async def target(self, *, write: bool, writer: str | None) -> Target:
        """Where a request runs: the primary for one that writes, else a replica that has the writer's own writes."""
        if write:
            return self.primary
        return self.choose(await self.writers.position(writer) if writer is not None else 0)

    async def wrote(self, writer: str, conn: asyncpg.Pool | None = None, position: int | None = None) -> None:
        """After a writer's write committed: their reads wait for it. `position` when the caller has read it already;
        else it is read from the primary (unknown when that fails: the writer reads from the primary for the TTL)."""
        if position is None:
            try:
                position = await committed_position(conn or self.primary.pool)
            except (PoolExhausted, *CHECK_FAILURES) as exc:
                log.warning(
                    "the primary's WAL position after a write is unknown (%s): the writer reads from the "
                    "primary for WOVEPAPER_READ_YOUR_WRITES_S",
                    type(exc).__name__,
                )
                position = UNKNOWN
        await self.writers.record(writer, position)

    async def replayed_by_all(self, position: int | None) -> None:
        """Returns once every replica in the rotation has replayed `position`, or once the maximum lag and a margin
        have passed (a replica further behind is out of the rotation by then; an unknown position waits that long):
        a CDN purge sent after it is not answered from a replica without the write."""
        deadline = time.monotonic() + self.max_lag_s + PURGE_MARGIN_S
        while time.monotonic() < deadline:
            now = time.monotonic()
            rotation = [r for r in self.replicas if r.usable(now)]
            if position is not None and all(r.replayed >= position for r in rotation):
                return
            await asyncio.sleep(PURGE_POLL_S)

    def usable_count(self) -> int:
        at = time.monotonic()
        return sum(r.usable(at) for r in self.replicas)

    def describe(self) -> str:
        """The replicas' states for /readyz: `1/2 usable (host:5432/db: lagging)`."""
        at = time.monotonic()
        states = ", ".join(f"{r.label}: {'ok' if r.usable(at) else r.state}" for r in self.replicas)
        return f"{self.usable_count()}/{len(self.replicas)} usable ({states})"

    # -- health --------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Health rounds until cancelled."""
        while True:
            started = time.monotonic()
            try:
                await self.check_once()
            except Exception:  # a bug here must not stop the rounds (the replicas would then age out of the rotation)
                log.exception("replica health round failed")
            await asyncio.sleep(max(0.0, HEALTH_EVERY_S - (time.monotonic() - started)))

    async def check_once(self) -> None:
        """One round: the primary's position first, then every replica at once."""
        await self._sample_primary()
        started = time.monotonic()
        await asyncio.gather(*(r.check(started, self.timeline) for r in self.replicas))

    async def _sample_primary(self) -> None:
        # On a connection of its own: a busy pool must not stall the rounds (nor be taken for a lagging replica).
        try:
            async with asyncio.timeout(CHECK_TIMEOUT_S):
                if self._primary_conn is None or self._primary_conn.is_closed():
                    self._primary_conn = await asyncpg.connect(
                        self.primary_dsn,
                        timeout=CHECK_TIMEOUT_S,
                        server_settings={"application_name": "wovepaper-health"},
                    )
                when = time.monotonic()
                position = await written_position(self._primary_conn)
        except CHECK_FAILURES:
            conn, self._primary_conn = self._primary_conn, None
            if conn is not None:
                conn.terminate()
            return  # nothing newer is known: the replicas' lags grow until the primary answers
        self.timeline.sample(when, position)

    async def aclose(self) -> None:
        if self._primary_conn is not None:
            with contextlib.suppress(*CHECK_FAILURES):
                self._primary_conn.terminate()
        await asyncio.gather(*(r.aclose() for r in self.replicas))
