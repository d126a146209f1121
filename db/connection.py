"""The connection types the reads and writes take."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import asyncpg
from asyncpg.pool import PoolConnectionProxy

# A plain connection or one acquired from the pool.
Conn = asyncpg.Connection | PoolConnectionProxy
# Statements that need no transaction of their own may run on the pool itself.
ConnOrPool = Conn | asyncpg.Pool


@contextlib.asynccontextmanager
async def read_only(conn: Conn, settings: str) -> AsyncIterator[Conn]:
    """A read-only transaction whose `settings` (`SET LOCAL ...`: a search's planner settings) are made in the
    round trip that begins it; `conn.transaction(readonly=True)` and then `execute(settings)` take two. Each round
    trip of a request waits behind the rest of its worker's work under load (docs/performance.md)."""
    await conn.execute(f"BEGIN READ ONLY; {settings}")
    try:
        yield conn
    except BaseException:
        if not conn.is_closed():
            # Best effort: a connection that cannot roll back is closed by the pool rather than lent again.
            with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")
