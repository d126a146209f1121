from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from db.pool import create_pool
from db.queries.aggregates import (
    fetch_institution_stats,
    fetch_researcher_coauthors,
    fetch_researcher_network,
    fetch_researcher_stats,
)
from db.queries.figures import refresh_researcher_figures
from tests.integration.agg_data import EXPECTED_ADA, handmade_database, insert_researcher


@pytest.fixture(scope="module")
async def agg_db(make_database) -> tuple[str, dict[str, int]]:
    return await handmade_database(make_database, "agg")


@pytest.fixture(scope="module")
async def pool(agg_db) -> AsyncIterator[asyncpg.Pool]:
    p = await create_pool(agg_db[0], min_size=1, max_size=4)
    yield p
    await p.close()


async def test_researcher_stats_exact(pool, agg_db) -> None:
    ids = agg_db[1]
    s = await fetch_researcher_stats(pool, researcher_id=ids["A"])
    assert s is not None
    got = {k: getattr(s, k) for k in EXPECTED_ADA if k != "fields"}
    assert got == {k: v for k, v in EXPECTED_ADA.items() if k != "fields"}
    assert [(f.category, f.count) for f in s.fields] == EXPECTED_ADA["fields"]
    assert s.most_cited_paper_id == ids["P5"]
    assert (s.archive.works_count, s.archive.citation_count, s.archive.i10_index) == (6, 68, 2)


async def test_researcher_metrics_per_source(pool, agg_db) -> None:
    s = await fetch_researcher_stats(pool, researcher_id=agg_db[1]["A"])
    assert s is not None
    s2 = s.s2_reported
    assert (s2.h_index, s2.citation_count, s2.works_count, s2.i10_index) == (4, 90, 8, None)
    assert s2.as_of is not None and s2.as_of.year == 2026
    oa = s.openalex_reported
    assert (oa.h_index, oa.i10_index, oa.citation_count, oa.works_count, oa.as_of) == (6, 5, 120, 11, None)
    # Each source's works list on its own, each work once within it.
    assert (s.s2_listed.works_count, s.s2_listed.citation_count, s.s2_listed.h_index, s.s2_listed.i10_index) == (
        4,
        39,
        3,
        2,
    )
    ol = s.openalex_listed
    assert (ol.works_count, ol.citation_count, ol.h_index, ol.i10_index) == (3, 36, 3, 2)


async def test_stats_agree_with_stored_figures(pool, agg_db) -> None:
    """The page's figures and the stored ones lists sort on come from the same definitions."""
    ids = agg_db[1]
    async with pool.acquire() as conn:
        await refresh_researcher_figures(conn, [ids["A"]])
        stored = await conn.fetchrow(
            "SELECT paper_count, h_index, i10_index, citation_count, works_count FROM researchers WHERE id = $1",
            ids["A"],
        )
        # Restore the hand-set values the institution test sorts on.
        await conn.execute("UPDATE researchers SET h_index = 5, citation_count = 100 WHERE id = $1", ids["A"])
    s = await fetch_researcher_stats(pool, researcher_id=ids["A"])
    assert s is not None
    assert tuple(stored) == (s.paper_count, s.h_index, s.i10_index, s.citation_count, s.works_count)


async def test_researcher_without_papers_or_works(pool, agg_db) -> None:
    s = await fetch_researcher_stats(pool, researcher_id=agg_db[1]["E"])
    assert s is not None
    assert (s.paper_count, s.h_index, s.works_count, s.citation_count, s.matched_papers) == (0, 0, 0, 0, 0)
    assert s.fields == [] and s.most_cited_paper_id is None and s.papers_with_counts == 0


async def test_missing_researcher_is_none(pool) -> None:
    assert await fetch_researcher_stats(pool, researcher_id=987654321) is None
    assert await fetch_researcher_network(pool, researcher_id=987654321, depth=1, min_shared=1, limit=10) is None


async def test_coauthors_most_shared_first_never_a_collaboration(pool, agg_db) -> None:
    ids = agg_db[1]
    rows = await fetch_researcher_coauthors(pool, researcher_id=ids["A"])
    assert [(r.researcher_id, r.shared_papers, r.first_year, r.last_year) for r in rows] == [
        (ids["C"], 3, 2017, 2021),
        (ids["B"], 2, 2019, 2020),
    ]
    assert [r.researcher_id for r in await fetch_researcher_coauthors(pool, researcher_id=ids["A"], limit=1)] == [
        ids["C"]
    ]


async def test_network_depth_one_and_two(pool, agg_db) -> None:
    ids = agg_db[1]
    a, b, c, d = ids["A"], ids["B"], ids["C"], ids["D"]
    n1 = await fetch_researcher_network(pool, researcher_id=a, depth=1, min_shared=1, limit=100)
    assert n1 is not None
    assert {(n.researcher_id, n.depth, n.weight) for n in n1.nodes} == {(a, 0, 5), (b, 1, 4), (c, 1, 5)}
    edges = {(min(e.source, e.target), max(e.source, e.target), e.shared_papers) for e in n1.edges}
    assert edges == {(min(a, b), max(a, b), 2), (min(a, c), max(a, c), 3), (min(b, c), max(b, c), 2)}
    n2 = await fetch_researcher_network(pool, researcher_id=a, depth=2, min_shared=1, limit=100)
    assert n2 is not None
    assert {(n.researcher_id, n.depth) for n in n2.nodes} == {(a, 0), (b, 1), (c, 1), (d, 2)}
    edges2 = {(min(e.source, e.target), max(e.source, e.target), e.shared_papers) for e in n2.edges}
    assert (min(b, d), max(b, d), 1) in edges2


async def test_network_min_shared_and_limit(pool, agg_db) -> None:
    ids = agg_db[1]
    a, c = ids["A"], ids["C"]
    n = await fetch_researcher_network(pool, researcher_id=a, depth=2, min_shared=3, limit=100)
    assert n is not None
    assert {x.researcher_id for x in n.nodes} == {a, c}
    assert [(e.shared_papers) for e in n.edges] == [3]
    n = await fetch_researcher_network(pool, researcher_id=a, depth=2, min_shared=1, limit=2)
    assert n is not None
    assert {x.researcher_id for x in n.nodes} == {a, c}


async def test_institution_stats(pool, agg_db) -> None:
    ids = agg_db[1]
    s = await fetch_institution_stats(pool, institution_id=ids["I"])
    assert s is not None
    assert (s.paper_count, s.researcher_count) == (3, 4)
    assert [(f.category, f.count, f.primary_count) for f in s.fields] == [("cs.LG", 3, 3)]
    # By stored career h-index, then citations: A (5), C (2, 20), B (2, 10), E (0).
    assert s.top_researcher_ids == [ids["A"], ids["C"], ids["B"], ids["E"]]
    top2 = await fetch_institution_stats(pool, institution_id=ids["I"], top=2)
    assert top2 is not None and top2.top_researcher_ids == [ids["A"], ids["C"]]
    assert await fetch_institution_stats(pool, institution_id=987654321) is None


async def test_heavy_researcher_one_statement(pool) -> None:
    """2,000 papers and 5,000 external works (half of them duplicates of papers): still exact."""
    async with pool.acquire() as conn:
        rid = await insert_researcher(conn, "Heavy Hitter")
        # Papers cited 0..1999; works: the first 2,000 duplicate the papers by arXiv id with +1
        # citations, the other 3,000 are distinct works cited 0..2999.
        await conn.execute(
            """INSERT INTO papers (arxiv_id, slug, title, categories, primary_category, published, updated,
                                   cited_by_count, author_count, matched_count)
               SELECT 'hv' || g, 'hv' || g, 't',
                      CASE WHEN g % 4 = 0 THEN ARRAY['cs.CL', 'cs.AI'] ELSE ARRAY['cs.AI'] END,
                      CASE WHEN g % 4 = 0 THEN 'cs.CL' ELSE 'cs.AI' END,
                      now(), now(), g, 2, CASE WHEN g % 2 = 0 THEN 2 ELSE 1 END
                 FROM generate_series(0, 1999) g"""
        )
        await conn.execute(
            """INSERT INTO authorships (paper_id, position, name, researcher_id)
               SELECT id, 1 + (substring(arxiv_id FROM 3)::int % 2), 'Heavy Hitter', $1
                 FROM papers WHERE arxiv_id LIKE 'hv%'""",
            rid,
        )
        await conn.execute(
            """INSERT INTO researcher_works (researcher_id, source, external_id, citation_count, arxiv_id)
               SELECT $1, 's2', 'hvw' || g, CASE WHEN g < 2000 THEN g + 1 ELSE g - 2000 END,
                      CASE WHEN g < 2000 THEN 'hv' || g END
                 FROM generate_series(0, 4999) g""",
            rid,
        )
        # As the write path does in its transaction: the page reads the figures stored here.
        await refresh_researcher_figures(conn, [rid])
        s = await fetch_researcher_stats(conn, researcher_id=rid)
    assert s is not None
    assert s.paper_count == 2000 and s.works_count == 5000
    # Career counts: 0..1999 (the papers: an archive paper keeps its own count over a source's) and
    # 0..2999 (the other works); h is the largest h such that h works have at least h citations.
    counts = sorted([*range(2000), *range(3000)], reverse=True)
    assert s.h_index == max(h for h in range(len(counts) + 1) if h == 0 or counts[h - 1] >= h)
    assert s.citation_count == sum(counts)
    assert s.i10_index == sum(1 for x in counts if x >= 10)
    assert s.h_index_in_archive == 1000  # counts 0..1999
    # Matched: even g (1000 papers); even g sits at position 1 of 2 -> first.
    assert (s.matched_papers, s.first, s.last, s.middle, s.solo) == (1000, 1000, 0, 0, 0)
    # Every paper is listed in cs.AI (500 of them cross-listed from cs.CL): counted as the category filter lists.
    assert [(f.category, f.count, f.primary_count) for f in s.fields] == [("cs.AI", 2000, 1500), ("cs.CL", 500, 500)]


async def test_demo_researchers_stats_agree_with_stored_figures_and_raw_rows(demo_database_url) -> None:
    """On the demo data (heavy researcher included): the page's figures equal the stored ones, and the
    author positions equal a count straight from the authorships (not the papers' stored counts)."""
    pool = await create_pool(demo_database_url, min_size=1, max_size=2)
    try:
        async with pool.acquire() as conn:
            heavy_id = await conn.fetchval("SELECT id FROM researchers ORDER BY paper_count DESC, id LIMIT 1")
            ids = [heavy_id, *(r["id"] for r in await conn.fetch("SELECT id FROM researchers ORDER BY id LIMIT 40"))]
            for rid in ids:
                s = await fetch_researcher_stats(conn, researcher_id=rid)
                assert s is not None
                stored = await conn.fetchrow(
                    "SELECT paper_count, h_index, i10_index, citation_count, works_count FROM researchers"
                    " WHERE id = $1",
                    rid,
                )
                assert tuple(stored) == (s.paper_count, s.h_index, s.i10_index, s.citation_count, s.works_count)
                raw = await conn.fetchrow(
                    """WITH p AS (
                           SELECT a.paper_id, min(a.position) AS pos,
                                  (SELECT count(*) FROM authorships x WHERE x.paper_id = a.paper_id) AS n,
                                  (SELECT count(*) FROM authorships x WHERE x.paper_id = a.paper_id
                                      AND x.researcher_id IS NOT NULL) AS matched
                             FROM authorships a JOIN papers q ON q.id = a.paper_id AND NOT q.withdrawn
                            WHERE a.researcher_id = $1 GROUP BY a.paper_id)
                       SELECT count(*) FILTER (WHERE n = matched) AS k,
                              count(*) FILTER (WHERE n = matched AND n = 1) AS solo,
                              count(*) FILTER (WHERE n = matched AND n > 1 AND pos = 1) AS first,
                              count(*) FILTER (WHERE n = matched AND n > 1 AND pos = n) AS last
                         FROM p""",
                    rid,
                )
                assert (s.matched_papers, s.solo, s.first, s.last) == tuple(raw)
                assert s.first + s.middle + s.last + s.solo == s.matched_papers <= s.paper_count
                assert sum(f.primary_count for f in s.fields) == s.paper_count
                assert all(f.count >= f.primary_count for f in s.fields)
            heavy = await fetch_researcher_stats(conn, researcher_id=heavy_id)
            assert heavy is not None and heavy.works_count > 5000 and heavy.paper_count >= 100
            coauthors = await fetch_researcher_coauthors(conn, researcher_id=heavy_id)
            names = await conn.fetch(
                "SELECT name FROM researchers WHERE id = any($1::bigint[])", [c.researcher_id for c in coauthors]
            )
            assert coauthors and not any("collaboration" in r["name"].lower() for r in names)
    finally:
        await pool.close()
