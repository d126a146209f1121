"""How busy the site keeps PostgreSQL right now: the statements the API's connections are running (PostgreSQL's
"threads running", the signal background writers yield to)."""

from __future__ import annotations

import asyncpg

from db.pool import APPLICATION_NAME

SELECT_API_STATEMENTS_RUNNING = """
SELECT count(*)::int FROM pg_stat_activity
WHERE state = 'active' AND application_name = $1 AND pid <> pg_backend_pid()
"""


async def api_statements_running(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval(SELECT_API_STATEMENTS_RUNNING, APPLICATION_NAME))
