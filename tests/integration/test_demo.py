from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import astuple
from pathlib import Path

import asyncpg

from db.ids import normalize_ror, parse_arxiv_id
from db.migrate import migrate
from db.queries.aggregates import fetch_researcher_stats
from db.queries.figures import fetch_career_figures
from demo import load_demo

ROOT = Path(__file__).resolve().parents[2]
TABLES = (
    "papers",
    "paper_versions",
    "researchers",
    "authorships",
    "researcher_works",
    "institutions",
    "authorship_institutions",
    "researcher_institutions",
    "researcher_scope_figures",
)

# Natural keys and values only (no surrogate ids), so two databases can be compared.
FINGERPRINT = """
SELECT md5(string_agg(row_text, E'\\n' ORDER BY row_text)) FROM (
    SELECT concat_ws('|', arxiv_id, version, title, abstract, authors_text, categories::text, published,
                     cited_by_count, cited_by_source, summary, analysed) AS row_text FROM papers
    UNION ALL
    SELECT concat_ws('|', p.arxiv_id, a.position, a.name, r.s2_author_id, a.is_collaboration)
    FROM authorships a JOIN papers p ON p.id = a.paper_id LEFT JOIN researchers r ON r.id = a.researcher_id
    UNION ALL
    SELECT concat_ws('|', name, s2_author_id, openalex_id, orcid, paper_count, h_index, works_count,
                     s2_citation_count, openalex_h_index) FROM researchers
    UNION ALL
    SELECT concat_ws('|', r.s2_author_id, w.source, w.external_id, w.citation_count, w.arxiv_id)
    FROM researcher_works w JOIN researchers r ON r.id = w.researcher_id
    UNION ALL
    SELECT concat_ws('|', ror_id, name, country, type, paper_count) FROM institutions
) t
"""


async def _counts(conn: asyncpg.Connection) -> dict[str, int]:
    return {t: await conn.fetchval(f"SELECT count(*) FROM {t}") for t in TABLES}


async def _fresh(make_database, suffix: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(await make_database(suffix))
    await migrate(conn)
    return conn


async def test_loading_twice_leaves_the_same_rows_and_writes_nothing(make_database) -> None:
    conn = await _fresh(make_database, "demo_twice")
    try:
        await load_demo(conn, papers=400, seed=3)
        counts, fingerprint = await _counts(conn), await conn.fetchval(FINGERPRINT)
        stamps = await conn.fetchrow(
            "SELECT (SELECT max(modified_at) FROM papers) AS p, (SELECT max(modified_at) FROM researchers) AS r,"
            " (SELECT max(modified_at) FROM institutions) AS i"
        )
        assert counts["papers"] == 400 and counts["researcher_works"] > 0

        await load_demo(conn, papers=400, seed=3)

        assert await _counts(conn) == counts
        assert await conn.fetchval(FINGERPRINT) == fingerprint
        # Nothing was rewritten: the second load found every row already as it wanted it.
        again = await conn.fetchrow(
            "SELECT (SELECT max(modified_at) FROM papers) AS p, (SELECT max(modified_at) FROM researchers) AS r,"
            " (SELECT max(modified_at) FROM institutions) AS i"
        )
        assert again == stamps
    finally:
        await conn.close()


async def test_same_seed_same_rows_other_seed_other_rows(make_database) -> None:
    conns = [await _fresh(make_database, f"demo_seed_{k}") for k in range(3)]
    try:
        for conn, seed in zip(conns, (11, 11, 12), strict=True):
            await load_demo(conn, papers=300, seed=seed)
        prints = [await c.fetchval(FINGERPRINT) for c in conns]
        assert prints[0] == prints[1]
        assert prints[0] != prints[2]
    finally:
        for c in conns:
            await c.close()


async def test_demo_fixture_keeps_its_documented_guarantees(demo_database_url: str) -> None:
    conn = await asyncpg.connect(demo_database_url)
    try:
        counts = await _counts(conn)
        assert counts["papers"] == 1500
        assert counts["researchers"] == 2250
        assert counts["institutions"] == 500

        ids = await conn.fetch("SELECT arxiv_id, published FROM papers")
        for r in ids:
            assert parse_arxiv_id(r["arxiv_id"]) == (r["arxiv_id"], None)
            old_style = "/" in r["arxiv_id"]
            assert old_style == (r["published"].date().isoformat() < "2007-04-01"), r["arxiv_id"]
        assert sum("/" in r["arxiv_id"] for r in ids) > 50
        years = {r["published"].year for r in ids}
        assert min(years) == 1995 and max(years) == 2026

        for ror in await conn.fetch("SELECT ror_id FROM institutions"):
            assert normalize_ror(ror["ror_id"]) == ror["ror_id"]
            assert normalize_ror(f"https://ror.org/{ror['ror_id']}") == ror["ror_id"]
        assert await conn.fetchval("SELECT count(*) FROM institutions WHERE name = 'Université de Montréal'") == 1

        share = await conn.fetchval(
            "SELECT avg((researcher_id IS NULL)::int) FROM authorships WHERE NOT is_collaboration"
        )
        assert 0.07 < share < 0.13
        collab = await conn.fetchrow(
            "SELECT count(*) AS n, count(researcher_id) AS matched FROM authorships WHERE is_collaboration"
        )
        assert collab["n"] > 0 and collab["matched"] == 0
        assert await conn.fetchval("SELECT count(*) FROM papers WHERE matched_count = author_count") > 500

        assert (
            await conn.fetchval(
                "SELECT count(*) FROM researchers r"
                " WHERE NOT EXISTS (SELECT 1 FROM authorships a WHERE a.researcher_id = r.id)"
            )
            == 0
        )
        # paper_count leaves withdrawn papers out, as the researcher's papers list does.
        assert (
            await conn.fetchval(
                """SELECT count(*) FROM researchers r WHERE paper_count <> (SELECT count(DISTINCT a.paper_id)
                   FROM authorships a JOIN papers p ON p.id = a.paper_id
                   WHERE a.researcher_id = r.id AND NOT p.withdrawn)"""
            )
            == 0
        )
        names = [r["name"] for r in await conn.fetch("SELECT name FROM researchers")]
        assert any(any(0x4E00 <= ord(ch) <= 0x9FFF for ch in n) for n in names)  # CJK
        assert any(any(0x0400 <= ord(ch) <= 0x04FF for ch in n) for n in names)  # Cyrillic
        assert any(any(ch in "üöäéñçøåłš" for ch in n) for n in names)
        assert any(n.endswith((" Jr.", " III", " II", " Sr.")) for n in names)

        heavy = await conn.fetchrow(
            "SELECT id, paper_count, works_count FROM researchers ORDER BY paper_count DESC, id LIMIT 1"
        )
        assert heavy["id"] == 1 and heavy["paper_count"] == 180
        by_source = dict(
            await conn.fetch(
                "SELECT source, count(*) FROM researcher_works WHERE researcher_id = $1 GROUP BY source", heavy["id"]
            )
        )
        assert by_source["s2"] > 4000 and by_source["openalex"] > 3500
        assert heavy["works_count"] > 5000  # whole career, each work once
        own = await conn.fetchval(
            "SELECT count(*) FROM researcher_works w JOIN papers p ON p.arxiv_id = w.arxiv_id"
            " JOIN authorships a ON a.paper_id = p.id AND a.researcher_id = w.researcher_id WHERE w.researcher_id = $1",
            heavy["id"],
        )
        assert own > 50

        analysed = await conn.fetchrow(
            "SELECT avg(analysed::int) AS share, bool_and((summary IS NULL) = NOT analysed) AS consistent FROM papers"
        )
        assert 0.25 < analysed["share"] < 0.45 and analysed["consistent"]
        cited = await conn.fetchval("SELECT avg((cited_by_count IS NOT NULL)::int) FROM papers")
        assert 0.78 < cited < 0.92
        assert await conn.fetchval("SELECT count(*) FROM papers WHERE version > 1") > 100
        assert await conn.fetchval("SELECT count(*) FROM papers WHERE cardinality(categories) > 1") > 50
    finally:
        await conn.close()


async def _wovepaper(dsn: str, *args: str) -> tuple[int, str]:
    env = {**os.environ, "DATABASE_URL": dsn}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli",
        *args,
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode or 0, out.decode()


async def test_demo_command_migrates_loads_and_respects_if_empty(make_database) -> None:
    dsn = await make_database("demo_cli")  # not migrated: the command migrates first
    code, out = await _wovepaper(dsn, "demo", "--papers", "150", "--seed", "5", "--if-empty")
    assert code == 0, out
    assert "demo: 150 papers" in out
    assert "\x1b[" not in out  # not a terminal: plain lines, no progress bar
    code, out = await _wovepaper(dsn, "demo", "--papers", "300", "--if-empty")
    assert code == 0 and "nothing to do" in out, out
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM papers") == 150
    finally:
        await conn.close()


async def test_loading_through_a_pool_leaves_its_connection_settings_alone(make_database) -> None:
    from db.pool import create_pool

    dsn = await make_database("demo_pool")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    pool = await create_pool(dsn, min_size=1, max_size=1, statement_timeout_ms=5000)
    try:
        async with pool.acquire() as pooled:
            commit_mode = await pooled.fetchval("SHOW synchronous_commit")
        report = await load_demo(pool, papers=150, seed=9)
        assert report.papers == 150
        async with pool.acquire() as pooled:
            assert await pooled.fetchval("SHOW statement_timeout") == "5s"
            assert await pooled.fetchval("SHOW synchronous_commit") == commit_mode
            assert await pooled.fetchval("SELECT count(*) FROM papers") == 150
    finally:
        await pool.close()


# Every column but the clock's: two loads at different times differ only in when they wrote.
_STAMPS = "ARRAY['modified_at', 'analysed_at', 's2_updated_at', 'openalex_updated_at']"
_ORDER = {
    "papers": "id",
    "paper_versions": "paper_id, version",
    "researchers": "id",
    "authorships": "paper_id, position",
    "researcher_works": "researcher_id, source, external_id",
    "institutions": "id",
    "authorship_institutions": "paper_id, position, institution_id",
    "researcher_institutions": "researcher_id, institution_id",
    "researcher_scope_figures": "researcher_id, scope",
}


async def _rows(conn: asyncpg.Connection, table: str) -> list[str]:
    sql = f"SELECT (to_jsonb(t) - {_STAMPS})::text FROM {table} t ORDER BY {_ORDER[table]}"
    return [r[0] for r in await conn.fetch(sql)]


async def test_the_bulk_load_leaves_the_rows_the_upserts_leave(make_database) -> None:
    bulk, upserts = await _fresh(make_database, "demo_bulk"), await _fresh(make_database, "demo_upserts")
    try:
        await load_demo(bulk, papers=2_000, seed=7, bulk=True)
        await load_demo(upserts, papers=2_000, seed=7, bulk=False)
        for table in TABLES:
            assert await _rows(bulk, table) == await _rows(upserts, table), table
        # Ids continue after the COPYed ones, and every index and constraint is back.
        indexes = "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY indexname"
        assert await bulk.fetch(indexes) == await upserts.fetch(indexes)
        constraints = "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint ORDER BY conname"
        assert await bulk.fetch(constraints) == await upserts.fetch(constraints)
        next_ids = "SELECT nextval(pg_get_serial_sequence('papers', 'id')), nextval(pg_get_serial_sequence($1, 'id'))"
        assert await bulk.fetchrow(next_ids, "researchers") == await upserts.fetchrow(next_ids, "researchers")
        # The figures the researcher page reads are the definitions' (the heaviest researchers and a few others).
        sample = (
            "(SELECT id FROM researchers ORDER BY works_count DESC, id LIMIT 3) UNION (SELECT min(id) FROM researchers)"
        )
        for r in await bulk.fetch(sample):
            s = await fetch_researcher_stats(bulk, researcher_id=r["id"])
            f = await fetch_career_figures(bulk, r["id"])
            assert s is not None
            assert [astuple(x) for x in (s.career, s.archive, s.s2_listed, s.openalex_listed)] == [
                astuple(x) for x in (f.career, f.archive, f.s2, f.openalex)
            ]
    finally:
        await bulk.close()
        await upserts.close()


async def test_a_bulk_load_that_fails_leaves_the_database_as_it_was(make_database) -> None:
    conn = await _fresh(make_database, "demo_bulk_fail")
    try:
        indexes = await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE schemaname = 'public'")

        def fail(stage: str, done: int, total: int) -> None:
            if stage == "works" and done > 0:
                raise RuntimeError("interrupted")

        try:
            await load_demo(conn, papers=300, seed=1, progress=fail)
        except RuntimeError:
            pass
        assert await conn.fetchval("SELECT count(*) FROM papers") == 0
        assert await conn.fetchval("SELECT count(*) FROM pg_indexes WHERE schemaname = 'public'") == indexes
        with_rows = await load_demo(conn, papers=300, seed=1)
        assert with_rows.papers == 300
    finally:
        await conn.close()
