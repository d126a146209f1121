"""The asyncpg pool: one per process, opened by the app's lifespan or a CLI command."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import asyncpg
import orjson

QueryLogger = Callable[[Any], None]


async def _init_connection(conn: asyncpg.Connection, query_logger: QueryLogger | None) -> None:
    for name in ("json", "jsonb"):
        await conn.set_type_codec(
            name, encoder=lambda v: orjson.dumps(v).decode(), decoder=orjson.loads, schema="pg_catalog"
        )
    if query_logger is not None:
        conn.add_query_logger(query_logger)


async def _keep_session(conn: asyncpg.Connection) -> None:
    return None


async def create_pool(
    dsn: str,
    *,
    min_size: int = 2,
    max_size: int = 10,
    statement_timeout_ms: int = 5000,
    query_logger: QueryLogger | None = None,
) -> asyncpg.Pool:
    """Open a pool whose every connection carries the statement timeout.

    ``reset=_keep_session``: connections are used for reads and short transactions that always end,
    so asyncpg's per-release reset round trip (RESET ALL, UNLISTEN ...) buys nothing. asyncpg still
    rolls back a transaction left open. (``reset=None`` would mean asyncpg's default reset.)
    """

    async def init(conn: asyncpg.Connection) -> None:
        await _init_connection(conn, query_logger)

    pool = await asyncpg.create_pool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        init=init,
        command_timeout=statement_timeout_ms / 1000 + 1,
        max_inactive_connection_lifetime=300,
        server_settings={
            "statement_timeout": str(statement_timeout_ms),
            "idle_in_transaction_session_timeout": str(max(statement_timeout_ms * 2, 10_000)),
            "application_name": "wovepaper",
        },
        reset=_keep_session,
    )
    assert pool is not None
    return pool
