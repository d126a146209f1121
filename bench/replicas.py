"""Reads on replicas: what the routing costs, and the API with one replica on and off.

    .venv/bin/python -m bench.replicas [--papers 20000] [--rounds 3] [--duration 15] [--instructions 300]

Builds a primary of its own (the embedded PostgreSQL, run as a non-root user, in a temporary directory) with the
demo data, and a streaming replica of it (`pg_basebackup -R`); then
1. the routing's CPU per request, in process: `{ __typename }` (no SQL) run through the schema with and without the
   routing step (ReadRouting: choose a replica, hand the request its pool), blocks alternated; for an anonymous
   reader, and for a signed-in one (whose last write's WAL position is read from Redis: give --redis-url);
2. bench/run.py's measure: wrk rounds of ResearcherPage and PaperPage against `wovepaper` (reads on the primary)
   and `wovepaper replica` (WOVEPAPER_DATABASE_REPLICA_URLS set), alternated, server and database CPU per request;
   with --instructions N, callgrind's instructions per request of each instead (the same count whatever the
   machine is doing), net of the process's background work (count_net_instructions).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import asyncpg

from bench.run import (
    BENCH,
    ROOT,
    Server,
    api_server,
    running,
    sample_variables,
    summarize,
    warm,
    write_bodies,
    wrk,
)
from tests.drills.servers import DrillPostgres, DrillReplica

DATABASE = "bench"


async def build(papers: int) -> tuple[DrillPostgres, DrillReplica]:
    from db.migrate import migrate
    from demo import load_demo

    pg = await asyncio.to_thread(DrillPostgres.create)
    admin = await asyncpg.connect(pg.admin_dsn)
    try:
        await admin.execute(f"CREATE DATABASE {DATABASE}")
    finally:
        await admin.close()
    conn = await asyncpg.connect(pg.dsn(DATABASE))
    try:
        await migrate(conn)
        started = time.perf_counter()
        await load_demo(conn, papers=papers, seed=42)
        print(f"demo data: {papers} papers in {time.perf_counter() - started:.0f} s", flush=True)
    finally:
        await conn.close()
    replica = await asyncio.to_thread(DrillReplica.create, pg)
    return pg, replica


async def routing_cost(primary_dsn: str, replica_dsn: str, redis_url: str | None, n: int, blocks: int) -> None:
    """Microseconds of CPU the routing step adds to a request (process time, median of alternated blocks)."""
    from db.cache.client import create_redis
    from db.cache.store import CacheStore
    from db.pool import create_pool
    from db.replicas.routing import ReplicaSet
    from request_types.identity import Identity
    from resolvers.context import Context
    from schema import build_schema
    from settings import Settings

    plain = Settings(DATABASE_URL=primary_dsn)
    routed = Settings(DATABASE_URL=primary_dsn, database_replica_urls=replica_dsn)
    pool = await create_pool(primary_dsn, min_size=1, max_size=2)
    redis = create_redis(redis_url, timeout_s=0.5) if redis_url else None
    cache = CacheStore(redis, namespace="benchreplicas", ttl_s=60)

    async def open_pool(dsn: str, on_lost: Callable[[], None]) -> Any:
        return await create_pool(dsn, min_size=1, max_size=2, on_lost=on_lost, reports=False)

    replicas = ReplicaSet(
        pool, [replica_dsn], open_pool=open_pool, max_lag_s=10, read_your_writes_s=30, cache=cache,
        primary_dsn=primary_dsn,
    )  # fmt: skip
    health = asyncio.create_task(replicas.run())
    for _ in range(600):
        if replicas.usable_count() == 1:
            break
        await asyncio.sleep(0.1)
    assert replicas.usable_count() == 1, replicas.describe()
    schemas = {"off": build_schema(plain), "on": build_schema(routed)}
    anonymous = Identity("127.0.0.1")
    reader = Identity("127.0.0.1", viewer_id="bench-reader")

    async def block(kind: str, identity: Identity) -> float:
        schema = schemas[kind]
        settings = routed if kind == "on" else plain
        started = time.process_time()
        for _ in range(n):
            ctx = Context.create(
                pool, settings, identity=identity, cache=cache, replicas=replicas if kind == "on" else None
            )
            result = await schema.execute("{ __typename }", context_value=ctx)
            assert result.errors is None
        return (time.process_time() - started) / n * 1e6

    cases = [("anonymous", anonymous)] + ([("signed-in (Redis)", reader)] if redis is not None else [])
    print("\n| reader | routing off µs/request | routing on µs/request | routing's cost µs |\n|---|---:|---:|---:|")
    for name, identity in cases:
        await block("off", identity)
        await block("on", identity)
        off, on = [], []
        for _ in range(blocks):
            off.append(await block("off", identity))
            on.append(await block("on", identity))
        cost = statistics.median(b - a for a, b in zip(off, on, strict=True))
        print(f"| {name} | {statistics.median(off):.1f} | {statistics.median(on):.1f} | {cost:.1f} |", flush=True)
    health.cancel()
    await asyncio.gather(health, return_exceptions=True)
    await replicas.aclose()
    await cache.aclose()
    await pool.close()


def count_net_instructions(server: Server, bodies: list[bytes], n: int) -> tuple[float, float]:
    """Instructions per request of the server's process under callgrind, net of its own background work (the replicas'
    health rounds, metric folds): callgrind runs the process about 50 times slower, so rounds that come twice a second
    would land on every request 50 times as often as at full speed. So the process is counted while it answers `n`
    requests one after another, then idle for as long; (the difference per request, the idle count per request)."""
    out = BENCH / "results" / f"callgrind-replicas-{server.name.replace(' ', '_')}.out"
    for stale in out.parent.glob(out.name + "*"):
        stale.unlink()
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    with running(replace(server, argv=[*valgrind, *server.argv], start_timeout_s=600)) as (pid, url):

        def control(*command: str) -> None:
            subprocess.run(["callgrind_control", *command, str(pid)], check=True, capture_output=True)

        connection = http.client.HTTPConnection("127.0.0.1", int(url.rsplit(":", 1)[1]), timeout=600)

        def ask(count: int) -> None:
            for i in range(count):
                connection.request("POST", server.path, bodies[i % len(bodies)], {"content-type": "application/json"})
                response = connection.getresponse()
                response.read()
                assert response.status == 200, response.status

        ask(len(bodies))
        control("-i", "on")
        started = time.monotonic()
        ask(n)
        answering_s = time.monotonic() - started
        control("-i", "off")
        control("-d")
        control("-i", "on")
        time.sleep(answering_s)
        control("-i", "off")
        control("-d")
        connection.close()

    def total(part: int) -> int:
        lines = Path(f"{out}.{part}").read_text().splitlines()
        return sum(int(line.split()[1]) for line in lines if line.startswith("totals:"))

    busy, idle = total(1), total(2)
    return (busy - idle) / n, idle / n


def side_by_side(primary_dsn: str, replica_dsn: str, args: argparse.Namespace) -> None:
    plain = api_server("wovepaper", ROOT, primary_dsn)
    routed = replace(
        api_server("wovepaper replica", ROOT, primary_dsn),
        env={**plain.env, "WOVEPAPER_DATABASE_REPLICA_URLS": replica_dsn},
    )
    servers: list[Server] = [plain, routed]
    results: list[dict[str, object]] = []
    if args.instructions:
        print("\n| operation | server | instructions per request | of which background | net |")
        print("|---|---|---:|---:|---:|")
    for operation in args.operations.split(","):
        variables = asyncio.run(sample_variables(primary_dsn, operation, args.ids, 0.42))
        bodies = write_bodies("wovepaper", operation, variables)
        if args.instructions:
            encoded = [line.encode() for line in bodies.read_text().splitlines()]
            for server in servers:
                net, background = count_net_instructions(server, encoded, args.instructions)
                print(f"| {operation} | {server.name} | {net + background:,.0f} | {background:,.0f} | {net:,.0f} |")
            continue
        for round_no in range(args.rounds):
            for server in servers if round_no % 2 == 0 else servers[::-1]:
                with running(server) as (pid, url):
                    warm(url, server.path, bodies, args.warmup)
                    row = wrk(url, server.path, bodies, args.duration, pid, DATABASE, args.connections)
                row = {"operation": operation, "round": round_no, "server": server.name, **row}
                print(row, flush=True)
                results.append(row)
    if results:
        print(summarize(results))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--papers", type=int, default=20_000)
    parser.add_argument("--operations", default="ResearcherPage,PaperPage")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--ids", type=int, default=500)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--instructions", type=int, metavar="N", help="callgrind's instructions per request instead")
    parser.add_argument("--redis-url", help="also measure a signed-in reader's routing (their position in Redis)")
    parser.add_argument("--routing-requests", type=int, default=5000)
    parser.add_argument("--skip-servers", action="store_true", help="the routing's cost only")
    args = parser.parse_args()
    pg, replica = asyncio.run(build(args.papers))
    try:
        primary_dsn, replica_dsn = pg.dsn(DATABASE), replica.dsn(DATABASE)
        asyncio.run(routing_cost(primary_dsn, replica_dsn, args.redis_url, args.routing_requests, 7))
        if not args.skip_servers:
            side_by_side(primary_dsn, replica_dsn, args)
    finally:
        replica.kill()
        pg.stop()


if __name__ == "__main__":
    main()
