"""The researcher statistics statement of two trees side by side: PostgreSQL backend CPU and wall per statement.

    .venv/bin/python -m bench.stats_statement --database-url postgresql://... --baseline <other tree> \\
        [--rounds 6] [--runs 20] [--typical 50]

Each tree's `SELECT_RESEARCHER_STATS` is read from the tree itself (a subprocess imports it there), both are run
on one connection to a PostgreSQL on this machine, their answers checked equal (but `computed_at`), then in
alternated blocks: the heaviest researcher (most career works, or `--heavy`) `--runs` times, and `--typical`
researchers with at least a full page of papers (24; a fixed sample) 3 times each. CPU is the backend's utime +
stime from /proc/<pid>/stat over a block (10 ms ticks: blocks are long enough), wall the median of the block's
statements.
Prints one line per block and the per-round ratios (this tree / baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg

HERE = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")


def statement_of(tree: Path) -> str:
    code = "import sys; from db.queries.aggregates import SELECT_RESEARCHER_STATS as s; sys.stdout.write(s)"
    return subprocess.run([sys.executable, "-c", code], cwd=tree, check=True, capture_output=True, text=True).stdout


def backend_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def block(conn: asyncpg.Connection, pid: int, sql: str, ids: Sequence[int], repeat: int) -> tuple[float, float]:
    """CPU ms per statement over the block, and the median wall ms."""
    walls: list[float] = []
    cpu0 = backend_cpu_s(pid)
    for rid in ids:
        for _ in range(repeat):
            t0 = time.perf_counter()
            await conn.fetchrow(sql, rid)
            walls.append((time.perf_counter() - t0) * 1000)
    return (backend_cpu_s(pid) - cpu0) * 1000 / len(walls), statistics.median(walls)


def comparable(row: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(row).items() if k != "computed_at"}


async def main(args: argparse.Namespace) -> None:
    statements = {"baseline": statement_of(Path(args.baseline)), "this tree": statement_of(HERE)}
    conn = await asyncpg.connect(args.database_url)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        heavy = args.heavy or await conn.fetchval("SELECT id FROM researchers ORDER BY works_count DESC, id LIMIT 1")
        typical = [
            r["id"]
            for r in await conn.fetch(
                "SELECT id FROM researchers WHERE paper_count >= 24 ORDER BY md5(id::text) LIMIT $1", args.typical
            )
        ]
        print(f"heaviest researcher {heavy}; {len(typical)} typical researchers; load {os.getloadavg()}")
        for rid in [heavy, *typical]:
            answers = [comparable(await conn.fetchrow(sql, rid)) for sql in statements.values()]
            assert answers[0] == answers[1], (rid, answers)
        for sets, ids, repeat in (("heaviest", [heavy], args.runs), ("typical", typical, 3)):
            if not ids:
                continue
            cpu: dict[str, list[float]] = {k: [] for k in statements}
            wall: dict[str, list[float]] = {k: [] for k in statements}
            for r in range(args.rounds):
                # Alternate which goes first, so neither always follows the other's cache state.
                order = list(statements) if r % 2 == 0 else list(reversed(statements))
                for name in order:
                    c, w = await block(conn, pid, statements[name], ids, repeat)
                    cpu[name].append(c)
                    wall[name].append(w)
                    print(f"{sets} round {r} {name}: cpu {c:.2f} ms/statement, wall median {w:.2f} ms", flush=True)
            ratios = [n / o for n, o in zip(cpu["this tree"], cpu["baseline"], strict=True)]
            print(
                f"{sets}: cpu median baseline {statistics.median(cpu['baseline']):.2f} ms, this tree "
                f"{statistics.median(cpu['this tree']):.2f} ms; wall median baseline "
                f"{statistics.median(wall['baseline']):.2f} ms, this tree "
                f"{statistics.median(wall['this tree']):.2f} ms; "
                f"per-round cpu ratios {', '.join(f'{x:.3f}' for x in ratios)}; load {os.getloadavg()}"
            )
    finally:
        await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--baseline", required=True, help="the other tree (a git worktree or archive)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--typical", type=int, default=50)
    parser.add_argument("--heavy", type=int, help="the heavy researcher's id (default: the one with most works)")
    asyncio.run(main(parser.parse_args()))
