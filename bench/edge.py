"""The edge's price: ResearcherPage req/s with query cost and rate limiting on, and with both off; and a
persisted GET answered from the response cache against the POST that runs GraphQL.

    .venv/bin/python -m bench.edge --database-url postgresql://... --redis-url redis://... [--rounds 3]

The API runs as one uvicorn worker in a subprocess per variant; a Python client (httpx, 16 concurrent
requests) drives it for --seconds after a warm-up, with a random researcher id per request. Variants
alternate (on, off, on, off, ...) so a busy shared machine hurts both alike; the ratio is per round.
The load average is printed with every run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
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

from edge.persisted import operation_documents

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = operation_documents(ROOT / "frontend_contract" / "operations")["ResearcherPage"]
# Not a contract document: executed every time, never answered by the response cache.
EXECUTED = PAGE.replace("query ResearcherPage", "query BenchResearcherPage")
APP = """
import os
import schema.extensions as guard
if os.environ.get("BENCH_NO_COST"):
    # The guard without the cost measure: what the request costs without query cost analysis.
    guard.measure = lambda *a, **k: guard.Measure(0, 0, 0, 0, 0, 0, 0, 0)
from app import create_app as create
"""


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(env: dict[str, str]) -> Iterator[tuple[str, int]]:
    port = free_port()
    bench_app = ROOT / "bench" / "_edge_app.py"
    bench_app.write_text(APP)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bench._edge_app:create",
            "--factory",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}, **env},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield base, proc.pid
    finally:
        proc.terminate()
        proc.wait(20)
        bench_app.unlink(missing_ok=True)


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


async def drive(served: tuple[str, int], make: object, seconds: float, concurrency: int = 16) -> tuple[float, float]:
    """Requests per second over `seconds` (after a 2 s warm-up), and the server's CPU milliseconds per request;
    every response must be a 200 (or 304) without errors."""
    base, pid = served
    stop = 0.0
    done = 0

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal done
        while time.monotonic() < stop:
            method, kwargs = make()  # type: ignore[operator]
            r = await client.request(method, "/graphql", **kwargs)
            assert r.status_code in (200, 304) and b'"errors"' not in r.content, r.text[:300]
            done += 1

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=limits) as client:
        stop = time.monotonic() + 2
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        done = 0
        cpu = cpu_seconds(pid)
        started = time.monotonic()
        stop = started + seconds
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed = time.monotonic() - started
        return done / elapsed, (cpu_seconds(pid) - cpu) * 1000 / max(done, 1)


async def researcher_ids(database_url: str) -> list[int]:
    conn = await asyncpg.connect(database_url)
    try:
        return [r["id"] for r in await conn.fetch("SELECT id FROM researchers ORDER BY paper_count DESC LIMIT 2000")]
    finally:
        await conn.close()


async def decompose(database_url: str, redis_url: str, ids: list[int], n: int = 2000) -> None:
    """CPU per call of each edge piece, in this process, against the CPU of a whole executed request:
    stable on a busy machine, where req/s ratios swing by tens of percent."""
    from graphql import parse

    from db.cache.client import create_redis
    from db.cache.store import CacheStore
    from edge.ratelimit import RateLimiter
    from schema import build_schema
    from schema.cost import measure
    from schema.extensions import Caches
    from settings import Settings

    def per_call(seconds: float, calls: int) -> float:
        return seconds / calls * 1e6

    schema = build_schema(Settings())
    document = parse(EXECUTED)
    started = time.process_time()
    for _ in range(n):
        measure(schema._schema, document, variables={"id": "1"})
    uncached = per_call(time.process_time() - started, n)

    class Ec:  # the fields of Strawberry's execution context the cache reads
        query = EXECUTED
        operation_name = None
        variables = {"id": "1"}

    Ec.schema = schema  # type: ignore[attr-defined]
    caches = Caches.create()
    caches.measure(Ec, document)
    started = time.process_time()
    for i in range(n):
        Ec.variables = {"id": str(i)}
        caches.measure(Ec, document)
    cached = per_call(time.process_time() - started, n)

    store = CacheStore(create_redis(redis_url, timeout_s=1.0), namespace="bench-edge-decompose", ttl_s=60)
    limiter = RateLimiter(store)
    await limiter.charge("ip:bench", 1, 10**9)
    started, wall = time.process_time(), time.monotonic()
    for _ in range(n):
        await limiter.charge("ip:bench", 1, 10**9)
    charge = per_call(time.process_time() - started, n)
    charge_wall = per_call(time.monotonic() - wall, n)
    await store.aclose()

    from app import create_app

    app = create_app(
        Settings(DATABASE_URL=database_url, REDIS_URL=redis_url, semantic_preload=False, rate_limits="off")
    )
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            await app({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            body = {"query": EXECUTED, "variables": {"id": "1"}}
            for _ in range(20):
                await client.post("/graphql", json=body)
            requests = 300
            started = time.process_time()
            for i in range(requests):
                body["variables"] = {"id": str(ids[i % len(ids)])}
                await client.post("/graphql", json=body)
            whole = per_call(time.process_time() - started, requests)
    print(f"measure ResearcherPage, first time: {uncached:.0f} us; from the cache: {cached:.1f} us")
    print(f"rate-limit charge in Redis: {charge:.0f} us CPU ({charge_wall:.0f} us wall)")
    print(f"whole executed ResearcherPage request in process (client included): {whole:.0f} us CPU")
    print(f"edge on a cached document: {(cached + charge) / whole * 100:.1f}% of the request's CPU")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--decompose", action="store_true", help="only the per-piece CPU, in this process")
    args = parser.parse_args()
    ids = asyncio.run(researcher_ids(args.database_url))
    if args.decompose:
        asyncio.run(decompose(args.database_url, args.redis_url, ids))
        return
    base_env = {
        "DATABASE_URL": args.database_url,
        "REDIS_URL": args.redis_url,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
        "WOVEPAPER_CACHE_NAMESPACE": "bench-edge",
        "WOVEPAPER_ANON_POINTS_PER_HOUR": "1000000000",
    }
    variants = {
        "edge on (cost + rate limit)": base_env,
        "edge off": {**base_env, "WOVEPAPER_RATE_LIMITS": "off", "BENCH_NO_COST": "1"},
    }

    def executed() -> tuple[str, dict[str, object]]:
        return "POST", {"json": {"query": EXECUTED, "variables": {"id": str(random.choice(ids))}}}

    hot = ids[:50]  # the response cache's working set: 50 pages, warm after the warm-up

    def persisted_get() -> tuple[str, dict[str, object]]:
        document_id = "sha256:" + __import__("hashlib").sha256(PAGE.encode()).hexdigest()
        variables = json.dumps({"id": str(random.choice(hot))})
        return "GET", {"params": {"documentId": document_id, "variables": variables}}

    def cached_post() -> tuple[str, dict[str, object]]:
        return "POST", {"json": {"query": PAGE, "variables": {"id": str(random.choice(hot))}}}

    results: dict[str, list[tuple[float, float]]] = {}
    ratios: list[tuple[float, float]] = []

    def record(round_no: int, name: str, got: tuple[float, float]) -> None:
        load = os.getloadavg()[0]
        print(f"round {round_no + 1} {name}: {got[0]:.1f} req/s, {got[1]:.2f} ms CPU/req (load {load:.1f})", flush=True)
        results.setdefault(name, []).append(got)

    for round_no in range(args.rounds):
        order = list(variants.items()) if round_no % 2 == 0 else list(reversed(variants.items()))
        got: dict[str, tuple[float, float]] = {}
        for name, env in order:
            with server(env) as served:
                got[name] = asyncio.run(drive(served, executed, args.seconds))
            record(round_no, name, got[name])
        on, off = got["edge on (cost + rate limit)"], got["edge off"]
        ratios.append((on[0] / off[0], on[1] / off[1]))
        with server(base_env) as served:
            for name, make in (
                ("persisted GET, cache hit", persisted_get),
                ("POST, cache hit", cached_post),
                ("POST, executed", executed),
            ):
                record(round_no, name, asyncio.run(drive(served, make, args.seconds)))
    print()
    print("| variant | req/s per round | median req/s | server CPU ms/req per round | median ms/req |")
    print("| --- | --- | ---: | --- | ---: |")
    for name, values in results.items():
        rps = [v[0] for v in values]
        cpu = [v[1] for v in values]
        print(
            f"| {name} | {', '.join(f'{v:.0f}' for v in rps)} | {statistics.median(rps):.0f} "
            f"| {', '.join(f'{v:.2f}' for v in cpu)} | {statistics.median(cpu):.2f} |"
        )
    rps_ratio = statistics.median(r[0] for r in ratios)
    cpu_ratio = statistics.median(r[1] for r in ratios)
    print(f"\non/off req/s per round: {', '.join(f'{r[0]:.3f}' for r in ratios)}; median {rps_ratio:.3f}")
    print(f"on/off CPU per request per round: {', '.join(f'{r[1]:.3f}' for r in ratios)}; median {cpu_ratio:.3f}")


if __name__ == "__main__":
    main()
