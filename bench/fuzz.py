"""schemathesis (GraphQL mode) against a served demo database: every answer must be a valid GraphQL response,
never a 5xx, never INTERNAL_SERVER_ERROR.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.fuzz --max-examples 200

schemathesis comes with the `dev` extra (`make test` runs a seeded few hundred examples of the same check in
tests/drills/test_fuzz.py); SCHEMATHESIS names another executable.

Creates a throwaway database with the demo data (dropped at the end), serves it with `wovepaper serve` on a free
loopback port, runs `schemathesis run` on the committed SDL with a fixed seed, and prints its summary and the
failures it found (with their reproducing requests, from its JUnit report)."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.drills.scenarios import throwaway_demo_database
from tests.server_process import start_api

ROOT = Path(__file__).resolve().parents[1]


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-examples", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--papers", type=int, default=500)
    parser.add_argument("--max-time", type=int, default=300, help="seconds")
    args = parser.parse_args()
    tool = os.environ.get("SCHEMATHESIS") or shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    if tool is None:
        print("schemathesis not found: set SCHEMATHESIS to its executable (see this file's docstring)", file=sys.stderr)
        return 2
    async with throwaway_demo_database(os.environ["DATABASE_URL"], papers=args.papers, prefix="wovepaper_fuzz") as dsn:
        with tempfile.TemporaryDirectory(prefix="wovepaper-fuzz-") as tmp:
            api = start_api({"DATABASE_URL": dsn}, Path(tmp) / "api.log")
            try:
                run = [
                    tool,
                    "run",
                    str(ROOT / "frontend_contract" / "schema.graphql"),
                    "--url",
                    f"{api.url}/graphql",
                    "--max-examples",
                    str(args.max_examples),
                    "--seed",
                    str(args.seed),
                    "--max-time",
                    str(args.max_time),
                    "--report",
                    "junit",
                    "--report-dir",
                    str(Path(tmp) / "report"),
                ]
                done = await asyncio.to_thread(subprocess.run, run, capture_output=True, text=True)
                print(done.stdout[-20_000:])
                print(done.stderr[-5_000:], file=sys.stderr)
                log = (Path(tmp) / "api.log").read_text(errors="replace")
                print(f"server log: {log.count('unexpected error')} unexpected errors")
                return done.returncode
            finally:
                api.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
