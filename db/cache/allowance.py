"""What one request may wait on Redis: one timeout in all.

The edge opens an allowance for each request (edge/front.py); every wait of the request on Redis (its rate-limit
charge, a persisted document, the response cache, the aggregates, their stores) is bounded by the Redis timeout,
and once one of them timed out or failed, the rest of the request goes without Redis: a frozen Redis costs a
request one timeout, not one per call. Work outside a request (the ingest, the batches that serve many requests)
has no allowance and keeps its own bounds.
"""

from __future__ import annotations

import contextvars

from request_types.stats import RedisAllowance

_current: contextvars.ContextVar[RedisAllowance | None] = contextvars.ContextVar(
    "wovepaper_redis_allowance", default=None
)


class request_allowance:  # noqa: N801 (used as a function: `with request_allowance() as allowance`)
    """Everything awaited inside (and every task started inside) shares one allowance. A class rather than a
    generator-based context manager: it runs once per request."""

    __slots__ = ("allowance", "token")

    def __enter__(self) -> RedisAllowance:
        self.allowance = allowance = RedisAllowance()
        self.token = _current.set(allowance)
        return allowance

    def __exit__(self, *exc: object) -> None:
        _current.reset(self.token)


def current_allowance() -> RedisAllowance | None:
    return _current.get()


def spent() -> bool:
    """Whether the current request must go without Redis from now on (counted as a skip)."""
    allowance = _current.get()
    if allowance is None or not allowance.spent:
        return False
    allowance.skipped += 1
    return True


def note_failure(*, timed_out: bool) -> None:
    """A call of the current request failed (or ran out of time): the rest of it goes without Redis."""
    allowance = _current.get()
    if allowance is not None:
        allowance.spent = True
        if timed_out:
            allowance.timeouts += 1
