"""Staging tables: COPY a batch into a temporary table that the upserts then read."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import asyncpg

# Staging tables exist for one transaction: ON COMMIT DROP, and truncated when a transaction
# writes twice. Planner statistics matter once a batch is large, hence the ANALYZE.
_ANALYZE_FROM_ROWS = 1000


async def stage(
    conn: asyncpg.Connection,
    table: str,
    ddl: str,
    columns: Sequence[str],
    rows: list[tuple[Any, ...]],
    *,
    analyze: bool = True,
) -> None:
    """Fill a staging table. `analyze=False` where the statements reading it only look rows up by key:
    there the planner's row estimate from the table's size is enough, and ANALYZE costs more than it saves."""
    if not conn.is_in_transaction():
        raise RuntimeError("bulk writes must run inside the caller's transaction")
    await conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({ddl}) ON COMMIT DROP")
    await conn.execute(f"TRUNCATE {table}")
    if rows:
        await conn.copy_records_to_table(table, records=rows, columns=list(columns))
        if analyze and len(rows) >= _ANALYZE_FROM_ROWS:
            await conn.execute(f"ANALYZE {table}")


def ids_of(rows: Iterable[asyncpg.Record], column: str) -> set[int]:
    return {r[column] for r in rows if r[column] is not None}
