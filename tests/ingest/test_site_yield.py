"""The ingest yields to the site: before a write it waits while the API's connections keep statements running."""

from __future__ import annotations

import asyncio
import time

import asyncpg

from db.pool import APPLICATION_NAME
from db.queries.site_load import api_statements_running
from ingest.pacing import DutyCycle


async def test_a_write_waits_for_the_site_s_statements_to_end(conn: asyncpg.Connection, ingest_dsn: str) -> None:
    site = [await asyncpg.connect(ingest_dsn, server_settings={"application_name": APPLICATION_NAME}) for _ in "ab"]
    other = await asyncpg.connect(ingest_dsn, server_settings={"application_name": "psql"})
    try:
        assert await api_statements_running(conn) == 0
        # Two of the API's statements and someone else's, running for a second.
        running = [asyncio.create_task(c.execute("SELECT pg_sleep(1.2)")) for c in (*site, other)]
        await asyncio.sleep(0.3)
        assert await api_statements_running(conn) == 2  # not the other session's, not this one's
        began = time.monotonic()
        pacing = DutyCycle(yield_active=2)
        await pacing.before_write(conn)
        waited = time.monotonic() - began
        assert waited >= 0.6 and pacing.yielded_s >= 0.6, waited  # until they ended
        assert all(t.done() for t in running[:2])
        await asyncio.gather(*running)
        # One statement is under a bound of two: no wait.
        one = asyncio.create_task(site[0].execute("SELECT pg_sleep(1)"))
        await asyncio.sleep(0.2)
        began = time.monotonic()
        await DutyCycle(yield_active=2).before_write(conn)
        assert time.monotonic() - began < 0.5
        await one
    finally:
        for c in (*site, other):
            await c.close()
