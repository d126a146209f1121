"""Chat benchmark: how long a reader waits for the first `sources` and `delta` events, without the model's latency.

    .venv/bin/python -m bench.chat --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench_13 \
        [--runs 200] [--semantic]

The model is the fake OpenAI-compatible server of the tests (tests/fake_model.py) on loopback, answering at
once, so what is timed is ours: retrieval, prompt assembly, the quota and the stream. Two measurements:

- in-process, `ChatService.start()` (quota, retrieval, prompt; what runs before `sources` is sent) and its
  parts (`retrieve`, `build_prompt`), one question at a time;
- over HTTP, the app under uvicorn (one worker, a process of its own) and a client reading the stream: time
  to the first `sources` and the first `delta` event, one request at a time.

Questions come from the database: two to four words from random titles (archive-wide), a random researcher
with papers (scoped), a random paper, and the 24 newest papers of a category (a list page's scope).
Results: a Markdown table on stdout and bench/results/chat-<stamp>.json.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from app import create_app
from chat.prompt import build_prompt
from chat.retrieval import ChatScope, retrieve
from chat.service import ChatService, Question
from llm import ModelClient
from tests.fake_model import fake_model_in_thread, reply

ROOT = Path(__file__).resolve().parent.parent
STOP = {"a", "an", "and", "for", "from", "in", "of", "on", "the", "to", "with", "via", "by", "at", "is", "its"}


async def verify(scope: object, token: str) -> str:
    return token


async def questions(dsn: str, n: int, seed: int) -> list[tuple[str, str, dict[str, Any] | None]]:
    """(kind, question, scope as /chat takes it)."""
    rng = random.Random(seed)
    conn = await asyncpg.connect(dsn)
    try:
        count = await conn.fetchval("SELECT max(id) FROM papers")
        titles = [
            r["title"]
            for r in await conn.fetch(
                "SELECT title FROM papers WHERE id = any($1::bigint[])", rng.sample(range(1, count), n)
            )
        ]
        researchers = [
            r["id"]
            for r in await conn.fetch("SELECT id FROM researchers WHERE paper_count >= 5 ORDER BY random() LIMIT $1", n)
        ]
        papers = [r["arxiv_id"] for r in await conn.fetch("SELECT arxiv_id FROM papers ORDER BY random() LIMIT $1", n)]
        categories = [r["primary_category"] for r in await conn.fetch("SELECT DISTINCT primary_category FROM papers")]
        lists = []
        for category in rng.sample(categories, min(len(categories), 20)):
            ids = await conn.fetch(
                "SELECT arxiv_id FROM papers WHERE primary_category = $1 ORDER BY published DESC LIMIT 24", category
            )
            lists.append([r["arxiv_id"] for r in ids])
    finally:
        await conn.close()
    out: list[tuple[str, str, dict[str, Any] | None]] = []
    for i in range(n):
        words = [w for w in titles[i].replace(":", " ").replace(",", " ").split() if w.lower() not in STOP]
        picked = " ".join(rng.sample(words, min(len(words), rng.randint(2, 4))))
        kind = ("archive", "archive", "researcher", "paper", "papers")[i % 5]
        if kind == "archive":
            out.append((kind, f"What do these papers say about {picked}?", None))
        elif kind == "researcher":
            out.append(
                (
                    kind,
                    f"What has this researcher found about {picked}?",
                    {"researcher": str(researchers[i % len(researchers)])},
                )
            )
        elif kind == "paper":
            out.append((kind, "What does this paper show?", {"paper": papers[i]}))
        else:
            out.append((kind, f"Which of these is about {picked}?", {"papers": lists[i % len(lists)]}))
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": statistics.median(values), "p95": pct(values, 95), "max": max(values)}


async def scope_of(pool: asyncpg.Pool, scope: dict[str, Any] | None) -> ChatScope:
    if not scope:
        return ChatScope()
    async with pool.acquire() as conn:
        if "researcher" in scope:
            return ChatScope("researcher", (int(scope["researcher"]),))
        ids = scope["papers"] if "papers" in scope else [scope["paper"]]
        rows = await conn.fetch("SELECT id FROM papers WHERE arxiv_id = any($1::text[])", ids)
        return ChatScope("papers" if "papers" in scope else "paper", tuple(r["id"] for r in rows))


async def in_process(dsn: str, asked: list[tuple[str, str, dict[str, Any] | None]], semantic: bool) -> dict[str, Any]:
    pool = await asyncpg.create_pool(dsn, min_size=2, max_size=4)
    # start() asks no model: a client pointed nowhere is enough.
    service = ChatService(pool, ModelClient("http://127.0.0.1:9/v1", model="none"), 10**9, semantic=semantic)
    timings: dict[str, list[float]] = {"start": [], "retrieve": [], "prompt": []}
    by_kind: dict[str, list[float]] = {}
    try:
        scopes = [await scope_of(pool, s) for _, _, s in asked]
        for (_, text, _), scope in zip(asked[:10], scopes[:10], strict=True):  # warm-up
            await service.start(Question("bench", text, scope))
        for (kind, text, _), scope in zip(asked, scopes, strict=True):
            t0 = time.perf_counter()
            await service.start(Question("bench", text, scope))
            t1 = time.perf_counter()
            papers = await retrieve(pool, text, scope, semantic=semantic)
            t2 = time.perf_counter()
            build_prompt(text, papers, scope_kind=scope.kind)
            t3 = time.perf_counter()
            timings["start"].append((t1 - t0) * 1000)
            timings["retrieve"].append((t2 - t1) * 1000)
            timings["prompt"].append((t3 - t2) * 1000)
            by_kind.setdefault(kind, []).append((t1 - t0) * 1000)
    finally:
        await pool.close()
    return {
        "all": {k: summary(v) for k, v in timings.items()},
        "start_by_kind": {k: summary(v) for k, v in by_kind.items()},
    }


def bench_app() -> Any:
    """The app as the server process builds it (`uvicorn --factory bench.chat:bench_app`): settings from the
    environment, and any bearer token is a reader (its own name)."""
    return create_app(bearer_authenticator=verify)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_in_subprocess(env: dict[str, str]) -> tuple[str, Callable[[], None]]:
    """One uvicorn worker in a process of its own, as in production (a client in the same process as the
    server adds tens of milliseconds to every request, whatever it asks)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "bench.chat:bench_app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**os.environ, **env},
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        proc.kill()
        raise RuntimeError("the server did not start")

    def stop() -> None:
        proc.terminate()
        proc.wait(30)

    return base, stop


async def over_http(base: str, asked: list[tuple[str, str, dict[str, Any] | None]]) -> dict[str, Any]:
    first_sources: list[float] = []
    first_delta: list[float] = []
    by_kind: dict[str, list[float]] = {}
    async with httpx.AsyncClient(base_url=base, timeout=60, headers={"authorization": "Bearer bench"}) as client:
        for i, (kind, text, scope) in enumerate([*asked[:10], *asked]):
            body = {"question": text, **({"scope": scope} if scope else {})}
            t0 = time.perf_counter()
            sources = delta = None
            async with client.stream("POST", "/chat", json=body) as response:
                async for line in response.aiter_lines():
                    if line == "event: sources" and sources is None:
                        sources = time.perf_counter()
                    elif line == "event: delta" and delta is None:
                        delta = time.perf_counter()
                    elif line.startswith("event: error"):
                        raise RuntimeError(f"error event for {body}")
            if i < 10 or sources is None or delta is None:
                continue  # warm-up
            first_sources.append((sources - t0) * 1000)
            first_delta.append((delta - t0) * 1000)
            by_kind.setdefault(kind, []).append((sources - t0) * 1000)
    return {
        "first_sources": summary(first_sources),
        "first_delta": summary(first_delta),
        "first_sources_by_kind": {k: summary(v) for k, v in by_kind.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--semantic", action="store_true", help="hybrid retrieval (needs the model and pgvector)")
    args = parser.parse_args()
    asked = asyncio.run(questions(args.database_url, args.runs, args.seed))
    papers = asyncio.run(_count(args.database_url))
    result: dict[str, Any] = {"papers": papers, "runs": args.runs, "semantic": args.semantic}
    result["in_process"] = asyncio.run(in_process(args.database_url, asked, args.semantic))
    # The model answers at once: a role chunk, then the text; what is timed is the app.
    with fake_model_in_thread(lambda received: reply("An answer [arXiv:0000.00000].", usage=(500, 10))) as model:
        env = {
            "DATABASE_URL": args.database_url,
            "WOVEPAPER_LLM_API_URL": model.base_url,
            "WOVEPAPER_LLM_MODEL": "fake",
            "WOVEPAPER_LLM_RPS": "10000",
            "WOVEPAPER_CHAT_DAILY_MESSAGES": str(10**9),
            "WOVEPAPER_SEMANTIC_SEARCH": "true" if args.semantic else "false",
            "WOVEPAPER_SEMANTIC_PRELOAD": "true" if args.semantic else "false",
            "WOVEPAPER_STATEMENT_TIMEOUT_MS": "30000",
        }
        base, stop = serve_in_subprocess(env)
        try:
            result["http"] = asyncio.run(over_http(base, asked))
        finally:
            stop()
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / f"chat-{stamp}.json").write_text(json.dumps(result, indent=2))
    print(f"{papers:,} papers, {args.runs} questions, {'hybrid' if args.semantic else 'keyword'} retrieval")
    print("| measure | p50 ms | p95 ms | max ms |\n| --- | ---: | ---: | ---: |")
    rows = [
        ("start(): quota + retrieval + prompt", result["in_process"]["all"]["start"]),
        ("retrieve()", result["in_process"]["all"]["retrieve"]),
        ("build_prompt()", result["in_process"]["all"]["prompt"]),
        ("HTTP: first `sources` event", result["http"]["first_sources"]),
        ("HTTP: first `delta` event", result["http"]["first_delta"]),
        *((f"start(), {k}", v) for k, v in result["in_process"]["start_by_kind"].items()),
    ]
    for name, s in rows:
        print(f"| {name} | {s['p50']:.1f} | {s['p95']:.1f} | {s['max']:.1f} |")


async def _count(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        return int(await conn.fetchval("SELECT count(*) FROM papers"))
    finally:
        await conn.close()


if __name__ == "__main__":
    main()
