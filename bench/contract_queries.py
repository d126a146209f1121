"""Time the contract's new reads on a loaded database: the changes feed, sitemap chunks and counts, name lists in
every order, exact institution look-ups, the researcher page statistics (fields with cross-lists).

    DATABASE_URL=postgresql://.../demo .venv/bin/python bench/contract_queries.py [--rounds 30]

Load a database first with `wovepaper demo --papers 20000` (or 1000000 for the benchmark database). Prints the
median and 90th percentile of each read in milliseconds, on a warm cache (one untimed run first). Run by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg

from db.filters import RESEARCHER_SORTS
from db.queries.aggregates import fetch_institution_stats, fetch_researcher_stats
from db.queries.changes import page_changes
from db.queries.institutions import fetch_institution_by_name
from db.queries.search.names import search_researchers_by_name
from db.queries.sitemap import count_sitemap, fetch_sitemap_chunk


async def timed(rounds: int, call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    await call()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(len(samples) * 0.9) - 1]


async def main(dsn: str, rounds: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        papers = await conn.fetchval("SELECT count(*) FROM papers")
        heavy = await conn.fetchval("SELECT id FROM researchers ORDER BY paper_count DESC, id LIMIT 1")
        institution = await conn.fetchrow("SELECT id, aliases FROM institutions WHERE cardinality(aliases) > 0 LIMIT 1")
        middle = await conn.fetchval(
            "SELECT modified_at FROM papers ORDER BY modified_at OFFSET $1 LIMIT 1", papers // 2
        )
        surname = await conn.fetchval("SELECT wp_surname(name) FROM researchers ORDER BY paper_count DESC LIMIT 1")
        reads: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            (
                "changes: first page of 100, from the start",
                lambda: page_changes(
                    conn,
                    ["PAPER", "RESEARCHER", "INSTITUTION"],
                    after=(datetime(2000, 1, 1, tzinfo=UTC), -1, 0),
                    limit=101,
                ),
            ),
            (
                "changes: a page of 100 from the middle",
                lambda: page_changes(conn, ["PAPER", "RESEARCHER", "INSTITUTION"], after=(middle, -1, 0), limit=101),
            ),
            ("sitemap: a chunk of 10,000 paper ids", lambda: fetch_sitemap_chunk(conn, "PAPER", chunk=0, size=10_000)),
            ("sitemap: totalCount and chunkCount of papers", lambda: count_sitemap(conn, "PAPER")),
            ("researchers(query: surname), by relevance", lambda: search_researchers_by_name(conn, surname, limit=25)),
            (
                "researchers(query: surname, sort: NAME)",
                lambda: search_researchers_by_name(conn, surname, limit=25, sort=RESEARCHER_SORTS["NAME"]),
            ),
            (
                "researchers(query: surname, sort: H_INDEX)",
                lambda: search_researchers_by_name(conn, surname, limit=25, sort=RESEARCHER_SORTS["H_INDEX"]),
            ),
            ("institution(id: <an alias>)", lambda: fetch_institution_by_name(conn, institution["aliases"][0])),
            (
                "researcher page statistics, heaviest researcher",
                lambda: fetch_researcher_stats(conn, researcher_id=heavy),
            ),
            (
                "institution statistics (fields)",
                lambda: fetch_institution_stats(conn, institution_id=institution["id"]),
            ),
        ]
        print(f"{papers} papers; median / p90 over {rounds} rounds, ms")
        for name, call in reads:
            median, p90 = await timed(rounds, call)
            print(f"| {name} | {median:.2f} | {p90:.2f} |")
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    asyncio.run(main(os.environ["DATABASE_URL"], args.rounds))
