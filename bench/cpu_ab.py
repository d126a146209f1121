"""CPU per request of two API checkouts, alternated: the API process's and its PostgreSQL backends'.

    .venv/bin/python -m bench.cpu_ab --database-url postgresql://... --operation ResearcherPage \\
        [--requests 400 --rounds 6 --concurrency 4] /work/main /tmp/other-checkout

Each round serves every checkout in turn (the order alternates by round), one uvicorn worker, no Redis, rate
limits off; 80 requests warm it, then `--requests` bodies of the operation (bench/run.py's sample of variables,
fixed seed) are sent `--concurrency` at a time from this process, and the CPU the server process and the
PostgreSQL backends connected to the database spent over them is divided by the requests. CPU time rather than
throughput: on a shared machine it swings far less with what else runs. The per-checkout medians close the output.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

import httpx

from bench.run import api_server, body_for, cpu_by_owner, database_name, running, sample_variables


async def drive(url: str, bodies: list[str], n: int, concurrency: int) -> None:
    async with httpx.AsyncClient(timeout=60) as client:
        sent = 0

        async def worker() -> None:
            nonlocal sent
            while sent < n:
                body = bodies[sent % len(bodies)]
                sent += 1
                r = await client.post(url + "/graphql", content=body, headers={"content-type": "application/json"})
                assert r.status_code == 200 and b'"errors"' not in r.content, r.text[:300]

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--operation", default="ResearcherPage")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("checkouts", nargs="+", type=Path)
    args = parser.parse_args()
    database = database_name(args.database_url)
    os.environ.pop("REDIS_URL", None)  # no Redis: every page computed in PostgreSQL
    variables = asyncio.run(sample_variables(args.database_url, args.operation, 500, 0.42))
    bodies = [body_for("wovepaper", args.operation, v) for v in variables]
    results: dict[Path, list[tuple[float, float]]] = {c: [] for c in args.checkouts}
    for round_no in range(args.rounds):
        for checkout in args.checkouts if round_no % 2 == 0 else args.checkouts[::-1]:
            with running(api_server(f"cpu_ab-{round_no}", checkout, args.database_url)) as (pid, url):
                asyncio.run(drive(url, bodies, 80, args.concurrency))
                (api0, db0), t0 = cpu_by_owner(pid, database), time.monotonic()
                asyncio.run(drive(url, bodies, args.requests, args.concurrency))
                (api1, db1), t1 = cpu_by_owner(pid, database), time.monotonic()
            api, db = (api1 - api0) * 1000 / args.requests, (db1 - db0) * 1000 / args.requests
            results[checkout].append((api, db))
            print(f"round {round_no} {checkout}: API {api:.2f} ms, database {db:.2f} ms CPU a request, "
                  f"{args.requests / (t1 - t0):.0f} req/s", flush=True)  # fmt: skip
    for checkout, rows in results.items():
        api = statistics.median(r[0] for r in rows)
        db = statistics.median(r[1] for r in rows)
        print(f"{checkout}: median API {api:.2f} ms, database {db:.2f} ms, together {api + db:.2f} ms CPU a request")


if __name__ == "__main__":
    main()
