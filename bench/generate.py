"""The benchmark data generator is the demo generator at a million papers:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/wovepaper_bench wovepaper demo --papers 1000000

This module runs the same thing for a database named on the command line (it must exist; it is
migrated first), printing a line per stage so a long run can be followed in a log:

    .venv/bin/python -m bench.generate --database-url postgresql://... [--papers 1000000] [--seed 42]

Into an empty database the rows are COPYed once each (demo/bulk.py): every paper with its versions,
authorships, institution links, citation count and analysis already computed, researchers once their
works' totals are known, into tables whose secondary indexes, unique constraints, foreign keys and
triggers are dropped for the load and rebuilt after it, all in one transaction; then the stored figures
and ANALYZE; this module then runs VACUUM (ANALYZE) on everything. The rows are generated in a process
of their own while the loader encodes and COPYs. The rows equal those of the upsert path
(tests/integration/test_demo.py).
Memory stays bounded by the researchers (names and a few integers each), not by the papers.

Measured on the shared 2-core box (PostgreSQL 15 at 127.0.0.1), with five other engineers' tests and
benchmarks running at the same time (load average 10-15, so the load got a fraction of the cores):

- 200,000 papers (generation in a thread of the loader, the first version): 18 min 36 s wall at load
  average 11.8-15: papers 7 min 17 s, works 4 min 42 s, indexes and constraints 1 min 17 s, figures
  2 min 56 s, VACUUM ANALYZE 1 min 52 s; 80 s of Python CPU; peak RSS 178 MB. The upsert path before it:
  see bench/RESULTS.md ("Building the benchmark database").
- 1,000,000 papers (generation in its own process): 58 min 2 s wall at load average 10-15, the job
  getting 11% of the machine: papers 22:45, works 16:25, indexes and constraints 5:17, figures 10:57,
  VACUUM ANALYZE 2:33; 387 s of Python CPU (both processes) and about 500 s of PostgreSQL backend CPU,
  which overlap on two cores: on a quiet machine that is within the 20 minutes, not shown here; peak RSS
  455 MB; database 6.2 GB (the upsert path's was 11 GB: no dead row versions, indexes built once).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import asyncpg

import demo
from db.migrate import migrate
from db.queries import bulk_load


async def generate(dsn: str, papers: int, seed: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    code = await demo.run_demo_command(dsn, papers=papers, seed=seed, if_empty=False, echo=print)
    conn = await asyncpg.connect(dsn)
    try:
        print("vacuum: setting the visibility maps, so index-only scans are what a benchmark measures")
        await bulk_load.vacuum_analyze(conn)
    finally:
        await conn.close()
    return code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"), help="defaults to DATABASE_URL")
    parser.add_argument("--papers", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=demo.DEFAULT_SEED)
    args = parser.parse_args()
    if not args.database_url:
        sys.exit("error: give --database-url or set DATABASE_URL")
    sys.exit(asyncio.run(generate(args.database_url, args.papers, args.seed)))


if __name__ == "__main__":
    main()
