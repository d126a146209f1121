"""Loading many rows into empty tables: COPY first, indexes and constraints after.

Every index updated per row, every foreign key checked per row and every trigger fired per row cost far
more than the COPY itself once a table grows past memory. `deferred_indexes` drops the secondary
indexes, unique constraints, foreign keys and user triggers of the given tables, and gives back what
recreates them; run both inside one transaction, so a failed load leaves the tables as they were.
Primary keys stay: other tables' foreign keys reference them, and appending ascending keys is cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg

# Unique constraints that some foreign key relies on cannot be dropped on their own: they stay.
_CONSTRAINTS = """
SELECT c.conrelid::regclass::text AS tbl, c.conname, c.contype, pg_get_constraintdef(c.oid) AS def
FROM pg_constraint c
WHERE c.conrelid = any($1::regclass[]) AND c.contype IN ('u', 'f')
  AND NOT (c.contype = 'u' AND EXISTS (SELECT 1 FROM pg_constraint r WHERE r.contype = 'f' AND r.conindid = c.conindid))
ORDER BY c.contype DESC, c.conname
"""
# Indexes that back no constraint (a constraint's index goes with it).
_INDEXES = """
SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def
FROM pg_index i
WHERE i.indrelid = any($1::regclass[])
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
ORDER BY 1
"""
_USER_TRIGGERS = """
SELECT DISTINCT tgrelid::regclass::text AS tbl FROM pg_trigger
WHERE tgrelid = any($1::regclass[]) AND NOT tgisinternal
"""


@dataclass(slots=True)
class Deferred:
    """What `deferred_indexes` dropped, in the order that recreates it."""

    indexes: list[str] = field(default_factory=list)
    unique: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)
    triggered: list[str] = field(default_factory=list)  # tables whose user triggers are disabled

    async def restore(self, conn: asyncpg.Connection) -> None:
        """Build the indexes, then the unique constraints, then validate the foreign keys; enable the triggers."""
        for statement in self.indexes + self.unique + self.foreign:
            await conn.execute(statement)
        for table in self.triggered:
            await conn.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")


async def deferred_indexes(conn: asyncpg.Connection, tables: Sequence[str]) -> Deferred:
    """Drop the tables' secondary indexes, unique constraints, foreign keys; disable their user triggers."""
    if not conn.is_in_transaction():
        raise RuntimeError("drop and restore indexes inside one transaction")
    deferred = Deferred()
    names = list(tables)
    for c in await conn.fetch(_CONSTRAINTS, names):
        await conn.execute(f'ALTER TABLE {c["tbl"]} DROP CONSTRAINT "{c["conname"]}"')
        statement = f'ALTER TABLE {c["tbl"]} ADD CONSTRAINT "{c["conname"]}" {c["def"]}'
        (deferred.foreign if c["contype"] == "f" else deferred.unique).append(statement)
    for i in await conn.fetch(_INDEXES, names):
        await conn.execute(f"DROP INDEX {i['name']}")
        deferred.indexes.append(i["def"])
    for t in await conn.fetch(_USER_TRIGGERS, names):
        await conn.execute(f"ALTER TABLE {t['tbl']} DISABLE TRIGGER USER")
        deferred.triggered.append(t["tbl"])
    return deferred


async def copy_rows(conn: asyncpg.Connection, table: str, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    if rows:
        await conn.copy_records_to_table(table, records=rows, columns=list(columns))


# Identity columns filled with explicit ids by COPY: their sequences continue after the largest.
async def continue_identity(conn: asyncpg.Connection, table: str) -> None:
    await conn.execute(
        f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), coalesce(max(id), 0) + 1, false) FROM {table}"
    )


# The researcher-institution spans, as apply_authorship_matches keeps them, from all authorships at once.
INSERT_ALL_RESEARCHER_INSTITUTIONS = """
INSERT INTO researcher_institutions (researcher_id, institution_id, first_year, last_year)
SELECT a.researcher_id, ai.institution_id,
       min(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer,
       max(extract(year FROM p.published AT TIME ZONE 'UTC'))::integer
FROM authorship_institutions ai
JOIN authorships a ON a.paper_id = ai.paper_id AND a.position = ai.position
JOIN papers p ON p.id = ai.paper_id
WHERE a.researcher_id IS NOT NULL
GROUP BY a.researcher_id, ai.institution_id
"""


async def fill_researcher_institutions(conn: asyncpg.Connection) -> None:
    await conn.execute(INSERT_ALL_RESEARCHER_INSTITUTIONS)


async def rebuild_derived(conn: asyncpg.Connection) -> None:
    """Tables the papers' triggers keep (disabled during the load): built again from the papers, once."""
    for rebuild in (
        "wp_rebuild_paper_listing",
        "wp_rebuild_feed_listing",
        # Institutions' papers, fields and members (migration 0027), from the live definitions at once.
        "wp_rebuild_institution_figures",
    ):
        if await conn.fetchval("SELECT to_regproc($1::text) IS NOT NULL", rebuild):
            await conn.execute(f"SELECT {rebuild}()")


async def is_empty(conn: asyncpg.Connection, tables: Sequence[str]) -> bool:
    """Whether none of the tables has a row."""
    for table in tables:
        if await conn.fetchval(f"SELECT EXISTS (SELECT 1 FROM {table})"):
            return False
    return True


async def analyze(conn: asyncpg.Connection) -> None:
    await conn.execute("ANALYZE")


async def vacuum(conn: asyncpg.Connection) -> None:
    """Every table's visibility map set (COPYed pages are not marked all-visible until vacuumed), so index-only
    scans need no heap visit from the first request on (what a benchmark should see)."""
    await conn.execute("VACUUM")
