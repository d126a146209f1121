"""Read-your-writes: the WAL position of each writer's latest write, for WOVEPAPER_READ_YOUR_WRITES_S.

A writer is a signed-in reader (`viewer:<sub>`) or, without a token, an API key (`key:<id>`). The position goes to
Redis, which every process reads, and to this process's memory. A lookup takes the higher of the two: memory
covers what this process recorded while Redis was down. With several processes, a write recorded while Redis was
down is known to the process that took it only; another process may then read for that writer from a replica
that has not replayed it, for at most the replicas' maximum lag.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from db.cache import keys
from db.cache.positions import raise_positions, read_positions
from db.cache.store import CacheStore, Unavailable

# Memory for this process's own writers' positions: the oldest are forgotten past it.
MEMORY_BYTES: Final = 1_000_000
ENTRY_OVERHEAD: Final = 120


class WritePositions:
    def __init__(
        self,
        cache: CacheStore | None,
        ttl_s: float,
        *,
        max_bytes: int = MEMORY_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cache = cache if cache is not None and cache.redis is not None else None
        self.ttl_s = ttl_s
        self.max_bytes = max_bytes
        self.clock = clock
        self._memory: OrderedDict[str, tuple[float, int]] = OrderedDict()  # principal -> (expires, position)
        self._bytes = 0

    async def position(self, principal: str) -> int:
        """The position the writer's reads must see (0: none within the TTL)."""
        held = self._memory.get(principal)
        mine = 0
        if held is not None:
            if held[0] > self.clock():
                mine = held[1]
            else:
                self._forget(principal)
        if self.cache is None:
            return mine
        found = await read_positions(self.cache, [keys.write_position(self.cache.namespace, principal)])
        return mine if isinstance(found, Unavailable) else max(mine, found[0])

    async def record(self, principal: str, position: int) -> None:
        """After the writer's write committed (never raises: Redis down leaves it in memory only)."""
        self._keep(principal, position)
        if self.cache is not None:
            name = keys.write_position(self.cache.namespace, principal)
            await raise_positions(self.cache, [name], position, math.ceil(self.ttl_s))

    def _keep(self, principal: str, position: int) -> None:
        held = self._memory.get(principal)
        if held is not None:
            position = max(position, held[1])
            self._forget(principal)
        self._memory[principal] = (self.clock() + self.ttl_s, position)
        self._bytes += len(principal) + ENTRY_OVERHEAD
        while self._bytes > self.max_bytes and self._memory:
            self._forget(next(iter(self._memory)))

    def _forget(self, principal: str) -> None:
        if self._memory.pop(principal, None) is not None:
            self._bytes -= len(principal) + ENTRY_OVERHEAD
