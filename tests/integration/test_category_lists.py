"""Category lists read from paper_categories and category_counts: both stay what the category filter lists,
whatever writes the papers, and pages equal the generic statement's."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from db.filters import PAPER_SORTS, PaperFilterSpec, paper_filter_clauses
from db.migrate import migrate
from db.queries.ingest_state import tombstone_papers
from db.queries.merges import merge_researchers
from db.queries.papers import count_papers, page_papers
from db.queries.writes.citations import update_citations
from db.queries.writes.matches import apply_authorship_matches
from db.queries.writes.papers import upsert_papers
from db.queries.writes.researchers import upsert_researchers
from db.records import AuthorRecord, AuthorshipMatch, CitationRecord, PaperRecord, ResearcherRecord, Touched

T0 = datetime(2020, 1, 1, tzinfo=UTC)

# What the lists count, straight from the papers.
TRUE_COUNTS = """
SELECT c, count(DISTINCT p.id)::integer FROM papers p CROSS JOIN unnest(p.categories) AS c
WHERE NOT p.withdrawn GROUP BY c ORDER BY c
"""
STORED_COUNTS = "SELECT category, papers FROM category_counts WHERE papers <> 0 ORDER BY category"
TRUE_ROWS = """
SELECT DISTINCT c, p.published, p.id FROM papers p CROSS JOIN unnest(p.categories) AS c WHERE NOT p.withdrawn
ORDER BY 1, 2, 3
"""
STORED_ROWS = "SELECT category, published, paper_id FROM paper_categories ORDER BY 1, 2, 3"


def paper(arxiv_id: str, categories: list[str], *, day: int = 0, version: int = 1, authors: int = 1) -> PaperRecord:
    return PaperRecord(
        arxiv_id=arxiv_id,
        version=version,
        title=f"Paper {arxiv_id}",
        abstract="Text.",
        categories=categories,
        published=T0 + timedelta(days=day),
        updated=T0 + timedelta(days=day),
        authors=[AuthorRecord(i, f"Author {i}") for i in range(1, authors + 1)],
    )


async def assert_true(conn: asyncpg.Connection) -> None:
    assert [tuple(r) for r in await conn.fetch(STORED_COUNTS)] == [tuple(r) for r in await conn.fetch(TRUE_COUNTS)]
    assert [tuple(r) for r in await conn.fetch(STORED_ROWS)] == [tuple(r) for r in await conn.fetch(TRUE_ROWS)]


@pytest.fixture
async def conn(make_database) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(await make_database(f"lists_{uuid.uuid4().hex[:12]}"))
    await migrate(connection)
    try:
        yield connection
    finally:
        await connection.close()


async def test_counts_and_rows_follow_every_write(conn: asyncpg.Connection) -> None:
    papers = [paper(f"2001.{i:05d}", ["cs.LG", "stat.ML"] if i % 3 == 0 else ["cs.DC"], day=i) for i in range(40)]
    papers.append(paper("2001.99999", ["cs.DC", "cs.DC"], day=50))  # a category listed twice counts once
    async with conn.transaction():
        await upsert_papers(conn, papers)
    await assert_true(conn)
    assert await conn.fetchval("SELECT papers FROM category_counts WHERE category = 'cs.DC'") == 26 + 1

    # Re-categorised, moved in time, a new version with the same categories, and a paper that only gains a citation.
    async with conn.transaction():
        await upsert_papers(
            conn,
            [
                paper("2001.00000", ["math.CO"], version=2),
                paper("2001.00001", ["cs.DC", "cs.LG"], day=400, version=2),
                paper("2001.00002", ["cs.DC"], day=2, version=3),
            ],
        )
        await update_citations(conn, [CitationRecord("2001.00004", 12, "s2")])
    await assert_true(conn)

    # Withdrawn (as the ingest marks it), then back; a paper deleted.
    async with conn.transaction():
        await tombstone_papers(conn, ["2001.00003", "2001.00006"])
    await assert_true(conn)
    await conn.execute("UPDATE papers SET withdrawn = false WHERE arxiv_id = '2001.00006'")
    await conn.execute("DELETE FROM papers WHERE arxiv_id = '2001.00009'")
    await assert_true(conn)


async def test_merging_researchers_leaves_the_counts_true(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        await upsert_papers(
            conn, [paper("2002.00001", ["hep-th"], authors=2), paper("2002.00002", ["hep-th", "gr-qc"])]
        )
        ids = await upsert_researchers(
            conn, [ResearcherRecord("A", s2_author_id="1"), ResearcherRecord("B", s2_author_id="2")]
        )
        matches = [AuthorshipMatch("2002.00001", 1, "1", []), AuthorshipMatch("2002.00002", 1, "2", [])]
        await apply_authorship_matches(conn, matches, ids, {})
    async with conn.transaction():
        assert await merge_researchers(conn, ids["2"], ids["1"], Touched())
    await assert_true(conn)
    assert await conn.fetchval("SELECT papers FROM category_counts WHERE category = 'hep-th'") == 2


async def test_truncating_the_papers_empties_the_listing(conn: asyncpg.Connection) -> None:
    async with conn.transaction():
        await upsert_papers(conn, [paper("2003.00001", ["cs.AI"])])
    await conn.execute("TRUNCATE papers CASCADE")
    await assert_true(conn)
    assert await conn.fetchval("SELECT count(*) FROM category_counts") == 0


GENERIC_PAGE = """
SELECT p.id FROM papers p WHERE NOT p.withdrawn AND p.categories @> ARRAY[$1::text]
ORDER BY {order} LIMIT $2 OFFSET $3
"""


async def test_two_writers_of_one_category_do_not_wait_on_each_other(make_database) -> None:  # type: ignore[no-untyped-def]
    # The harvest's later page may write first and then wait, outside PostgreSQL, for the earlier page to commit:
    # the earlier page's writes must not wait on the later one's (a count row taken at write time did).
    dsn = await make_database(f"lists_{uuid.uuid4().hex[:12]}")
    conn, later = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    await migrate(conn)
    try:
        async with later.transaction():
            await upsert_papers(later, [paper("2401.00002", ["cs.LG"], day=2)])
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '2s'")
                await upsert_papers(conn, [paper("2401.00001", ["cs.LG", "stat.ML"], day=1)])
            # Committed while the later one is open: the earlier page's count is in.
            assert await conn.fetchval("SELECT papers FROM category_counts WHERE category = 'cs.LG'") == 1
        await assert_true(conn)
        assert await conn.fetchval("SELECT count(*) FROM category_count_changes") == 0
        # The same for revisions that move papers between categories (the update's trigger, migrations 0018, 0032).
        async with later.transaction():
            await upsert_papers(later, [paper("2401.00002", ["stat.ML"], day=2, version=2)])
            async with conn.transaction():
                await conn.execute("SET LOCAL lock_timeout = '2s'")
                await upsert_papers(conn, [paper("2401.00001", ["cs.LG"], day=1, version=2)])
        await assert_true(conn)
        # A rebuild in the transaction that wrote: the changes it noted are not counted twice.
        async with conn.transaction():
            await upsert_papers(conn, [paper("2401.00003", ["cs.LG"], day=3)])
            await conn.execute("SELECT wp_rebuild_paper_listing()")
        await assert_true(conn)
    finally:
        await later.close()
        await conn.close()


async def test_pages_and_counts_equal_the_generic_statements(demo_database_url: str) -> None:
    conn = await asyncpg.connect(demo_database_url)
    try:
        await assert_true(conn)
        categories = [r[0] for r in await conn.fetch("SELECT category FROM category_counts ORDER BY papers DESC")]
        for category in categories[:3] + categories[-2:]:
            clauses = paper_filter_clauses(PaperFilterSpec(category=category))
            total = await count_papers(conn, clauses)
            assert total == await conn.fetchval(
                "SELECT count(*) FROM papers WHERE NOT withdrawn AND categories @> ARRAY[$1]", category
            )
            for sort in (PAPER_SORTS["NEWEST"], PAPER_SORTS["OLDEST"]):
                for size in (7, 24):
                    for offset in range(0, total + size, size):
                        got = [r.id for r in await page_papers(conn, clauses, sort, limit=size + 1, offset=offset)]
                        want = await conn.fetch(GENERIC_PAGE.format(order=sort.order_by), category, size + 1, offset)
                        assert got == [r[0] for r in want], (category, sort.name, size, offset)
                # Cursor pages: from each row of the first page on.
                first = await page_papers(conn, clauses, sort, limit=10)
                for row in first:
                    after = [*clauses, sort.after_clause(sort.cursor_key(row))]
                    got = [r.id for r in await page_papers(conn, after, sort, limit=5)]
                    rank = [
                        r[0] for r in await conn.fetch(GENERIC_PAGE.format(order=sort.order_by), category, total, 0)
                    ]
                    assert got == rank[rank.index(row.id) + 1 :][:5]
        # Any other filter takes the generic statement, and still answers.
        wider = paper_filter_clauses(replace(PaperFilterSpec(category=categories[0]), withdrawn="INCLUDE"))
        assert await count_papers(conn, wider) >= await count_papers(
            conn, paper_filter_clauses(PaperFilterSpec(category=categories[0]))
        )
    finally:
        await conn.close()
