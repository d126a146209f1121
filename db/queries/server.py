"""What a deployment check asks the PostgreSQL server about itself: its version, whether it is a standby, and
which of the extensions the schema uses it has or can create."""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

# The extensions the migrations create: pg_trgm and unaccent are required, vector (pgvector) gives semantic search.
EXTENSIONS = ("pg_trgm", "unaccent", "vector")

SELECT_SERVER = """
SELECT current_setting('server_version') AS version,
       current_setting('server_version_num')::int AS version_num,
       pg_is_in_recovery() AS in_recovery,
       (SELECT coalesce(array_agg(name::text ORDER BY name), '{}') FROM pg_available_extensions
         WHERE name = ANY($1::text[])) AS available
"""


@dataclass(frozen=True, slots=True)
class ServerFacts:
    version: str  # "17.2 (Debian 17.2-1.pgdg120+1)"
    version_num: int  # 170002
    in_recovery: bool  # a standby: it cannot take writes
    available: tuple[str, ...]  # of EXTENSIONS, those the server has (installed or installable)


async def server_facts(conn: asyncpg.Connection) -> ServerFacts:
    row = await conn.fetchrow(SELECT_SERVER, list(EXTENSIONS))
    assert row is not None
    return ServerFacts(row["version"], row["version_num"], row["in_recovery"], tuple(row["available"]))
