"""The workers curve: `wovepaper serve --workers N` for N = 1 and 2, ResearcherPage cold (no Redis: every page
computed in PostgreSQL), side by side, alternating.

    .venv/bin/python -m bench.workers --database-url postgresql://... [--rounds 2 --duration 15 --ids 500]

`wrk -t2 -c16 --timeout 10s` after a 3 s warm-up, bodies of researchers with a full first page. Besides
req/s and latency it reports where the machine's CPU went during each run: the API's processes (the supervisor
and its workers), the PostgreSQL backends serving it, and everything else (the other users of this shared box,
wrk), from /proc, so the row says what bounds the curve.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.run import (
    BENCH,
    CLK_TCK,
    ROOT,
    body_for,
    cpu_by_owner,
    database_name,
    free_port,
    parse_wrk,
    sample_variables,
    total_cpu,
)

OUT = BENCH / "results" / "workers"


@contextmanager
def serving(database_url: str, workers: int) -> Iterator[tuple[int, str]]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_") and k != "REDIS_URL"}
    env |= {"DATABASE_URL": database_url, "WOVEPAPER_RATE_LIMITS": "off", "WOVEPAPER_SEMANTIC_PRELOAD": "false"}
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / f"serve-{workers}.log").open("ab") as log:
        argv = [str(Path(sys.executable).parent / "wovepaper"), "serve", "--port", str(port), "--workers", str(workers)]
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"serve --workers {workers} did not start") from None
                time.sleep(0.3)
        yield proc.pid, url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_once(database_url: str, workers: int, bodies: Path, duration: int) -> dict[str, float]:
    database = database_name(database_url)
    with serving(database_url, workers) as (pid, url):
        env = {**os.environ, "BODIES": str(bodies), "TARGET_PATH": "/graphql"}
        lua = str(BENCH / "bench.lua")
        subprocess.run(["wrk", "-t2", "-c16", "-d3s", "-s", lua, url], env=env, capture_output=True, check=True)
        (api0, pg0), (busy0, all0) = cpu_by_owner(pid, database), total_cpu()
        cmd = ["wrk", "-t2", "-c16", f"-d{duration}s", "--timeout", "10s", "--latency", "-s", lua, url]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        (api1, pg1), (busy1, all1) = cpu_by_owner(pid, database), total_cpu()
    result = parse_wrk(out)
    # wrk gives up on a request after 2 s: those are not in req/s, so they are counted here.
    timeouts = re.search(r"timeout (\d+)", out)
    result["timeouts"] = float(timeouts.group(1)) if timeouts else 0.0
    cores = os.cpu_count() or 1
    seconds = (all1 - all0) / cores / CLK_TCK
    result["api_cores"] = (api1 - api0) / seconds
    result["postgres_cores"] = (pg1 - pg0) / seconds
    result["busy_cores"] = (busy1 - busy0) / (all1 - all0) * cores
    result["load"] = os.getloadavg()[0]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--ids", type=int, default=500)
    args = parser.parse_args()
    variables = asyncio.run(sample_variables(args.database_url, "ResearcherPage", args.ids, 0.17))
    OUT.mkdir(parents=True, exist_ok=True)
    bodies = OUT / "bodies.jsonl"
    bodies.write_text("\n".join(body_for("wovepaper", "ResearcherPage", v) for v in variables) + "\n")
    rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
    for round_no in range(args.rounds):
        for workers in (1, 2) if round_no % 2 == 0 else (2, 1):
            r = run_once(args.database_url, workers, bodies, args.duration)
            rows[workers].append(r)
            print(
                f"round {round_no + 1} workers {workers}: {r['rps']:.1f} req/s, p50 {r['p50_ms']:.0f} ms, "
                f"p99 {r['p99_ms']:.0f} ms, non-2xx {r['non_2xx']:.0f}, timeouts {r['timeouts']:.0f}; "
                f"cores: API {r['api_cores']:.2f}, "
                f"PostgreSQL {r['postgres_cores']:.2f}, machine busy {r['busy_cores']:.2f}; load {r['load']:.1f}",
                flush=True,
            )
    print(
        "\n| workers | req/s per round | median req/s | p50 ms | p99 ms | API cores | PostgreSQL cores | busy cores |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for workers, rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        per_round = ", ".join(f"{r['rps']:.1f}" for r in rs)
        print(
            f"| {workers} | {per_round} | {med['rps']:.1f} | {med['p50_ms']:.0f} "
            f"| {med['p99_ms']:.0f} | {med['api_cores']:.2f} | {med['postgres_cores']:.2f} | {med['busy_cores']:.2f} |"
        )
    ratio = statistics.median(rows[2][i]["rps"] / rows[1][i]["rps"] for i in range(args.rounds))
    print(f"\n2 workers / 1 worker, req/s per round (median): {ratio:.2f}; load {os.getloadavg()}")


if __name__ == "__main__":
    main()
