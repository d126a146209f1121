from __future__ import annotations

import asyncio
import os
import re
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import asyncpg

from db.migrate import available_migrations, migrate

ROOT = Path(__file__).resolve().parents[2]


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


async def test_migrate_before_a_version_leaves_the_database_as_an_earlier_release_did(make_database) -> None:
    conn = await asyncpg.connect(await make_database("mig_before"))
    try:
        versions = [m.version for m in available_migrations()]
        assert await migrate(conn, before="0010") == [v for v in versions if v < "0010"]
        assert await migrate(conn) == [v for v in versions if v >= "0010"]
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


async def test_migrate_command_from_two_processes_at_once(make_database) -> None:
    dsn = await make_database("mig_two_processes")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")} | {"DATABASE_URL": dsn}
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cli", "migrate", cwd=ROOT, env=env, stdout=PIPE, stderr=PIPE
        )
        for _ in range(2)
    ]
    outputs = await asyncio.gather(*(p.communicate() for p in procs))
    assert [p.returncode for p in procs] == [0, 0], [err.decode() for _, err in outputs]
    counts = sorted(int(re.match(rb"applied (\d+) migration", out).group(1)) for out, _ in outputs)
    total = len(available_migrations())
    # Whichever process got the lock first applied everything; the other found nothing left to do.
    assert counts == [0, total]
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in rows] == [m.version for m in available_migrations()]
        assert await conn.fetchval("SELECT to_regclass('papers') IS NOT NULL")
    finally:
        await conn.close()


async def test_tables_read_from_their_indexes_alone_are_vacuumed_soon_after_an_ingest(make_database) -> None:
    """Migration 0031: the tables the site reads by index-only scans are vacuumed (their visibility maps brought
    up to date) after inserts of 1 % of their rows (the listings: 0.1 %, and dead rows of 0.1 %), not
    PostgreSQL's 20 %: an ingest of a few per cent of the archive would otherwise turn each of those reads into
    heap visits (round 19 in bench/RESULTS.md)."""
    conn = await asyncpg.connect(await make_database("mig_vacuum"))
    try:
        await migrate(conn)
        rows = await conn.fetch(
            "SELECT c.relname, c.reloptions FROM pg_class c"
            " WHERE c.relname = ANY($1::text[]) AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace",
            list(INDEX_ONLY_READ),
        )
        options = {r["relname"]: dict(o.split("=", 1) for o in r["reloptions"] or []) for r in rows}
        assert set(options) == INDEX_ONLY_READ
        for table, opts in options.items():
            listing = table in LISTINGS
            assert float(opts["autovacuum_vacuum_insert_scale_factor"]) <= (0.001 if listing else 0.01), table
            assert float(opts["autovacuum_vacuum_scale_factor"]) <= (0.001 if listing else 0.05), table
    finally:
        await conn.close()


# Tables whose hot reads are index-only scans (migrations 0015, 0016, 0026, 0028).
INDEX_ONLY_READ = {
    "papers",
    "authorships",
    "authorship_institutions",
    "paper_categories",
    "researcher_papers",
    "institution_papers",
}
# The narrow listings an owner's or a category's page reads in order (0015, 0028).
LISTINGS = {"paper_categories", "researcher_papers", "institution_papers"}
