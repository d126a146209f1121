"""Time the institution page's stats read: live from the base tables, and stored (migration 0027) where it exists.

    python -m bench.institution_stats --database-url postgresql://... [--institution ID] [--runs 20]

Read-only. Each statement is prepared once (as asyncpg prepares it for the site) and run `--runs` times warm; the
median and the fastest are printed, then EXPLAIN (ANALYZE, BUFFERS) of each once. Without --institution, the
institution with the most affiliation rows.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import asyncpg

from db.queries.aggregates import MAX_TOP_RESEARCHERS, SELECT_INSTITUTION_STATS
from db.queries.institution_figures import LIVE_INSTITUTION_STATS

LARGEST = "SELECT institution_id FROM authorship_institutions GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"


async def _time(conn: asyncpg.Connection, sql: str, args: tuple[int, int], runs: int) -> list[float]:
    stmt = await conn.prepare(sql)
    await stmt.fetchrow(*args)  # warm
    took = []
    for _ in range(runs):
        t = time.perf_counter()
        await stmt.fetchrow(*args)
        took.append((time.perf_counter() - t) * 1000)
    return took


async def run(dsn: str, institution: int | None, runs: int, explain: bool) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SET default_transaction_read_only = on")
        iid = institution or await conn.fetchval(LARGEST)
        stored = await conn.fetchval("SELECT to_regclass('institution_figures') IS NOT NULL")
        args = (iid, MAX_TOP_RESEARCHERS)
        reads = [("live", LIVE_INSTITUTION_STATS)] + ([("stored", SELECT_INSTITUTION_STATS)] if stored else [])
        for name, sql in reads:
            took = await _time(conn, sql, args, runs)
            print(f"institution {iid} {name}: median {statistics.median(took):.2f} ms, fastest {min(took):.2f} ms")
        if explain:
            for name, sql in reads:
                plan = await conn.fetch(f"EXPLAIN (ANALYZE, BUFFERS) {sql}", *args)
                print(f"-- {name}\n" + "\n".join(r[0] for r in plan))
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--institution", type=int)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--explain", action="store_true")
    a = parser.parse_args()
    asyncio.run(run(a.database_url, a.institution, a.runs, a.explain))


if __name__ == "__main__":
    main()
