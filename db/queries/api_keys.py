"""API keys: only the sha256 of a key is stored; its prefix names it in listings and revocations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from db.connection import Conn


@dataclass(frozen=True, slots=True)
class ApiKeyRow:
    id: int
    name: str
    prefix: str | None
    points_per_hour: int | None
    allowed_origins: tuple[str, ...]
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


_COLUMNS = "id, name, prefix, points_per_hour, allowed_origins, created_at, last_used_at, revoked_at"

INSERT_API_KEY = f"""
INSERT INTO api_keys (key_hash, prefix, name, points_per_hour, allowed_origins)
VALUES ($1, $2, $3, $4, $5)
RETURNING {_COLUMNS}
"""
SELECT_API_KEYS = f"SELECT {_COLUMNS} FROM api_keys ORDER BY id"
# A use: the check a server makes every few seconds per key in use; it records the use as it reads.
USE_API_KEY = f"""
UPDATE api_keys SET last_used_at = now()
WHERE key_hash = $1 AND revoked_at IS NULL
RETURNING {_COLUMNS}
"""
REVOKE_API_KEY = f"""
UPDATE api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE prefix = $1 OR id::text = $1
RETURNING {_COLUMNS}
"""


def _row(r: asyncpg.Record) -> ApiKeyRow:
    return ApiKeyRow(
        r["id"],
        r["name"],
        r["prefix"],
        r["points_per_hour"],
        tuple(r["allowed_origins"]),
        r["created_at"],
        r["last_used_at"],
        r["revoked_at"],
    )


async def insert_api_key(
    conn: Conn,
    *,
    key_hash: bytes,
    prefix: str,
    name: str,
    points_per_hour: int | None,
    allowed_origins: Sequence[str],
) -> ApiKeyRow:
    row = await conn.fetchrow(INSERT_API_KEY, key_hash, prefix, name, points_per_hour, list(allowed_origins))
    assert row is not None
    return _row(row)


async def fetch_api_keys(conn: Conn) -> list[ApiKeyRow]:
    return [_row(r) for r in await conn.fetch(SELECT_API_KEYS)]


async def use_api_key(conn: Conn, *, key_hash: bytes) -> ApiKeyRow | None:
    """The key's row when it exists and is not revoked, marking it used."""
    row = await conn.fetchrow(USE_API_KEY, key_hash)
    return _row(row) if row is not None else None


async def revoke_api_key(conn: Conn, *, prefix_or_id: str) -> ApiKeyRow | None:
    row = await conn.fetchrow(REVOKE_API_KEY, prefix_or_id)
    return _row(row) if row is not None else None
