"""The ingest's share of the database: it pauses in proportion to the time its writes took, as PostgreSQL's
cost-based vacuum delay keeps autovacuum from crowding out the queries it shares the server with.

On a host the API shares (one PostgreSQL for both, a few cores), an ingest writing as fast as it can takes the
cores the site's requests need: at 70 % of the API's saturation a 100,000-record harvest made it refuse thousands
of requests (bench/RESULTS.md, "Round 23"). `WOVEPAPER_INGEST_SHARE` below 1 bounds its transactions to that
share of the time; what its writes make the site recompute afterwards it does not bound. So it also yields: while
an API process says the site is strained (db/cache/strain.py), it waits before its next write, at most
`WOVEPAPER_INGEST_YIELD_S` at a time, so that a site strained for good still gets a write through now and then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

log = logging.getLogger(__name__)

# How often a yielding ingest asks whether the site is still strained (a mark holds 1 s).
POLL_S: Final = 0.25


@dataclass
class DutyCycle:
    """Writes at most `share` of the time: for `busy_s` seconds owed, `pay()` waits `busy_s x (1 - share) / share`,
    then, given `strained` (why the site is strained, or None), waits while it says so, at most `yield_s`. The
    caller pays where nothing it wrote is still waiting to be seen (the cache told, the transaction ended)."""

    share: float = 1.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    strained: Callable[[], Awaitable[str | None]] | None = None
    yield_s: float = 0.0
    paused_s: float = 0.0
    yielded_s: float = 0.0
    owed_s: float = 0.0
    owing: bool = False  # a write since the last payment that owes a pause or a look at the site

    def __post_init__(self) -> None:
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"share must be in (0, 1], not {self.share}")

    @property
    def yields(self) -> bool:
        return self.strained is not None and self.yield_s > 0.0

    def owe(self, busy_s: float) -> None:
        if self.share < 1.0 and busy_s > 0.0:
            self.owed_s += busy_s
        self.owing = self.owed_s > 0.0 or self.yields

    async def pay(self) -> None:
        pause = self.owed_s * (1.0 - self.share) / self.share
        self.owed_s = 0.0
        self.owing = False
        if pause > 0.0:
            self.paused_s += pause
            await self.sleep(pause)
        if self.yields:
            await self._yield()

    async def _yield(self) -> None:
        assert self.strained is not None
        waited = 0.0
        while waited < self.yield_s and (why := await self.strained()) is not None:
            if waited == 0.0:
                log.debug("the site is strained (%s): the ingest waits", why)
            step = min(POLL_S, self.yield_s - waited)
            await self.sleep(step)
            waited += step
        self.yielded_s += waited
        if waited >= self.yield_s:
            log.info("the site stayed strained for %.0f s: the ingest writes once more", waited)

    async def after(self, busy_s: float) -> None:
        """Owe `busy_s` and pay at once (a write already seen by the time it returns)."""
        self.owe(busy_s)
        await self.pay()
