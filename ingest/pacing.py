"""The ingest's share of the database: it pauses in proportion to the time its writes took, as PostgreSQL's
cost-based vacuum delay keeps autovacuum from crowding out the queries it shares the server with.

On a host the API shares (one PostgreSQL for both, a few cores), an ingest writing as fast as it can takes the
cores the site's requests need: at 70 % of the API's saturation a 100,000-record harvest made it refuse thousands
of requests (bench/RESULTS.md, "Round 23"). `WOVEPAPER_INGEST_SHARE` below 1 bounds its transactions to that
share of the time; what its writes make the site recompute afterwards it does not bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass
class DutyCycle:
    """Writes at most `share` of the time: for `busy_s` seconds owed, `pay()` waits `busy_s x (1 - share) / share`.
    The caller pays where nothing it wrote is still waiting to be seen (the cache told, the transaction ended)."""

    share: float = 1.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    paused_s: float = 0.0
    owed_s: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"share must be in (0, 1], not {self.share}")

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
