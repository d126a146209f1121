"""The "Ingest killed" drill at scale: `wovepaper ingest` SIGKILLed at a hundred random points, each resumed and
compared row by row with an uninterrupted run.

    .venv/bin/python -m bench.ingest_kill [--kills 100] [--seed 1] [--database-url DSN]

The harness is the suite's (tests/ingest/killdrill.py): the recorded arXiv, Semantic Scholar and OpenAlex fixtures
served on loopback, five harvested pages and eleven papers enriched two at a time, every run a real process
forked from a server that has imported the project. Kill points come in pairs (one in the harvest, one in the
enrichment that follows it): after a random upstream request of the run and a random delay, every other pair once
the run is next seen inside a transaction that has written. Reports, per phase: kills, resumptions, rows compared,
rows lost, duplicated and changed, and how long a resumption took. A throwaway database is created and dropped;
without --database-url (or DATABASE_URL) the project-local PostgreSQL is used.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.ingest.killdrill import Outcome, drill, summarize  # noqa: E402


async def _create(admin_dsn: str) -> tuple[str, str]:
    import asyncpg

    from db.admin import create_database
    from db.migrate import migrate
    from localservers import with_database

    name = f"wovepaper_bench_kill_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await create_database(admin, name)
    finally:
        await admin.close()
    dsn = with_database(admin_dsn, name)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    return name, dsn


async def _drop(admin_dsn: str, name: str) -> None:
    import asyncpg

    admin = await asyncpg.connect(admin_dsn)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def _report(outcomes: list[Outcome], elapsed: float) -> None:
    print(
        f"{'phase':<7} {'request':>7} {'delay ms':>8} {'writing':>7} {'killed':>6} {'resumes':>7} "
        f"{'rows':>5} {'lost':>4} {'dup':>4} {'chg':>4} {'resume s':>8}"
    )
    for o in outcomes:
        p = o.point
        print(
            f"{p.phase:<7} {p.after_requests:>7} {p.delay_s * 1000:>8.1f} {'yes' if p.in_write else '':>7}"
            f" {'yes' if o.killed else 'no':>6} {o.resumes:>7} {o.diff.rows:>5} {o.diff.lost:>4}"
            f" {o.diff.duplicated:>4} {o.diff.changed:>4} {o.resume_s:>8.2f}"
        )
        for line in o.diff.details[:5]:
            print(f"    {line}")
    print()
    for phase in ("arxiv", "enrich"):
        mine = [o for o in outcomes if o.point.phase == phase and o.killed]
        if mine:
            resume = sorted(o.resume_s for o in mine)
            print(
                f"{phase}: {len(mine)} kills ({sum(o.point.in_write for o in mine)} while writing),"
                f" {sum(o.diff.rows for o in mine):,} rows compared,"
                f" lost {sum(o.diff.lost for o in mine)}, duplicated {sum(o.diff.duplicated for o in mine)},"
                f" changed {sum(o.diff.changed for o in mine)};"
                f" resumption p50 {statistics.median(resume):.2f} s, max {resume[-1]:.2f} s"
            )
    print(f"summary: {summarize(outcomes)}")
    print(
        f"wall time {elapsed:.0f} s; 1-min load average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kills", type=int, default=100, help="kill points, half in harvests, half in enrichments")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    args = parser.parse_args()
    admin_dsn = args.database_url
    if not admin_dsn:
        import localservers

        admin_dsn = localservers.start_postgres(ROOT / ".wovepaper" / "test")
    name, dsn = asyncio.run(_create(admin_dsn))
    started = time.monotonic()
    outcomes: list[Outcome] = []
    try:
        with tempfile.TemporaryDirectory() as tmp, drill(dsn, Path(tmp)) as d:
            d.record_reference()
            print(f"uninterrupted run: {d.requests} upstream requests per phase")
            points = d.kill_points(random.Random(args.seed))
            while len(outcomes) < args.kills:
                outcomes += d.kill_and_resume(next(points))
    finally:
        asyncio.run(_drop(admin_dsn, name))
    _report(outcomes, time.monotonic() - started)
    summary = summarize(outcomes)
    sys.exit(1 if summary["lost"] or summary["duplicated"] or summary["changed"] else 0)


if __name__ == "__main__":
    main()
