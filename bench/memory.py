"""A worker's resident memory under floods of requests, each with a distinct large variable (900 KB by default),
through every kind of document (tests/drills/memory.py): 1,000 requests per kind, RSS before and after, as a table.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \
        .venv/bin/python -m bench.memory [--requests 1000] [--concurrency 8]

Creates a throwaway database with a small demo data set (dropped at the end) and serves it with `wovepaper serve`
(one worker) on a free loopback port, rate limits on: one worker with a budget no flood spends, flooded with each
kind in turn, and one with a budget of one point, spent first, for the requests refused with 429. Each worker is
warmed with a few requests of each kind first (the first request of a kind loads code and fills pools)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from collections import Counter
from pathlib import Path

import httpx

from tests.drills.memory import KINDS, SPENT_BUDGET_KINDS, Flood, flood, prepare, rss_kb, spend_budget, table
from tests.drills.scenarios import throwaway_demo_database
from tests.server_process import start_api


async def serve_and_flood(
    dsn: str, redis_url: str, kinds: list[str], *, budget: int, args: argparse.Namespace, work: Path
) -> list[Flood]:
    env = {
        "DATABASE_URL": dsn,
        "REDIS_URL": redis_url,
        "WOVEPAPER_CACHE_NAMESPACE": f"mem{uuid.uuid4().hex[:8]}",
        "WOVEPAPER_RATE_LIMITS": "on",
        "WOVEPAPER_ANON_POINTS_PER_HOUR": str(budget),
    }
    api = start_api(env, work / f"api-{budget}.log")
    floods = []
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=120) as client:
            await prepare(client)
            if budget == 1:
                await spend_budget(client)
            number = 0
            for kind in kinds:  # warm-up
                await flood(api.url, api.process.pid, kind, requests=args.concurrency * 2, first=number, settle_s=0)
                number += args.concurrency * 2
            for kind in kinds:
                done = await flood(
                    api.url, api.process.pid, kind, requests=args.requests, concurrency=args.concurrency, first=number
                )
                number += args.requests
                print(f"{kind}: {done.growth_mb:+.1f} MB ({dict(done.outcomes)})", file=sys.stderr)
                floods.append(done)
            await asyncio.sleep(args.idle)
            floods.append(Flood("idle", 0, args.idle, floods[-1].rss_after_kb, rss_kb(api.process.pid), Counter()))
    finally:
        api.stop()
    return floods


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1000, help="per kind")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--papers", type=int, default=300)
    parser.add_argument("--idle", type=float, default=10.0, help="seconds idle after the floods, RSS read again")
    parser.add_argument("--kinds", default=",".join(KINDS))
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    async with throwaway_demo_database(os.environ["DATABASE_URL"], papers=args.papers, prefix="wovepaper_mem") as dsn:
        with tempfile.TemporaryDirectory(prefix="wovepaper-mem-") as tmp:
            redis_url = os.environ["REDIS_URL"]
            floods = await serve_and_flood(
                dsn,
                redis_url,
                [k for k in kinds if k not in SPENT_BUDGET_KINDS],
                budget=10**9,
                args=args,
                work=Path(tmp),
            )
            spent = [k for k in kinds if k in SPENT_BUDGET_KINDS]
            if spent:
                floods += await serve_and_flood(dsn, redis_url, spent, budget=1, args=args, work=Path(tmp))
    print(table(floods))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
