"""Where the primary's write-ahead log is, and how far a hot standby has replayed it.

Positions are WAL positions (LSNs) as byte offsets (asyncpg reads `pg_lsn` as an int). Two positions of the
primary serve two purposes:
- after a write, `pg_current_wal_insert_lsn()`: the end of every record inserted so far, so it covers a commit
  whether or not it waited for the disk (the ingest's pages commit with `synchronous_commit = off`, and are visible
  before their commit record is written). A standby reaches it once the WAL is flushed and sent;
- for measuring lag, `pg_current_wal_lsn()`: the WAL written so far, exactly where a standby's replay stops on an
  idle primary (the insert position may sit a page header further, which no standby reaches until the next record).
"""

from __future__ import annotations

from typing import NamedTuple

from db.connection import ConnOrPool

COMMITTED = "SELECT pg_current_wal_insert_lsn()"
WRITTEN = "SELECT pg_current_wal_lsn()"
STANDBY = "SELECT pg_is_in_recovery() AS in_recovery, pg_last_wal_replay_lsn() AS replayed"


class StandbyStatus(NamedTuple):
    in_recovery: bool
    # None on a server that is not a standby (or one that has replayed nothing yet).
    replayed: int | None


async def committed_position(conn: ConnOrPool) -> int:
    """On the primary, after a write committed: a position every replica that has the write has replayed."""
    return int(await conn.fetchval(COMMITTED))


async def written_position(conn: ConnOrPool) -> int:
    """On the primary: the WAL written so far (a replica that has replayed it has everything the primary had)."""
    return int(await conn.fetchval(WRITTEN))


async def standby_status(conn: ConnOrPool) -> StandbyStatus:
    """Whether the server is a standby (in recovery), and how far it has replayed the primary's WAL."""
    row = await conn.fetchrow(STANDBY)
    assert row is not None
    replayed = row["replayed"]
    return StandbyStatus(bool(row["in_recovery"]), int(replayed) if replayed is not None else None)
