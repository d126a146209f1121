"""The benchmark data generator is the demo generator at a million papers:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/wovepaper_bench wovepaper demo --papers 1000000

This module runs the same thing for a database named on the command line (it must exist; it is
migrated first), printing a line per stage so a long run can be followed in a log:

    .venv/bin/python -m bench.generate --database-url postgresql://... [--papers 1000000] [--seed 42]

The load streams papers in batches, so memory is bounded by the researchers (names and a few
integers each), not by the papers. Measured time, peak memory and database size are in
bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

import asyncpg

import demo
from db.migrate import migrate


async def generate(dsn: str, papers: int, seed: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return await demo.run_demo_command(dsn, papers=papers, seed=seed, if_empty=False, echo=print)


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
