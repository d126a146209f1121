"""The benchmark data generator is the demo generator at scale (arXiv's whole corpus is about 2.5M papers):

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/wovepaper_bench wovepaper demo --papers 2500000

This module runs the same load for a database named on the command line (it must exist; it is migrated first),
printing a line per stage with its wall time and the CPU the generator (this process and the one generating
rows) and the PostgreSQL backend spent on it, so that a long run can be followed and compared:

    .venv/bin/python -m bench.generate --database-url postgresql://... [--papers 2500000] [--seed 42]

Into an empty database the rows are COPYed once each (demo/bulk.py): every paper with its versions,
authorships, institution links, citation count and analysis already computed, researchers once their
works' totals are known, into tables whose secondary indexes, unique constraints, foreign keys and
triggers are dropped for the load and rebuilt after it, all in one transaction; then the stored figures
and ANALYZE; this module then runs VACUUM, which sets every page's visibility bit (COPYed pages are not marked
all-visible until vacuumed), so that index-only scans need no heap visit from a benchmark's first request on.
The rows are generated in a process of their own while the loader encodes and COPYs. The rows equal those of the
upsert path (tests/integration/test_demo.py). Memory stays bounded by the researchers (names and a few integers
each), not by the papers. Figures measured: bench/RESULTS.md ("Building the benchmark database").
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from pathlib import Path

import asyncpg

import demo
from db.migrate import migrate
from db.queries import bulk_load

CLK_TCK = os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """CPU seconds of this process and its waited-for children (the generating process, once it has ended)."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def _live_children_cpu() -> float:
    """CPU seconds of this process's live children (the generating process while it runs)."""
    total = 0.0
    me = str(os.getpid())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            total += (int(fields[11]) + int(fields[12])) / CLK_TCK
    return total


class Stages:
    """Prints, at each change of stage, the last stage's wall time and CPU: here, and in the PostgreSQL backend
    (read from /proc when the server is on this machine, else not shown)."""

    def __init__(self, backend_pid: int) -> None:
        self.backend_pid = backend_pid if Path(f"/proc/{backend_pid}").exists() else None
        self.started = time.monotonic()
        self.stage = "start"
        self.mark = self._sample()
        self.totals: dict[str, float] = {"generator": 0.0, "postgres": 0.0}

    def _backend(self) -> float | None:
        if self.backend_pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.backend_pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def _sample(self) -> tuple[float, float, float | None]:
        return time.monotonic(), _own_cpu() + _live_children_cpu(), self._backend()

    def end(self, next_stage: str) -> None:
        now = self._sample()
        wall, python = now[0] - self.mark[0], now[1] - self.mark[1]
        pg = (now[2] - self.mark[2]) if now[2] is not None and self.mark[2] is not None else None
        self.totals["generator"] += python
        self.totals["postgres"] += pg or 0.0
        pg_text = f", PostgreSQL {pg:.1f} s" if pg is not None else ""
        load = os.getloadavg()[0]
        print(
            f"{now[0] - self.started:8.1f} s  {self.stage}: {wall:.1f} s wall, CPU here {python:.1f} s{pg_text}"
            f" (load {load:.1f})",
            flush=True,
        )
        self.stage, self.mark = next_stage, now

    def progress(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage:
            self.end(stage)


async def generate(dsn: str, papers: int, seed: int) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        stages = Stages(pid)
        print(f"generating {papers:,} papers (seed {seed}) into {conn.get_settings().server_version}", flush=True)
        report = await demo.load_demo(conn, papers=papers, seed=seed, progress=stages.progress)
        stages.end("vacuum")
        # The load ended with ANALYZE: VACUUM only sets the visibility maps (a second ANALYZE would read the
        # same samples again).
        await bulk_load.vacuum(conn)
        stages.end("done")
    finally:
        await conn.close()
    wall = time.monotonic() - stages.started
    print(
        f"{report.papers:,} papers, {report.researchers:,} researchers, {report.institutions:,} institutions, "
        f"{report.works:,} external works in {wall:.1f} s ({wall / 60:.1f} min); CPU: generator and loader "
        f"{stages.totals['generator']:.0f} s, PostgreSQL backend {stages.totals['postgres']:.0f} s",
        flush=True,
    )
    return 0


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
