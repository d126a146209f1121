"""The fault drills of tests/drills/, run longer, with the numbers for bench/RESULTS.md ("Reliability").

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.drills [--phase 8]

DATABASE_URL names a server where a throwaway database is created (and dropped at the end) for the Redis and
shutdown drills; the PostgreSQL drill starts a server of its own (as a non-root user). Loopback only; each drill
stops by itself. Prints one Markdown table per drill and its facts (recovery times, counts)."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg

from db.admin import create_database
from localservices import with_database
from tests.drills.load import format_summary
from tests.drills.scenarios import load_small_demo, postgres_drill, redis_drill, shutdown_drill


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", type=float, default=8.0, help="seconds per phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--papers", type=int, default=2000)
    parser.add_argument("--only", choices=["redis", "postgres", "shutdown"], default=None)
    args = parser.parse_args()
    admin_dsn = os.environ["DATABASE_URL"]
    name = f"wovepaper_drill_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await create_database(admin, name)
    finally:
        await admin.close()
    dsn = with_database(admin_dsn, name)
    try:
        await load_small_demo(dsn, papers=args.papers)
        with tempfile.TemporaryDirectory(prefix="wovepaper-drills-") as tmp:
            work = Path(tmp)
            print(f"# drills, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}")
            if args.only in (None, "redis"):
                r = await redis_drill(dsn, work / "redis", phase_s=args.phase, concurrency=args.concurrency)
                print(format_summary("\n## Redis frozen, back, killed, restarted", r.summary))
                print(r.facts, "bad:", len(r.bad))
            if args.only in (None, "postgres"):
                r = await postgres_drill(work / "pg", phase_s=args.phase, concurrency=args.concurrency)
                print(format_summary("\n## PostgreSQL restarted, stopped, backends terminated", r.summary))
                print(r.facts, "bad:", len(r.bad))
            if args.only in (None, "shutdown"):
                r = await shutdown_drill(dsn, work / "shutdown", drain_s=5.0, grace_s=20.0)
                print(format_summary("\n## SIGTERM under load", r.summary))
                print(r.facts, "bad:", len(r.bad))
    finally:
        admin = await asyncpg.connect(admin_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


if __name__ == "__main__":
    asyncio.run(main())
