"""db.connection.read_only: a read-only transaction whose settings come in the round trip that begins it."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from db.connection import read_only
from tests.integration.graph_support import StatementCounter


async def test_settings_hold_inside_only_and_a_failure_leaves_the_connection_clean(empty_database: str) -> None:
    conn = await asyncpg.connect(empty_database)
    counter = StatementCounter()
    conn.add_query_logger(counter)
    try:
        default = await conn.fetchval("SHOW work_mem")
        await asyncio.sleep(0)  # the logger is called soon after each statement
        counter.reset()
        async with read_only(conn, "SET LOCAL work_mem = '7MB'; SET LOCAL enable_seqscan = off"):
            assert await conn.fetchval("SHOW work_mem") == "7MB"
            assert await conn.fetchval("SHOW enable_seqscan") == "off"
            assert await conn.fetchval("SHOW transaction_read_only") == "on"
        await asyncio.sleep(0)
        # The begin with its settings in one round trip, the three reads, the commit.
        assert len(counter.statements) == 5 and counter.statements[-1] == "COMMIT", counter.statements
        assert await conn.fetchval("SHOW work_mem") == default and not conn.is_in_transaction()
        # A statement that fails inside: rolled back, the settings gone, the connection usable at once.
        with pytest.raises(asyncpg.DivisionByZeroError):
            async with read_only(conn, "SET LOCAL work_mem = '7MB'"):
                await conn.fetchval("SELECT 1 / 0")
        assert not conn.is_in_transaction() and await conn.fetchval("SHOW work_mem") == default
    finally:
        await conn.close()
