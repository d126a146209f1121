"""Search benchmark: keyword (with facets), semantic, hybrid, autocomplete, and embedding throughput.

(The embedding model's backends side by side, with recall against the reference: bench/embeddings.py.)

    .venv/bin/python -m bench.search --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench \
        [--vector-database-url <a database with pgvector and paper_embeddings>] [--runs 60]

One uvicorn server (one worker) per database; one client sends requests one at a time (latency, not
throughput), after a warm-up. Semantic and hybrid are timed with the query's embedding already cached in the
server (it keeps recent query vectors), so they exclude the embedding, which is timed on its own (in this
process, uncached strings). Common and rare terms come from the database itself (title word frequencies in a
sample). Results: bench/results/search-<stamp>.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parent.parent

KEYWORD = """query($q: String!, $mode: SearchMode, $sort: SearchSort) {
  search(query: $q, mode: $mode, sort: $sort, first: 24) {
    totalCount totalPages
    edges { score node { arxivId slug title authorsText categories published citedByCount }
            highlights { title abstract } }
    facets { categories { values { value count } otherCount }
             primaryCategories { values { value count } otherCount }
             years { values { value count } otherCount } }
  }
}"""
AUTOCOMPLETE = """query($q: String!) { autocomplete(query: $q, first: 8) { type id label hint } }"""
# Topics a reader might type; bench/embeddings.py embeds the same ones.
SEMANTIC_QUERIES = [
    "neural networks learn representations of graphs",
    "dark matter distribution in galaxy clusters",
    "quantum error correction codes",
    "superconductivity in twisted bilayer graphene",
    "black hole mergers and gravitational waves",
    "sampling methods for bayesian inference",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(database_url: str, *, semantic: bool = False) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "WOVEPAPER_STATEMENT_TIMEOUT_MS": "30000"}
    env["WOVEPAPER_RATE_LIMITS"] = "off"  # one client address, thousands of requests
    # The model loads in a background thread for seconds after start-up: only the semantic rows want it, and they
    # warm up on it; elsewhere it would compete with the requests being timed.
    env["WOVEPAPER_SEMANTIC_PRELOAD"] = "true" if semantic else "false"
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "app:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise RuntimeError("server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(name: str, times_ms: list[float], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "n": len(times_ms),
        "p50_ms": round(statistics.median(times_ms), 2),
        "p90_ms": round(percentile(times_ms, 90), 2),
        "p99_ms": round(percentile(times_ms, 99), 2),
        "max_ms": round(max(times_ms), 2),
        **(extra or {}),
    }


def timed_requests(
    url: str, query: str, variable_sets: list[dict[str, Any]], runs: int, warmup: int = 1
) -> tuple[list[float], list[dict[str, Any]]]:
    times: list[float] = []
    answers: list[dict[str, Any]] = []
    with httpx.Client(base_url=url, timeout=60) as client:
        for variables in variable_sets:
            for _ in range(warmup):
                client.post("/graphql", json={"query": query, "variables": variables})
        for i in range(runs):
            variables = variable_sets[i % len(variable_sets)]
            started = time.perf_counter()
            response = client.post("/graphql", json={"query": query, "variables": variables})
            times.append((time.perf_counter() - started) * 1000)
            body = response.json()
            if body.get("errors"):
                raise RuntimeError(f"{variables}: {body['errors']}")
            answers.append(body["data"])
    return times, answers


async def pick_terms(dsn: str) -> tuple[list[str], list[str], list[str], int]:
    """Common and rare title words (by document frequency in a sample), name prefixes, and the paper count."""
    conn = await asyncpg.connect(dsn)
    try:
        papers = await conn.fetchval("SELECT count(*) FROM papers")
        rows = await conn.fetch(
            """SELECT word, ndoc FROM ts_stat($$SELECT to_tsvector('english', title) FROM papers
                   WHERE id % 50 = 0 LIMIT 20000$$)
               WHERE length(word) > 3 ORDER BY ndoc DESC"""
        )
        words = [r["word"] for r in rows if r["word"].isalpha()]
        common = words[:6]
        # The demo's vocabulary is small and has no truly rare word: "rare" is the least frequent words of the
        # first 25,000 papers.
        abstract_rows = await conn.fetch(
            """SELECT word FROM ts_stat($$SELECT search_vector FROM papers WHERE id <= 25000$$)
               WHERE length(word) > 4 AND word ~ '^[a-z]+$' ORDER BY ndoc, word LIMIT 60"""
        )
        rare = [r["word"] for r in abstract_rows]
        random.Random(7).shuffle(rare)
        names = await conn.fetch("SELECT name FROM researchers ORDER BY paper_count DESC LIMIT 200")
        prefixes: list[str] = []
        for r in names[::20]:
            last = r["name"].split()[-1]
            prefixes += [last[:4], last]
        institutions = await conn.fetch("SELECT name FROM institutions ORDER BY paper_count DESC LIMIT 5")
        prefixes += [i["name"].split()[0][:5] for i in institutions]
        return common, rare[:6], prefixes, int(papers)
    finally:
        await conn.close()


async def embedding_throughput(dsn: str, n: int) -> dict[str, Any]:
    import semantic
    from semantic.service import backend

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT title, abstract FROM papers ORDER BY id LIMIT $1", n)
    finally:
        await conn.close()
    started = time.perf_counter()
    semantic.get_embedder()
    load_s = time.perf_counter() - started
    pairs = [(r["title"], r["abstract"]) for r in rows]
    semantic.embed_papers(pairs[:32])  # warm-up
    started = time.perf_counter()
    for i in range(0, len(pairs), 64):
        semantic.embed_papers(pairs[i : i + 64])
    seconds = time.perf_counter() - started
    queries = [
        f"recent results on {w} and {v}"
        for w, v in zip(
            ["graph", "quantum", "dark", "neural", "spin"] * 8,
            ["matter", "codes", "lensing", "nets", "glass"] * 8,
            strict=True,
        )
    ]
    query_times = []
    for i, q in enumerate(queries):
        started = time.perf_counter()
        semantic.embed_query(f"{q} {i}")
        query_times.append((time.perf_counter() - started) * 1000)
    return {
        "papers": len(pairs),
        "papers_per_s": round(len(pairs) / seconds, 1),
        "model_load_s": round(load_s, 1),
        "query_embedding": summary("query embedding", query_times),
        "backend": backend(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="keyword search and autocomplete")
    parser.add_argument("--vector-database-url", help="semantic and hybrid search (pgvector, embeddings filled)")
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--embed-papers", type=int, default=512, help="papers for the embedding throughput")
    args = parser.parse_args()

    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    common, rare, prefixes, papers = asyncio.run(pick_terms(args.database_url))
    results["keyword_database_papers"] = papers
    results["terms"] = {"common": common, "rare": rare, "autocomplete": prefixes}
    rows: list[dict[str, Any]] = []
    with server(args.database_url) as url:
        for label, terms in (("keyword+facets, common term", common), ("keyword+facets, rare term", rare)):
            times, answers = timed_requests(url, KEYWORD, [{"q": t} for t in terms], args.runs)
            matched = statistics.median(a["search"]["totalCount"] for a in answers)
            rows.append(summary(label, times, {"median_matches": matched}))
        times, _ = timed_requests(url, KEYWORD, [{"q": t, "sort": "NEWEST"} for t in common], args.runs)
        rows.append(summary("keyword+facets, common term, newest first", times))
        phrase = [{"q": f'"{a} {b}"'} for a, b in zip(common, common[1:], strict=False)]
        times, answers = timed_requests(url, KEYWORD, phrase, args.runs)
        rows.append(summary("keyword+facets, two common terms as phrase", times))
        times, _ = timed_requests(url, AUTOCOMPLETE, [{"q": p} for p in prefixes], args.runs * 2)
        rows.append(summary("autocomplete (researchers + institutions, the default kinds)", times))
    if args.vector_database_url:
        with server(args.vector_database_url, semantic=True) as url:
            results["vector_database_papers"] = asyncio.run(_count(args.vector_database_url))
            for mode in ("SEMANTIC", "HYBRID"):
                sets = [{"q": q, "mode": mode} for q in SEMANTIC_QUERIES]
                times, _ = timed_requests(url, KEYWORD, sets, args.runs, warmup=2)
                rows.append(summary(f"{mode.lower()} + facets (query vector cached)", times))
        results["embedding"] = asyncio.run(embedding_throughput(args.vector_database_url, args.embed_papers))
        rows.append(results["embedding"]["query_embedding"])
    results["rows"] = rows
    out = ROOT / "bench" / "results" / f"search-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"keyword database: {papers} papers; vector database: {results.get('vector_database_papers')} papers")
    print("| what | n | p50 ms | p90 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['name']} | {r['n']} | {r['p50_ms']} | {r['p90_ms']} | {r['p99_ms']} | {r['max_ms']} |")
    if "embedding" in results:
        e = results["embedding"]
        print(
            f"embedding throughput: {e['papers_per_s']} papers/s over {e['papers']} papers "
            f"({e['backend']}; model load {e['model_load_s']} s)"
        )
    print(f"-> {out}")


async def _count(dsn: str) -> dict[str, int]:
    conn = await asyncpg.connect(dsn)
    try:
        row = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM papers) AS papers, (SELECT count(*) FROM paper_embeddings) AS embedded"
        )
        assert row is not None
        return {"papers": row["papers"], "embedded": row["embedded"]}
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
