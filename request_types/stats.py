"""What one request spent on the database and Redis, counted where it is spent (db/pool.py, db/cache/) and reported
in the request's log line and metrics (telemetry/requests.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class RequestStats:
    """SQL statements and their time, and the aggregate cache's answers, of one request's operation."""

    statements: int = 0
    sql_seconds: float = 0.0
    cache_hits: int = 0
    cache_misses: int = 0
    cache_fallbacks: int = 0


@dataclass(slots=True)
class RedisAllowance:
    """What one request may still wait on Redis (db/cache/allowance.py): one timeout in all."""

    # A call of this request timed out or failed: the rest of it goes without Redis.
    spent: bool = False
    # Waits that ran out of time, and Redis uses skipped once spent (in the request's log line).
    timeouts: int = 0
    skipped: int = 0
