from __future__ import annotations

import asyncio

import asyncpg

from db.migrate import available_migrations, migrate


async def test_migrate_applies_everything_then_is_a_noop(make_database) -> None:
    dsn = await make_database("mig_twice")
    conn = await asyncpg.connect(dsn)
    try:
        first = await migrate(conn)
        assert first == [m.version for m in available_migrations()]
        tables = {r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")}
        assert {"papers", "researchers", "authorships", "institutions", "researcher_works"} <= tables
        assert await migrate(conn) == []
    finally:
        await conn.close()


async def test_concurrent_migrate_applies_each_file_once(make_database) -> None:
    dsn = await make_database("mig_concurrent")
    conns = [await asyncpg.connect(dsn) for _ in range(2)]
    try:
        results = await asyncio.gather(*(migrate(c) for c in conns))
        applied = sorted(v for r in results for v in r)
        assert applied == sorted(m.version for m in available_migrations())
        count = await conns[0].fetchval("SELECT count(*) FROM schema_migrations")
        assert count == len(available_migrations())
    finally:
        for c in conns:
            await c.close()
