"""The ingest's share of the database: it pauses in proportion to the time its writes took, as PostgreSQL's
cost-based vacuum delay keeps autovacuum from crowding out the queries it shares the server with; and before each
write it waits while the site keeps the database busy, as background writers yield to a database's load (Vitess'
throttler, GitHub's freno: the statements running).

On a host the API shares (one PostgreSQL for both, a few cores), an ingest writing as fast as it can takes the
cores the site's requests need: at 70 % of the API's saturation a 100,000-record harvest made it refuse thousands
of requests (bench/RESULTS.md, "Round 23"). `WOVEPAPER_INGEST_SHARE` below 1 bounds its transactions to that
share of the time, whatever the site is doing; `WOVEPAPER_INGEST_YIELD_ACTIVE` starts each one when the site
leaves room for it. What its writes make the site recompute afterwards neither bounds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

import asyncpg

from db.queries.site_load import api_statements_running

# How the site's load is read before a write: the mean of a few samples (one is mostly 0 or a burst), again after a
# pause while it is at or over the bound, and never for longer than MAX_YIELD_S at a time: a site busy for good
# slows the ingest down, it does not stop it.
SAMPLES: Final = 5
SAMPLE_GAP_S: Final = 0.02
RETRY_S: Final = 0.25
MAX_YIELD_S: Final = 30.0


@dataclass
class DutyCycle:
    """Writes at most `share` of the time: for `busy_s` seconds owed, `pay()` waits `busy_s x (1 - share) / share`.
    The caller pays where nothing it wrote is still waiting to be seen (the cache told, the transaction ended)."""

    share: float = 1.0
    # Statements the API runs at once (a mean over SAMPLES) at or over which a write waits; 0: never.
    yield_active: float = 0.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    site_load: Callable[[asyncpg.Connection], Awaitable[int]] = api_statements_running
    clock: Callable[[], float] = time.monotonic
    paused_s: float = 0.0
    yielded_s: float = 0.0
    owed_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"share must be in (0, 1], not {self.share}")
        if self.yield_active < 0.0:
            raise ValueError(f"yield_active must be 0 or more, not {self.yield_active}")

    async def before_write(self, conn: asyncpg.Connection) -> None:
        """Waits (at most MAX_YIELD_S) while the API keeps `yield_active` statements or more running on the
        database, read through `conn` (free: no statement of the ingest's own on it)."""
        if self.yield_active <= 0.0:
            return
        began = self.clock()
        while await self._site_load(conn) >= self.yield_active and self.clock() - began < MAX_YIELD_S:
            await self.sleep(RETRY_S)
        self.yielded_s += self.clock() - began

    async def _site_load(self, conn: asyncpg.Connection) -> float:
        total = 0
        for i in range(SAMPLES):
            if i:
                await self.sleep(SAMPLE_GAP_S)
            total += await self.site_load(conn)
        return total / SAMPLES

    @property
    def owing(self) -> bool:
        return self.owed_s > 0.0

    def owe(self, busy_s: float) -> None:
        if self.share < 1.0 and busy_s > 0.0:
            self.owed_s += busy_s

    async def pay(self) -> None:
        pause = self.owed_s * (1.0 - self.share) / self.share
        self.owed_s = 0.0
        if pause > 0.0:
            self.paused_s += pause
            await self.sleep(pause)

    async def after(self, busy_s: float) -> None:
        """Owe `busy_s` and pay at once (a write already seen by the time it returns)."""
        self.owe(busy_s)
        await self.pay()
