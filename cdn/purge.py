"""The CDN purge hook: POSTs the tags an invalidation made stale to WOVEPAPER_PURGE_URL.

The body is `{"tags": ["paper:12", "researcher:7", "lists", ...]}`, the names responses carry in
`Surrogate-Key` / `Cache-Tag`, at most TAGS_PER_REQUEST a request; a small adapter at that URL turns it into the
CDN's own purge call, and can tell the API from strangers by WOVEPAPER_PURGE_TOKEN (`Authorization: Bearer`).
A passing failure (a timeout, a refused connection, 429 or 5xx) is retried by the upstream rules (retry_rules/,
`Retry-After` included); one that lasts is logged, never raised, and the other requests of the purge still go: the
entries it missed expire with their `max-age`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Final

import httpx

from retry_rules import Clock, RetryPolicy, retry_after_seconds

log = logging.getLogger(__name__)

TIMEOUT_S: Final = 5.0
TAGS_PER_REQUEST: Final = 1000
# A purge runs after the ingest's commit, in its process: a few quick attempts, no long waits.
PURGE_RETRY: Final = RetryPolicy(max_attempts=4, base_delay_s=0.5, max_delay_s=5.0, max_retry_after_s=30.0)


class HttpPurge:
    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        client: httpx.AsyncClient | None = None,
        policy: RetryPolicy = PURGE_RETRY,
        clock: Clock | None = None,
    ) -> None:
        self.url = url
        self.client = client or httpx.AsyncClient(timeout=TIMEOUT_S)
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.policy = policy
        self.clock = clock or Clock()

    async def __call__(self, tags: list[str], position: int | None = None) -> None:
        for start in range(0, len(tags), TAGS_PER_REQUEST):
            await self._send(tags[start : start + TAGS_PER_REQUEST])

    async def _send(self, tags: list[str]) -> None:
        for attempt in range(self.policy.max_attempts):
            wait: float | None = None
            try:
                response = await self.client.post(self.url, json={"tags": tags}, headers=self.headers)
            except httpx.TransportError as exc:
                failure = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return
                failure = f"HTTP {response.status_code}"
                if response.status_code not in self.policy.retry_statuses:
                    break
                wait = retry_after_seconds(response.headers.get("retry-after"))
                if wait is not None and wait > self.policy.max_retry_after_s:
                    break
            if attempt + 1 < self.policy.max_attempts:
                await self.clock.sleep(wait if wait is not None else self.policy.backoff_s(attempt, random.random))
        log.warning("CDN purge of %d tags failed: %s", len(tags), failure)

    async def aclose(self) -> None:
        await self.client.aclose()


class BackgroundPurge:
    """Purges a request starts without waiting for them (an API process's writes: a reader's answer must not wait
    on the CDN's hook and its retries). At most `max_pending` run at once; past that a purge is dropped with a
    warning (its entries expire with their `max-age`). `aclose` gives those still running a moment, then cancels
    them."""

    def __init__(
        self,
        purge: HttpPurge,
        *,
        max_pending: int = 64,
        replayed: Callable[[int | None], Awaitable[None]] | None = None,
    ) -> None:
        """`replayed`: returns once the read replicas have a write's WAL position (db/replicas/routing.py): each purge
        waits for it, so that the CDN's next request is not answered from a replica without the write."""
        self.purge = purge
        self.max_pending = max_pending
        self.replayed = replayed
        self._running: set[asyncio.Task[None]] = set()

    async def __call__(self, tags: list[str], position: int | None = None) -> None:
        if len(self._running) >= self.max_pending:
            log.warning("CDN purge of %d tags dropped: %d purges under way", len(tags), len(self._running))
            return
        task = asyncio.create_task(self._after_replicas(tags, position))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _after_replicas(self, tags: list[str], position: int | None) -> None:
        if self.replayed is not None:
            await self.replayed(position)
        await self.purge(tags, position)

    async def aclose(self, *, grace_s: float = 5.0) -> None:
        if self._running:
            _, late = await asyncio.wait(set(self._running), timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self.purge.aclose()
