"""One ingest run per stage: PostgreSQL session advisory locks, and who holds one.

A lock is held by the connection the run works on, so it goes when the run does: a process that exits, crashes or
is killed closes its connection and PostgreSQL releases the lock at once (a host that vanishes: once the server's
TCP keepalives give up on it, see `ingest.runner.connect`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

# The first half of every ingest lock's two-part key ("wvpg"); the stage is the second half. Two-part keys live
# apart from one-part ones such as `migrate`'s, so they never collide with it.
LOCK_CLASS = 0x7776_7067

TRY_LOCK = "SELECT pg_try_advisory_lock($1::int, $2::int)"
UNLOCK = "SELECT pg_advisory_unlock($1::int, $2::int)"
# pg_locks keeps a two-part key's halves in classid and objid (as oids) with objsubid 2.
SELECT_HOLDER = """
SELECT l.pid, a.application_name, host(a.client_addr) AS client_addr, a.backend_start
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = $1::int::oid AND l.objid = $2::int::oid
LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class LockHolder:
    backend_pid: int
    application_name: str | None  # the run's own name for itself (`wovepaper-ingest <stage> <host>:<pid>`)
    client_addr: str | None  # None over a Unix socket
    since: datetime | None  # when its connection opened

    def describe(self) -> str:
        who = self.application_name or "another session"
        where = f" from {self.client_addr}" if self.client_addr else ""
        since = f", connected since {self.since.isoformat(timespec='seconds')}" if self.since else ""
        return f"{who}{where} (PostgreSQL backend {self.backend_pid}{since})"


async def try_lock(conn: asyncpg.Connection, stage: int) -> bool:
    """Take the stage's lock for this session if no session holds it; never waits."""
    return bool(await conn.fetchval(TRY_LOCK, LOCK_CLASS, stage))


async def unlock(conn: asyncpg.Connection, stage: int) -> None:
    await conn.fetchval(UNLOCK, LOCK_CLASS, stage)


async def lock_holder(conn: asyncpg.Connection, stage: int) -> LockHolder | None:
    """The session holding the stage's lock, or None (it was released meanwhile). Another role's session shows
    its backend id only, unless this role may read every session's activity (pg_read_all_stats)."""
    row = await conn.fetchrow(SELECT_HOLDER, LOCK_CLASS, stage)
    if row is None:
        return None
    return LockHolder(row["pid"], row["application_name"], row["client_addr"], row["backend_start"])
