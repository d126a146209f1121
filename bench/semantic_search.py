"""Semantic and hybrid search with a category filter: latency as served and recall@10 against exact search.

    .venv/bin/python -m bench.semantic_search [--database-url <a database with paper_embeddings and its HNSW index>] \
        [--queries 200] [--variants served,no-iterative]

Without --database-url it reads bench/search_prepare.py's database on the project-local PostgreSQL 18 (built with
`--papers 200000 --embedded 200000`, for instance), starting that server.

Each query runs through `db.queries.search.papers.search_papers`, the function the API's `search` resolver calls,
with the query's vector given (the embedding itself is timed by bench/embeddings.py), filtered to a category:
the archive's most common one, one of middling size and a small one (the share of papers each holds is printed),
since a filter that rejects most neighbours is what makes approximate search hard. The reference is the same
statement with PostgreSQL's index scans off, so pgvector's HNSW index is not used and the neighbours are the exact
ones; recall@10 is the share of the reference's first ten papers in the first ten served. Variants:

- `served`: as the API runs it: a category listed by `wovepaper semantic-indexes` (migration 0029) reads its own
  vectors, through its partial HNSW index or exactly when small; otherwise pgvector's iterative index scans over
  every vector (`relaxed_order`, ef_search 200, up to 10,000 tuples, and the exact scan when a filter leaves too
  few neighbours: db/queries/search/statement.py);
- `single-index`: always the index over every vector (as served before migration 0029);
- `no-iterative`: that with `hnsw.iterative_scan = off` (what pgvector before 0.8 did), for comparison;
- `category-ef400`: `served` with `hnsw.ef_search = 400`;
- `ef400`, `scan40k`, `ef400-scan40k`: a wider graph search (`hnsw.ef_search = 400`), a longer iterative scan
  (`hnsw.max_scan_tuples = 40000`) before the exact scan takes over, both.

Query vectors are stored real vectors with noise added (a query near a topic of the archive) and the query text
three words of that paper's title, so the hybrid's keyword half finds something too. `--no-reference` times the
variants alone (a quiet server's latency; no recall). Results: JSON lines on stdout and
bench/results/semantic-<stamp>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

import db.queries.search.papers as search_module
from db.filters import PAPER_FILTERS, Clause
from db.queries.search.statement import RELEVANCE_SORT, SEMANTIC_SESSION

ROOT = Path(__file__).resolve().parent.parent
_EF400 = SEMANTIC_SESSION.replace("hnsw.ef_search = 200", "hnsw.ef_search = 400")
_SCAN40K = SEMANTIC_SESSION.replace("hnsw.max_scan_tuples = 10000", "hnsw.max_scan_tuples = 40000")
# name: (session, whether a category listed by `wovepaper semantic-indexes` reads its own vectors)
VARIANTS = {
    "served": (SEMANTIC_SESSION, True),
    # Before migration 0029: the one index over all vectors, whatever the category.
    "single-index": (SEMANTIC_SESSION, False),
    "no-iterative": (
        SEMANTIC_SESSION.replace("hnsw.iterative_scan = relaxed_order", "hnsw.iterative_scan = off"),
        False,
    ),
    # Candidates for a change: a wider search, a longer iterative scan before the exact one takes over, both.
    "ef400": (_EF400, False),
    "scan40k": (_SCAN40K, False),
    "ef400-scan40k": (_EF400.replace("hnsw.max_scan_tuples = 10000", "hnsw.max_scan_tuples = 40000"), False),
    "category-ef400": (_EF400, True),
}
# The reference: every vector of the filter's papers, full precision, no index.
EXACT = (SEMANTIC_SESSION + "; SET LOCAL enable_indexscan = off", False)
STOP = {"a", "an", "and", "for", "from", "in", "of", "on", "the", "to", "with", "via", "by", "at", "is"}


async def queries(conn: asyncpg.Connection, n: int, seed: int) -> list[tuple[list[float], str]]:
    """(vector, text) pairs: a real stored vector plus noise, and words of that paper's title."""
    rng = np.random.default_rng(seed)
    rows = await conn.fetch(
        """SELECT e.embedding::real[] AS v, p.title FROM paper_embeddings e JOIN papers p ON p.id = e.paper_id
           WHERE e.model <> 'synthetic' ORDER BY md5(e.paper_id::text || $1::text) LIMIT $2""",
        str(seed),
        n,
    )
    if not rows:  # only synthetic vectors: take those
        rows = await conn.fetch(
            """SELECT e.embedding::real[] AS v, p.title FROM paper_embeddings e JOIN papers p ON p.id = e.paper_id
               ORDER BY md5(e.paper_id::text || $1::text) LIMIT $2""",
            str(seed),
            n,
        )
    out = []
    for r in rows:
        v = np.asarray(r["v"], dtype=np.float32) + rng.normal(0, 0.03, 384).astype(np.float32)
        v /= np.linalg.norm(v)
        words = [w for w in r["title"].replace(":", " ").replace(",", " ").split() if w.lower() not in STOP]
        out.append((v.tolist(), " ".join(words[:3]) or "model"))
    return out


async def categories(conn: asyncpg.Connection) -> list[tuple[str, str, float]]:
    """(bucket, category, share of papers): the most common category, one of middling size, a small one."""
    rows = await conn.fetch(
        """SELECT c, count(*)::float / (SELECT count(*) FROM papers) AS share
           FROM papers, unnest(categories) AS c GROUP BY c ORDER BY count(*) DESC"""
    )
    picks = {"common": rows[0], "middling": rows[min(len(rows) - 1, 10)], "small": rows[min(len(rows) - 1, 40)]}
    return [(bucket, r["c"], round(r["share"], 4)) for bucket, r in picks.items()]


async def one(
    conn: asyncpg.Connection, variant: tuple[str, bool], mode: str, vector: list[float], text: str, category: str
) -> tuple[float, list[int]]:
    # read by search_papers at each call
    search_module.SEMANTIC_SESSION, search_module.CATEGORY_VECTORS = variant
    started = time.perf_counter()
    result = await search_module.search_papers(
        conn,
        mode=mode,  # type: ignore[arg-type]
        text=text,
        vector=vector,
        clauses=[Clause(PAPER_FILTERS["not_withdrawn"], ()), Clause(PAPER_FILTERS["category"], (category,))],
        sort=RELEVANCE_SORT,
        limit=24,
        with_facets=True,
        with_highlights=True,
    )
    return (time.perf_counter() - started) * 1000, [h.paper.id for h in result.hits[:10]]


def percentile(values: list[float], p: float) -> float:
    return round(float(np.percentile(np.asarray(values), p)), 2)


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(args.database_url, command_timeout=120)
    try:
        version = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        server = await conn.fetchval("SHOW server_version")
        counts = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM papers) AS papers, (SELECT count(*) FROM paper_embeddings) AS vectors"
        )
        info = {"pgvector": version, "postgres": server, "papers": counts["papers"], "vectors": counts["vectors"]}
        print(json.dumps(info), flush=True)
        asked = await queries(conn, args.queries, args.seed)
        buckets = [b for b in await categories(conn) if b[0] in args.filters.split(",")]
        variants = [v for v in args.variants.split(",") if v]
        lines = []
        for mode in args.modes.split(","):
            for bucket, category, share in buckets:
                timings: dict[str, list[float]] = {v: [] for v in variants}
                recalls: dict[str, list[float]] = {v: [] for v in variants}
                for i, (vector, text) in enumerate([*asked[: args.warmup], *asked]):
                    exact = [] if args.no_reference else (await one(conn, EXACT, mode, vector, text, category))[1]
                    # Rotated: the first statement after the reference pays for what the reference evicted.
                    for variant in variants[i % len(variants) :] + variants[: i % len(variants)]:
                        ms, served = await one(conn, VARIANTS[variant], mode, vector, text, category)
                        if i < args.warmup:
                            continue
                        timings[variant].append(ms)
                        if exact:
                            recalls[variant].append(len(set(served) & set(exact)) / len(exact))
                for variant in variants:
                    t, r = timings[variant], recalls[variant]
                    line = {
                        "mode": mode,
                        "filter": bucket,
                        "category": category,
                        "category_share": share,
                        "variant": variant,
                        "queries": len(t),
                        "p50_ms": percentile(t, 50),
                        "p95_ms": percentile(t, 95),
                        "p99_ms": percentile(t, 99),
                        "recall_at_10": round(statistics.fmean(r), 4) if r else None,
                        "recall_at_10_p5": percentile(r, 5) if r else None,
                        "load": round(os.getloadavg()[0], 2),
                    }
                    print(json.dumps(line), flush=True)
                    lines.append(line)
        return [info, *lines]
    finally:
        search_module.SEMANTIC_SESSION, search_module.CATEGORY_VECTORS = SEMANTIC_SESSION, True
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", help="default: bench/search_prepare.py's database, on its server")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--modes", default="HYBRID,SEMANTIC")
    parser.add_argument("--variants", default="served,single-index")
    parser.add_argument("--filters", default="common,middling,small", help="which of the three category filters")
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument(
        "--no-reference",
        action="store_true",
        help="latency alone: no exact search beside each query (it reads up to a category's every vector, evicting "
        "what the served statement reads), so no recall",
    )
    args = parser.parse_args()
    if not args.database_url:
        import localservers
        from bench.search_prepare import DB

        admin = localservers.start_postgres(ROOT / ".wovepaper" / "bench-search")
        args.database_url = localservers.with_database(admin, DB)
    result = asyncio.run(run(args))
    out = ROOT / "bench" / "results" / f"semantic-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "result": result}, indent=1))


if __name__ == "__main__":
    main()
