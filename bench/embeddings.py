"""Embedding benchmark: the reference (PyTorch) against the ONNX graphs, side by side in one run.

    .venv/bin/python -m bench.embeddings --database-url postgresql://postgres@127.0.0.1:5432/<a database with papers> \
        [--papers 1000] [--rounds 5] [--earlier-batch-graph <an earlier export's model-batch-int8.onnx>]

For each variant: query embedding latency (one short query, uncached, p50/p95 over every round), ingest throughput
(papers/s, batches of 64 title + abstract texts as `wovepaper embed` sends them) and recall@10 against the
reference: for each query, the 10 papers nearest under the reference vectors against the 10 nearest under the
variant's, both with the query embedded by the variant and the papers still stored as reference vectors (the
state right after a switch) and with everything embedded by the variant (after a full re-embed). Each ONNX
variant runs one of the three graphs for queries and batches alike; the bfloat16 variant runs batches through the
reference model in bfloat16 (`semantic.bf16`, served on CPUs with AMX) and queries through the query graph; the
served row pairs the queries and papers of what this CPU serves with (`query_graph`; `batch_graph`, or bfloat16
where `batches_in_bf16`), and their latency with their throughput. Timings
alternate between the variants round by round, so that the machine's load falls on all of them alike.
Results: bench/results/embeddings-<stamp>.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import numpy as np

import semantic
from bench.search import SEMANTIC_QUERIES
from semantic.bf16 import batches_in_bf16
from semantic.onnx_export import ensure_onnx_files
from semantic.onnx_runtime import OnnxEmbedder, batch_graph, query_graph
from semantic.reference import TorchEmbedder

ROOT = Path(__file__).resolve().parent.parent
BATCH = 64
CORES = os.cpu_count() or 1
K = 10
FP32 = "onnx fp32"
BLOCKS = "onnx int8 blocks (query graph)"
CHANNELS = "onnx int8 per channel (batch graph)"
BF16 = "torch bf16 batches (queries: query graph)"
TOPICS = [
    *SEMANTIC_QUERIES,
    "reinforcement learning for robot control",
    "topological insulators and edge states",
    "language models and attention",
    "cosmic microwave background anisotropies",
    "convex optimisation with stochastic gradients",
    "protein folding prediction",
    "spin glasses and disorder",
    "exoplanet atmospheres spectroscopy",
    "random matrix theory eigenvalues",
    "privacy in federated learning",
]


@dataclass
class Variant:
    name: str
    embedder: semantic.Embedder
    query_ms: list[float] = field(default_factory=list)
    query_cpu_ms: list[float] = field(default_factory=list)
    ingest_s: list[float] = field(default_factory=list)
    ingest_cpu_s: list[float] = field(default_factory=list)
    papers: np.ndarray | None = None
    queries: np.ndarray | None = None


async def load_texts(dsn: str, n: int) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        total = await conn.fetchval("SELECT count(*) FROM papers")
        step = max(1, total // n)
        rows = await conn.fetch("SELECT title, abstract FROM papers WHERE id % $1 = 0 ORDER BY id LIMIT $2", step, n)
    finally:
        await conn.close()
    return [semantic.paper_text(r["title"], r["abstract"]) for r in rows]


def query_texts(papers: Sequence[str], n: int) -> list[str]:
    """Topic queries, then paper titles (short, query-like texts whose neighbours are well defined)."""
    titles = [text.split("\n", 1)[0] for text in papers[:: max(1, len(papers) // n)]]
    return (TOPICS + titles)[:n]


def time_queries(variant: Variant, queries: Sequence[str], round_no: int) -> None:
    for q in queries:
        text = f"{q} {round_no}"  # a new string each round: no cache anywhere can answer it
        started, cpu = time.perf_counter(), time.process_time()
        variant.embedder.embed_query(text)
        variant.query_ms.append((time.perf_counter() - started) * 1000)
        variant.query_cpu_ms.append((time.process_time() - cpu) * 1000)


def time_ingest(variant: Variant, texts: Sequence[str]) -> np.ndarray:
    started, cpu = time.perf_counter(), time.process_time()
    vectors: list[list[float]] = []
    for i in range(0, len(texts), BATCH):
        vectors += variant.embedder.embed(texts[i : i + BATCH])
    variant.ingest_s.append(time.perf_counter() - started)
    variant.ingest_cpu_s.append(time.process_time() - cpu)
    return np.asarray(vectors, dtype=np.float32)


def top_k(queries: np.ndarray, papers: np.ndarray) -> list[set[int]]:
    scores = queries @ papers.T
    return [set(np.argsort(-row)[:K].tolist()) for row in scores]


def recall(truth: list[set[int]], found: list[set[int]]) -> float:
    return float(np.mean([len(t & f) / K for t, f in zip(truth, found, strict=True)]))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))]


def report(variants: list[Variant], papers: int) -> list[dict[str, Any]]:
    ref = variants[0]
    assert ref.papers is not None and ref.queries is not None
    truth = top_k(ref.queries, ref.papers)
    rows = []
    for v in variants:
        assert v.papers is not None and v.queries is not None
        cos = np.sum(v.papers * ref.papers, axis=1)
        rows.append(
            {
                "variant": v.name,
                "query_p50_ms": round(statistics.median(v.query_ms), 2),
                "query_p95_ms": round(pct(v.query_ms, 95), 2),
                "query_cpu_p50_ms": round(statistics.median(v.query_cpu_ms), 2),
                "queries_timed": len(v.query_ms),
                "ingest_papers_per_s": round(papers / statistics.median(v.ingest_s), 1),
                "ingest_runs_s": [round(s, 1) for s in v.ingest_s],
                # What the cores would give if the process had them to itself: papers per CPU-second, times the
                # cores (the batch runs on every core; on a shared machine the wall clock says more about the others).
                "ingest_papers_per_cpu_s_x_cores": round(papers / statistics.median(v.ingest_cpu_s) * CORES, 1),
                "recall10_query_vs_reference_papers": round(recall(truth, top_k(v.queries, ref.papers)), 4),
                "recall10_all_reembedded": round(recall(truth, top_k(v.queries, v.papers)), 4),
                "paper_cosine_min": round(float(cos.min()), 4),
                "paper_cosine_mean": round(float(cos.mean()), 4),
            }
        )
    by_name = {v.name: v for v in variants}
    # What this CPU serves with: each graph's variant.
    files = ensure_onnx_files()
    graphs = {files.fp32: FP32, files.query: BLOCKS, files.batch: CHANNELS}
    asked = by_name.get(graphs[query_graph(files)])
    embedded = by_name.get(BF16 if batches_in_bf16() else graphs[batch_graph(files)])
    if asked is not None and embedded is not None and asked.queries is not None and embedded.papers is not None:
        by_row = {r["variant"]: r for r in rows}
        rows.append(
            {
                "variant": f"as served (queries: {asked.name}; papers: {embedded.name})",
                "query_p50_ms": by_row[asked.name]["query_p50_ms"],
                "ingest_papers_per_s": by_row[embedded.name]["ingest_papers_per_s"],
                "recall10_query_vs_reference_papers": round(recall(truth, top_k(asked.queries, ref.papers)), 4),
                "recall10_all_reembedded": round(recall(truth, top_k(asked.queries, embedded.papers)), 4),
            }
        )
    return rows


def build_variants(names: Sequence[str], earlier_batch: Path | None = None) -> list[Variant]:
    """Each ONNX variant runs one graph for both queries and batches; the served pair is reported from two.
    `earlier_batch`: another batch graph (an earlier export's), run as the served one is, for a side-by-side."""
    files = ensure_onnx_files()
    makers: dict[str, Callable[[], semantic.Embedder]] = {
        "torch (reference)": TorchEmbedder,
        FP32: lambda: OnnxEmbedder(query=files.fp32, batch=files.fp32),
        BLOCKS: lambda: OnnxEmbedder(query=files.query, batch=files.query),
        CHANNELS: lambda: OnnxEmbedder(query=files.batch, batch=files.batch),
        BF16: lambda: OnnxEmbedder(query=files.query, bf16_batches=True),
    }
    variants = [Variant(name, makers[name]()) for name in ["torch (reference)", *names]]
    if earlier_batch is not None:
        variants.append(Variant(f"{CHANNELS}, {earlier_batch}", OnnxEmbedder(query=files.query, batch=earlier_batch)))
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True, help="a database whose papers are embedded")
    parser.add_argument("--papers", type=int, default=1000, help="papers embedded per variant (and searched)")
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of query timings")
    parser.add_argument("--ingest-rounds", type=int, default=1)
    parser.add_argument(
        "--earlier-batch-graph", type=Path, help="an earlier export's batch graph, timed and scored beside this one"
    )
    args = parser.parse_args()

    texts = asyncio.run(load_texts(args.database_url, args.papers))
    queries = query_texts(texts, args.queries)
    started = time.perf_counter()
    variants = build_variants([FP32, BLOCKS, CHANNELS, BF16], args.earlier_batch_graph)
    load_s = time.perf_counter() - started
    for v in variants:  # warm-up: first runs allocate
        v.embedder.embed(texts[:BATCH])
        v.embedder.embed_query("warm up")
    for r in range(args.rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            time_queries(v, queries, r)
    for r in range(args.ingest_rounds):
        for v in variants if r % 2 == 0 else variants[::-1]:
            v.papers = time_ingest(v, texts)
    for v in variants:
        v.queries = np.asarray([v.embedder.embed_query(q) for q in queries], dtype=np.float32)
    rows = report(variants, len(texts))
    results = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "papers": len(texts),
        "queries": len(queries),
        "mean_paper_tokens": _mean_tokens(texts),
        "load_s": round(load_s, 1),
        "load_average": os.getloadavg(),
        "torch_threads": __import__("torch").get_num_threads(),
        "onnxruntime": __import__("onnxruntime").__version__,
        "rows": rows,
    }
    out = ROOT / "bench" / "results" / f"embeddings-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(
        f"{len(texts)} papers (mean {results['mean_paper_tokens']} tokens), {len(queries)} queries; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        "| variant | query p50 ms | query p95 ms | query CPU p50 ms | ingest papers/s | papers per CPU-s x cores "
        "| recall@10 (query only) | recall@10 (all) | paper cosine min / mean |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        print(
            f"| {row['variant']} | {row.get('query_p50_ms', '')} | {row.get('query_p95_ms', '')} "
            f"| {row.get('query_cpu_p50_ms', '')} | {row.get('ingest_papers_per_s', '')} "
            f"| {row.get('ingest_papers_per_cpu_s_x_cores', '')} "
            f"| {row['recall10_query_vs_reference_papers']} | {row['recall10_all_reembedded']} "
            f"| {row.get('paper_cosine_min', '')} / {row.get('paper_cosine_mean', '')} |"
        )
    print(f"-> {out}")


def _mean_tokens(texts: Sequence[str]) -> float:
    from semantic.embedder import bundled_model_dir
    from semantic.onnx_session import load_tokenizer

    tokenizer = load_tokenizer(bundled_model_dir())
    return round(statistics.mean(len(e.ids) for e in tokenizer.encode_batch(list(texts))), 1)


if __name__ == "__main__":
    main()
