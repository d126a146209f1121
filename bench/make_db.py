"""Build the benchmark database: the demo generator at 1M papers (or --papers N), ids numbered densely.

    .venv/bin/python -m bench.make_db --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench

The database must exist and may be empty; it is migrated first. The API numbers in RESULTS.md were
measured on a database this built while the demo generator's arXiv id minting could not reach 1M
papers (its gaps ran old-style months such as cs/9801 out of their 999 numbers); here ids are
numbered without gaps, every other row is the demo generator's. bench/generate.py runs the fixed
demo generator unchanged and is the way to build a fresh one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from typing import Any

import asyncpg

import demo
from db.migrate import migrate


def _dense_next(self: Any, key: tuple[str, str], cap: int, expected: float, rng: random.Random) -> int:
    seq = int(self.last.get(key, 0)) + 1
    if seq > cap:
        raise ValueError(f"too many papers in {key} for its arXiv id range")
    self.last[key] = seq
    return seq


async def build(dsn: str, papers: int, seed: int) -> None:
    demo._IdMinter._next = _dense_next  # type: ignore[method-assign]
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        started = time.monotonic()

        def progress(stage: str, done: int, total: int) -> None:
            print(f"{time.monotonic() - started:7.0f}s {stage} {done}/{total}", flush=True)

        report = await demo.load_demo(conn, papers=papers, seed=seed, progress=progress)
        print(report, flush=True)
        await conn.execute("ANALYZE")
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    asyncio.run(build(args.database_url, args.papers, args.seed))


if __name__ == "__main__":
    main()
