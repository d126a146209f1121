"""The benchmark data generator is the demo generator at a million papers:

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/wovepaper_bench wovepaper demo --papers 1000000

This module runs the same thing for a database named on the command line (it must exist; it is
migrated first), printing a line per stage so a long run can be followed in a log:

    .venv/bin/python -m bench.generate --database-url postgresql://... [--papers 1000000] [--seed 42]

The load streams papers in batches, so memory is bounded by the researchers (names and a few
integers each), not by the papers. Measured on the shared 2-core box (PostgreSQL 15 at
127.0.0.1, with other benchmarks running at the same time):

- 20,000 papers (the default), `wovepaper demo` into an empty database: 38 s wall with one other
  load running (load average 3), 73-88 s at load average 7-8; 7 s Python CPU and 22 s PostgreSQL
  backend CPU; peak RSS 127 MB; database 297 MB. Running it again (nothing changes): 23 s wall at
  load average 3, 6 s + 11 s CPU.
- 1,000,000 papers: stopped after 15 minutes, as planned for a shared machine: 685,958 researchers
  in 2 min 48 s, then 360,000 papers in 12 min 20 s (100k papers per 2-4 minutes, slowing as the
  tables grow); peak RSS 253 MB; database 3.2 GB at that point. Each paper row is written four
  times (harvest, author matches, citations, analysis), as the ingest writes it, and every write
  updates the papers' 13 indexes including the full-text GIN: that is most of the time.
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
