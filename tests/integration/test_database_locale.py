"""The databases the project creates: text search and ordering behave the same whatever locale they get."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest


@pytest.fixture
async def conn(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(database_url)
    tx = c.transaction()
    await tx.start()
    yield c  # what a test writes is rolled back
    await tx.rollback()
    await c.close()


async def test_postgresql_17_and_later_get_the_builtin_c_utf8_locale(conn: asyncpg.Connection) -> None:
    provider, locale = await conn.fetchrow(
        "SELECT datlocprovider::text, "
        + ("datlocale" if conn.get_server_version().major >= 17 else "NULL")
        + " FROM pg_database WHERE datname = current_database()"
    )
    if conn.get_server_version().major >= 17:
        assert (provider, locale) == ("b", "C.UTF-8")
    else:
        assert provider in ("c", "i")


async def test_search_vectors_fold_case_beyond_ascii(conn: asyncpg.Connection) -> None:
    await conn.execute(
        "INSERT INTO papers (arxiv_id, version, slug, title, abstract, authors_text, categories, primary_category,"
        " published, updated) VALUES ('2401.99991', 1, '2401.99991-x', 'ÜBER ÉQUATIONS DE ŁUKASIEWICZ', "
        " 'ΣΦΑΙΡΑ and МОСКВА', 'JÜRGEN MÜLLER', '{math.LO}', 'math.LO', now(), now())"
    )
    found = await conn.fetchval(
        "SELECT arxiv_id FROM papers WHERE search_vector @@ plainto_tsquery('english', $1)"
        " AND search_vector @@ plainto_tsquery('simple', $2)",
        "über équations łukasiewicz σφαιρα москва",
        "jürgen müller",
    )
    assert found == "2401.99991"


async def test_text_orders_by_code_point(conn: asyncpg.Connection) -> None:
    words = ["b", "B", "a", "Z", "é", "e", "Ω", "10", "9"]
    ordered = await conn.fetchval("SELECT array_agg(w ORDER BY w) FROM unnest($1::text[]) AS w", words)
    assert ordered == sorted(words)
