"""The retry and backoff rules every upstream client follows: the ingest's sources and the language model.

Which statuses are retried, how long to wait (`Retry-After` as seconds or an HTTP date, else exponential
backoff with jitter), when a requested wait is a stop rather than a pause, and an injectable clock so tests
never sleep. The request loops themselves stay with their clients (ingest/clients/http.py, llm/client.py):
they differ in what a body failure or a spent budget means.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


class Clock:
    """Monotonic time and sleep; tests pass a fake that advances without waiting."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 1.0
    max_delay_s: float = 120.0
    # A Retry-After longer than this is a daily limit, not a pause: stop instead of waiting.
    max_retry_after_s: float = 900.0
    retry_statuses: frozenset[int] = frozenset({408, 425, 429, 500, 502, 503, 504})

    def backoff_s(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        """The wait before retry number `attempt + 1` when the upstream named none.

        Exponential with jitter (half fixed, half random), so parallel clients spread out.
        """
        cap = min(self.max_delay_s, self.base_delay_s * 2**attempt)
        return float(cap / 2 + rng() * cap / 2)


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After: 120` or an HTTP date -> seconds to wait (never negative)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max((when - (now or datetime.now(UTC))).total_seconds(), 0.0)
