"""Apply db/migrations/*.sql in order, once each, under an advisory lock."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import asyncpg

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Any fixed 64-bit number: two `migrate` runs at once queue on it instead of racing.
LOCK_KEY = 0x77_6F_76_65_70_61_70

CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    text PRIMARY KEY,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


class MigrationError(Exception):
    """An applied migration file was edited afterwards."""


@dataclass(frozen=True, slots=True)
class Migration:
    version: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def available_migrations(directory: Path = MIGRATIONS_DIR) -> list[Migration]:
    return [Migration(p.stem, p.read_text()) for p in sorted(directory.glob("*.sql"))]


async def applied_versions(conn: asyncpg.Connection) -> dict[str, str]:
    exists = await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL")
    if not exists:
        return {}
    rows = await conn.fetch("SELECT version, checksum FROM schema_migrations")
    return {r["version"]: r["checksum"] for r in rows}


async def pending_migrations(conn: asyncpg.Connection) -> list[Migration]:
    done = await applied_versions(conn)
    return [m for m in available_migrations() if m.version not in done]


async def migrate(conn: asyncpg.Connection, *, before: str | None = None) -> list[str]:
    """Apply what is pending, each file in its own transaction; return the versions applied. `before`: only the
    migrations older than that version (a database as an earlier release left it, for upgrade tests)."""
    await conn.execute("SELECT pg_advisory_lock($1)", LOCK_KEY)
    try:
        await conn.execute(CREATE_TABLE)
        done = await applied_versions(conn)
        applied: list[str] = []
        for m in available_migrations():
            if before is not None and m.version >= before:
                break
            if m.version in done:
                if done[m.version] != m.checksum:
                    raise MigrationError(f"migration {m.version} was changed after it was applied")
                continue
            async with conn.transaction():
                await conn.execute(m.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)", m.version, m.checksum
                )
            applied.append(m.version)
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_KEY)
