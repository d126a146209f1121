"""Migration 0003 applies on a server without pgvector (no embedding table) and with it (table and HNSW)."""

from __future__ import annotations

import os
import uuid

import asyncpg
import pytest

from db.admin import create_database
from db.migrate import migrate
from db.queries.embeddings import has_embeddings

# The machine's PostgreSQL (Debian's 15, no pgvector) unless the session's own server already lacks it.
NO_VECTOR_CANDIDATES = [os.environ.get("WOVEPAPER_TEST_NO_VECTOR_URL", "postgresql://postgres@127.0.0.1:5432/postgres")]


async def _vector_available(conn: asyncpg.Connection) -> bool:
    return bool(await conn.fetchval("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"))


def _swap_db(dsn: str, name: str) -> str:
    head, sep, query = dsn.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}{sep}{query}"


async def test_migration_on_the_session_server(make_database) -> None:
    conn = await asyncpg.connect(await make_database("search_mig"))
    try:
        await migrate(conn)
        available = await _vector_available(conn)
        assert await has_embeddings(conn) == available
        if available:
            indexdef = await conn.fetchval(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'paper_embeddings_hnsw_idx'"
            )
            assert "hnsw" in indexdef and "vector_cosine_ops" in indexdef
    finally:
        await conn.close()


async def test_migration_applies_without_pgvector(pg_admin_dsn: str) -> None:
    for admin_dsn in [pg_admin_dsn, *NO_VECTOR_CANDIDATES]:
        try:
            admin = await asyncpg.connect(admin_dsn, timeout=3)
        except (OSError, asyncpg.PostgresError):
            continue
        try:
            if await _vector_available(admin):
                continue
            name = f"wovepaper_test_novec_{uuid.uuid4().hex[:10]}"
            await create_database(admin, name)
            try:
                conn = await asyncpg.connect(_swap_db(admin_dsn, name))
                try:
                    applied = await migrate(conn)
                    assert "0003_search" in applied
                    assert not await has_embeddings(conn)
                    assert await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'vector'") == 0
                    assert await migrate(conn) == []
                finally:
                    await conn.close()
            finally:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        finally:
            await admin.close()
    pytest.skip("no PostgreSQL without pgvector reachable")
