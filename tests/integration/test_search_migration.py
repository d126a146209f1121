"""Migration 0003 applies on a server without pgvector (no embedding table) and with it (table and HNSW); the text
indexes hold the categories too (0030)."""

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


async def test_the_text_indexes_hold_the_categories(make_database) -> None:
    # A search within a category intersects it inside the text index (migration 0030) rather than reading every
    # paper the text matches to reject it; the statement reads the cited tier's index by its name.
    conn = await asyncpg.connect(await make_database("search_mig_categories"))
    try:
        await migrate(conn)
        rows = await conn.fetch(
            """SELECT c.relname AS name, array_agg(a.attname ORDER BY k.n) AS columns,
                      pg_get_expr(i.indpred, i.indrelid) AS pred
               FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k (attnum, n)
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
               WHERE i.indrelid = 'papers'::regclass AND c.relname LIKE 'papers_search%'
               GROUP BY c.relname, i.indpred, i.indrelid ORDER BY c.relname"""
        )
        assert [(r["name"], r["columns"], r["pred"]) for r in rows] == [
            ("papers_search_cited_idx", ["search_vector", "categories"], "(cited_by_count >= 25)"),
            ("papers_search_idx", ["search_vector", "categories"], None),
        ]
    finally:
        await conn.close()
