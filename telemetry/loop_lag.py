"""How late each worker's event loop runs: the wait every ready request has behind the others' work.

One process answers many requests on one thread. A request that has its PostgreSQL rows back is ready to go on, and
waits until the loop has run everything queued before it; a page with four waits in a row pays that four times. The
watcher sleeps `interval_s` again and again and records how much later than asked it woke
(`wovepaper_event_loop_lag_seconds`). A p99 of a few milliseconds is a worker with room; tens of milliseconds, a
worker near its CPU (add workers or pods, docs/operations.md); a single large value, a stall (a long synchronous
step, a full collection).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from telemetry.metrics import EVENT_LOOP_LAG

INTERVAL_S: Final = 0.05


async def watch(interval_s: float = INTERVAL_S, also: Callable[[float], None] | None = None) -> None:
    """Records the loop's lateness every `interval_s` until cancelled (a timer a second costs nothing measurable),
    and hands each to `also` (the site's strain: db/cache/strain.py)."""
    loop = asyncio.get_running_loop()
    observe = EVENT_LOOP_LAG.observe
    while True:
        due = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        late = max(loop.time() - due, 0.0)
        observe(late)
        if also is not None:
            also(late)
