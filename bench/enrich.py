"""Enrichment benchmark: two versions of the code enrich the same harvested archive, side by side.

    .venv/bin/python -m bench.enrich --before <git commit> [--papers 1000] [--people 900] [--rounds 3]
        [--database-url DSN]

The generated matching world (tests/matching/world.py: homonyms, name variants, merged S2 ids, people S2 has no
id for, OpenAlex ids and ORCIDs) is served in the upstreams' formats by a separate process on loopback, unpaced.
The archive is harvested once; then each round enriches a fresh copy of it (CREATE DATABASE ... TEMPLATE) with
the `--before` commit's code (exported with `git archive`) and with this tree's, alternating, each as its own
process running the real `run_enrich`. Reports per run: wall time, papers a second, the enrich process's CPU,
and the upstream requests. Only the enrichment is timed (not the copy, not a migration).
Without --database-url (or DATABASE_URL) the machine's PostgreSQL at 127.0.0.1:5432 is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The code under test: this tree, or another version's export (BENCH_CODE), first on the path.
sys.path.insert(0, os.environ.get("BENCH_CODE", str(ROOT)))
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))


def _world(papers: int, people: int):  # type: ignore[no-untyped-def]
    from tests.matching.world import generate

    return generate(seed=7, papers=papers, plain_people=people)


def serve(papers: int, people: int) -> None:
    """The upstreams on a free loopback port (printed), until killed."""
    from tests.matching.upstreams import Upstreams, serving

    state = Upstreams(_world(papers, people))
    state.phase = 2
    with serving(state) as base:
        print(base, flush=True)
        while True:
            time.sleep(3600)


_MIGRATE = (
    "import asyncio, asyncpg, sys\nfrom db.migrate import migrate\n"
    "async def m():\n    c = await asyncpg.connect(sys.argv[1])\n    await migrate(c)\n    await c.close()\n"
    "asyncio.run(m())"
)


def _migrate(code: str, dsn: str) -> None:
    subprocess.run([sys.executable, "-c", _MIGRATE, dsn], env={**os.environ, "PYTHONPATH": code}, check=True)


async def _run(dsn: str, base: str, what: str) -> dict[str, float]:
    from ingest.runner import run_arxiv, run_enrich
    from settings import Settings

    settings = Settings(
        DATABASE_URL=dsn,
        arxiv_oai_url=f"{base}/oai",
        arxiv_delay_s=0,
        s2_api_url=f"{base}/s2",
        s2_rps=1_000_000,
        openalex_api_url=f"{base}/oa",
        openalex_rps=1_000_000,
    )
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    if what == "harvest":
        summary = await run_arxiv(settings, from_=None, until=None, set_spec=None)
    else:
        summary = await run_enrich(settings, limit=None)
    wall = time.perf_counter() - t0
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"wall": wall, "cpu": cpu, "seen": summary.seen, "requests": summary.requests, "failed": summary.failed}


async def _admin(dsn: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def _child(code: str, *args: str) -> dict[str, float]:
    env = {**os.environ, "BENCH_CODE": code, "PYTHONPATH": code}
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "enrich.py"), *args], env=env, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", nargs="?", default="bench", choices=["bench", "serve", "harvest", "enrich"])
    parser.add_argument("--before", default="main")
    parser.add_argument("--papers", type=int, default=1000)
    parser.add_argument("--people", type=int, default=900)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dsn", default="")
    parser.add_argument("--base", default="")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""))
    args = parser.parse_args()
    if args.command == "serve":
        serve(args.papers, args.people)
        return
    if args.command in ("harvest", "enrich"):
        print(json.dumps(asyncio.run(_run(args.dsn, args.base, args.command))))
        return

    admin = args.database_url or "postgresql://postgres@127.0.0.1:5432/postgres"
    server = admin.rsplit("/", 1)[0]
    tag = f"bench_enrich_{os.getpid()}"
    served = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "enrich.py"), "serve", "--papers", str(args.papers)]
        + ["--people", str(args.people)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    created: list[str] = []
    with tempfile.TemporaryDirectory() as before_dir:
        try:
            assert served.stdout is not None
            base = served.stdout.readline().strip()
            subprocess.run(f"git -C {ROOT} archive {args.before} | tar -x -C {before_dir}", shell=True, check=True)
            # The before tree takes this tree's test world and its upstreams to serve and score the same world.
            subprocess.run(["cp", "-r", str(ROOT / "tests" / "matching"), f"{before_dir}/tests/"], check=True)
            # The archive as the before code harvests it (its schema); every run starts from a copy.
            template = f"{tag}_base"
            asyncio.run(_admin(admin, f"CREATE DATABASE {template}"))
            created.append(template)
            _migrate(before_dir, f"{server}/{template}")
            harvested = _child(before_dir, "harvest", "--dsn", f"{server}/{template}", "--base", base)
            print(f"harvested {harvested['seen']:.0f} papers in {harvested['wall']:.1f} s", flush=True)
            print("| run | code | wall | papers/s | enrich CPU | CPU per paper | requests |")
            print("| --- | --- | --- | --- | --- | --- | --- |")
            for n in range(args.rounds * 2):
                which = "before" if n % 2 == 0 else "after"
                code = before_dir if which == "before" else str(ROOT)
                name = f"{tag}_{n}"
                asyncio.run(_admin(admin, f"CREATE DATABASE {name} TEMPLATE {template}"))
                created.append(name)
                dsn = f"{server}/{name}"
                if which == "after":
                    _migrate(code, dsn)  # this tree's migrations on the before code's archive: not timed
                r = _child(code, "enrich", "--dsn", dsn, "--base", base)
                print(
                    f"| {n + 1} | {which} | {r['wall']:.1f} s | {r['seen'] / r['wall']:.1f} | {r['cpu']:.1f} s"
                    f" | {r['cpu'] / max(r['seen'], 1) * 1000:.1f} ms | {r['requests']:.0f} |",
                    flush=True,
                )
        finally:
            served.terminate()
            served.wait()
            for name in created:
                asyncio.run(_admin(admin, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


if __name__ == "__main__":
    main()
