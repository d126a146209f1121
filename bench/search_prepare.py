"""Prepare the search benchmark database: the demo generator's papers plus embeddings, on a PostgreSQL with
pgvector (the project-local embedded one under .wovepaper/bench-search unless --admin-url is given).

    .venv/bin/python -m bench.search_prepare --papers 1000000 [--real 2000]

`--real` papers get true all-MiniLM-L6-v2 vectors (timed: the ingest's embedding throughput). Embedding a
million papers on this 2-core CPU would take hours, so the rest get synthetic vectors: a mix of two real vectors
(chosen by paper id) plus noise, normalised (`--resynthesise` replaces those of an earlier run). That keeps the
HNSW graph's shape realistic (clustered, 384 dimensions) for timing; results are meaningless for relevance, which
the tests cover.
The HNSW index is dropped during the load and built once at the end, then the per-category indexes
(`wovepaper semantic-indexes`). The name look-up's table is brought to the
size the demo generator makes for that many papers (686k researchers for a million), so autocomplete is timed on a
realistic index. Every stage is skipped when already done, so running it again only finishes what is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from pathlib import Path

import asyncpg

import demo
import localservers
from db.admin import create_database
from db.migrate import migrate
from db.queries.search.category_vectors import build_category_indexes
from db.queries.writes.researchers import upsert_researchers
from ingest.embed import embed_missing

ROOT = Path(__file__).resolve().parent.parent
DB = "wovepaper_search_bench"
# The demo generator's size here; the benchmark's size is reached by replicating its papers.
SEED_PAPERS = 25_000

REPLICATE = """
INSERT INTO papers (arxiv_id, slug, title, abstract, authors_text, categories, primary_category, published, updated,
                    cited_by_count, author_count)
SELECT 'x' || $1::int || '/' || p.arxiv_id, 'x' || $1::int || '-' || p.slug, p.title, p.abstract, p.authors_text,
       p.categories, p.primary_category, p.published - make_interval(days => $1::int * 3),
       p.updated - make_interval(days => $1::int * 3),
       CASE WHEN p.cited_by_count IS NULL THEN NULL ELSE (p.cited_by_count * (1 + (p.id + $1::int) % 5)) / 3 END,
       p.author_count
FROM papers p
WHERE p.arxiv_id NOT LIKE 'x%'
ORDER BY p.id
LIMIT $2::int
"""

# A vector between two real ones (of clusters k and k'), plus noise, normalised. Vectors of one cluster each with noise
# alone made islands of about a hundred near-duplicates that HNSW's graph did not join: a filtered search's graph walk
# stayed on its island and found 10 of the 200 neighbours it wanted (then the exact scan answered). Real embeddings
# vary continuously between topics; a mix of two does too.
SYNTHETIC = """
INSERT INTO paper_embeddings (paper_id, embedding, source_md5, model)
SELECT p.id,
       l2_normalize((SELECT array_agg(w.a * x + (1 - w.a) * y + (random()::real - 0.5::real) * 0.08::real ORDER BY i)
                     FROM unnest(c.v, d.v) WITH ORDINALITY AS u (x, y, i))::vector),
       md5(p.title || E'\\n' || p.abstract)::uuid, 'synthetic'
FROM papers p
JOIN centres c ON c.k = p.id % $1::int
JOIN centres d ON d.k = (p.id * 7919 + 13) % $1::int
CROSS JOIN LATERAL (SELECT (0.5 + 0.5 * random() + 0 * p.id)::real AS a) w  -- per paper (it names p)
WHERE p.id BETWEEN $2::bigint AND $3::bigint
  AND NOT EXISTS (SELECT 1 FROM paper_embeddings e WHERE e.paper_id = p.id)
"""


async def prepare(
    admin_dsn: str,
    papers: int,
    real: int,
    embedded_target: int,
    resynthesise: bool = False,
    index_memory: str = "3GB",
) -> str:
    admin = await asyncpg.connect(admin_dsn)
    try:
        if not await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", DB):
            await create_database(admin, DB)
    finally:
        await admin.close()
    head, sep, query = admin_dsn.partition("?")
    dsn = f"{head.rsplit('/', 1)[0]}/{DB}{sep}{query}"
    conn = await asyncpg.connect(dsn, command_timeout=None)
    try:
        await migrate(conn)
        have = await conn.fetchval("SELECT count(*) FROM papers")
        if have == 0:
            started = time.perf_counter()

            def show(stage: str, done: int, total: int) -> None:
                if done == total:
                    print(f"demo: {stage} {done}/{total} ({time.perf_counter() - started:.0f}s)", flush=True)

            await demo.load_demo(conn, papers=min(papers, SEED_PAPERS), seed=42, progress=show)
            have = await conn.fetchval("SELECT count(*) FROM papers")
        if have < papers:
            # Copies of the demo papers under new ids, dates shifted by whole days and citation counts varied, until
            # the target size; text (and so the vocabulary's distribution) is the generator's.
            started = time.perf_counter()
            base = await conn.fetchval("SELECT count(*) FROM papers WHERE arxiv_id NOT LIKE 'x%'")
            # After the copies an interrupted run made (each one statement, so whole or none).
            copy = 1 + await conn.fetchval(
                "SELECT coalesce(max(split_part(substr(arxiv_id, 2), '/', 1)::int), 0) FROM papers"
                " WHERE arxiv_id LIKE 'x%'"
            )
            while have < papers:
                await conn.execute(REPLICATE, copy, papers - have)
                have = await conn.fetchval("SELECT count(*) FROM papers")
                copy += 1
            print(f"replicated {base} demo papers to {have} in {time.perf_counter() - started:.0f}s", flush=True)
        await _add_researchers(conn, papers)
        embedded = await conn.fetchval("SELECT count(*) FROM paper_embeddings WHERE model <> 'synthetic'")
        if embedded < real:
            started = time.perf_counter()
            done = await embed_missing(conn, real - embedded, batch_size=64)
            seconds = time.perf_counter() - started
            print(f"real embeddings: {done} papers in {seconds:.1f}s = {done / seconds:.1f} papers/s", flush=True)
        if resynthesise:
            await conn.execute("DROP INDEX IF EXISTS paper_embeddings_hnsw_idx")
            await conn.execute("DELETE FROM paper_embeddings WHERE model = 'synthetic'")
        await conn.execute("DROP TABLE IF EXISTS centres")
        await conn.execute(
            """CREATE UNLOGGED TABLE centres AS
               SELECT (row_number() OVER (ORDER BY paper_id) - 1)::int AS k, embedding::real[] AS v
               FROM paper_embeddings WHERE model <> 'synthetic'"""
        )
        k = await conn.fetchval("SELECT count(*) FROM centres")
        max_id = min(embedded_target, await conn.fetchval("SELECT max(id) FROM papers"))
        if await conn.fetchval("SELECT count(*) FROM paper_embeddings") < min(embedded_target, papers):
            # Built once at the end: filling an HNSW index row by row is many times slower.
            await conn.execute("DROP INDEX IF EXISTS paper_embeddings_hnsw_idx")
            started = time.perf_counter()
            step = 50_000
            for low in range(1, max_id + 1, step):
                await conn.execute(SYNTHETIC, k, low, low + step - 1)
            print(f"synthetic embeddings up to id {max_id} in {time.perf_counter() - started:.0f}s", flush=True)
        # Semantic search within a category reads the category's own index (migration 0029), as served: built
        # first, so that the filtered searches can be timed while the index over every vector is still building.
        started = time.perf_counter()
        built = await build_category_indexes(conn)
        print(
            f"category indexes: {built.indexed} ({len(built.built)} built now) in {time.perf_counter() - started:.0f}s",
            flush=True,
        )
        started = time.perf_counter()
        # The graph must fit in memory while it is built (2.5M vectors of 384 dimensions: about 5 GB); past that
        # pgvector goes on building on disk, many times slower.
        await conn.execute(f"SET maintenance_work_mem = '{index_memory}'")
        await conn.execute("SET max_parallel_maintenance_workers = 1")
        await conn.execute(
            "CREATE INDEX IF NOT EXISTS paper_embeddings_hnsw_idx ON paper_embeddings"
            " USING hnsw (embedding vector_cosine_ops)"
        )
        print(f"HNSW index ready in {time.perf_counter() - started:.0f}s", flush=True)
        await conn.execute("VACUUM ANALYZE")
        counts = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM papers) p, (SELECT count(*) FROM paper_embeddings) e"
        )
        print(f"ready: {counts['p']} papers, {counts['e']} embeddings: {dsn}", flush=True)
        return dsn
    finally:
        await conn.close()


async def _add_researchers(conn: asyncpg.Connection, papers: int) -> None:
    """The name look-up's table at full size: the researchers the demo generator makes for `papers` papers.

    The replicated papers only link the seed's researchers, so the others get a paper count drawn from a
    long-tailed distribution and a home institution, as the ranking and the autocomplete hint read them."""
    plan = demo.DemoPlan.for_papers(papers, 42)
    if await conn.fetchval("SELECT count(*) FROM researchers") >= plan.researchers:
        return
    started = time.perf_counter()
    people = demo.new_people(plan)
    records = demo.researcher_records(plan, people)
    while chunk := list(itertools.islice(records, 50_000)):
        async with conn.transaction():
            await upsert_researchers(conn, chunk)
    async with conn.transaction():
        await conn.execute(
            """INSERT INTO researcher_institutions (researcher_id, institution_id, first_year, last_year)
               SELECT r.id, i.id, 2010 + r.id % 10, 2020 + r.id % 6
               FROM researchers r JOIN institutions i ON i.id = (SELECT min(id) FROM institutions) + r.id % 500
               WHERE r.paper_count = 0
               ON CONFLICT DO NOTHING"""
        )
        await conn.execute(
            "UPDATE researchers SET paper_count = 1 + floor(-ln(1 - random()) * 4)::int WHERE paper_count = 0"
        )
    count = await conn.fetchval("SELECT count(*) FROM researchers")
    print(f"researchers: {count} in {time.perf_counter() - started:.0f}s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--real", type=int, default=2000)
    parser.add_argument("--admin-url", help="a PostgreSQL with pgvector; default: the embedded one")
    parser.add_argument(
        "--embedded", type=int, default=1_000_000, help="papers (by id) that get a vector; the HNSW index holds these"
    )
    parser.add_argument(
        "--resynthesise", action="store_true", help="replace the synthetic vectors (and rebuild the HNSW index)"
    )
    parser.add_argument("--index-memory", default="3GB", help="maintenance_work_mem for the HNSW builds (8GB for 2.5M)")
    args = parser.parse_args()
    admin = args.admin_url or localservers.start_postgres(ROOT / ".wovepaper" / "bench-search")
    asyncio.run(prepare(admin, args.papers, args.real, args.embedded, args.resynthesise, args.index_memory))


if __name__ == "__main__":
    main()
