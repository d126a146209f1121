"""Statements over a batch of keys answer the same in both forms, and a batch of one keeps one generic plan."""

from __future__ import annotations

import asyncpg

from db.keys import Keyed, keyed
from db.queries.papers import SELECT_AUTHORSHIPS_WITH_RESEARCHERS, SELECT_PAPERS_BY_IDS
from db.queries.researchers import SELECT_RESEARCHERS_WITH_AFFILIATIONS

LISTED = Keyed.of("SELECT k.id, k.id * 2 AS twice FROM {keys} AS k(id) ORDER BY k.id")
ORDERED = Keyed.of("SELECT k.word, k.ord FROM {keys_ord} AS k(word, ord) ORDER BY k.ord", "text")
MEMBERS = Keyed.of("SELECT g FROM generate_series(1, 10) AS g WHERE g::bigint {in_keys} ORDER BY g")


async def test_one_key_and_many_keys_give_the_same_rows(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        for keys in ([7], [3, 7], [9, 2, 2]):
            rows = await conn.fetch(*LISTED.bind(keys))
            assert [(r["id"], r["twice"]) for r in rows] == sorted((k, 2 * k) for k in keys)
            assert [r["g"] for r in await conn.fetch(*MEMBERS.bind(keys))] == sorted(set(keys))
        for words in (["b"], ["b", "a", "c"]):
            rows = await conn.fetch(*ORDERED.bind(words))
            assert [(r["word"], r["ord"]) for r in rows] == [(w, i + 1) for i, w in enumerate(words)]
        sql, arg = keyed("SELECT k.id FROM {keys} AS k(id) WHERE k.id > $2", [4], param=1)
        assert [r["id"] for r in await conn.fetch(sql, arg, 3)] == [4]
    finally:
        await conn.close()


async def test_a_batch_of_one_is_not_planned_again_on_every_execution(database_url: str) -> None:
    """PostgreSQL settles on the generic plan of a page's one-key statements after its first custom plans, so an
    execution costs no planning (the array form of the same statements keeps a custom plan, planned every time)."""
    conn = await asyncpg.connect(database_url)
    try:
        statements = [SELECT_RESEARCHERS_WITH_AFFILIATIONS, SELECT_PAPERS_BY_IDS, SELECT_AUTHORSHIPS_WITH_RESEARCHERS]
        prepared = [await conn.prepare(k.one) for k in statements]
        for i in range(10):
            for statement in prepared:
                await statement.fetch(i)
        plans = {
            r["statement"]: (r["generic_plans"], r["custom_plans"])
            for r in await conn.fetch("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
        }
        for k in statements:
            generic, custom = plans[k.one]
            assert custom <= 5 and generic >= 5, (k.one[:80], generic, custom)
    finally:
        await conn.close()
