"""The fault drills of tests/drills/, run longer, with the numbers for bench/RESULTS.md ("Reliability").

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres .venv/bin/python -m bench.drills [--phase 8]
        [--only redis|postgres|shutdown|cluster|sentinel] [--reset-s 10]

DATABASE_URL names a server where a throwaway database is created (and dropped at the end) for the Redis and
shutdown drills; the PostgreSQL drill starts a server of its own (as a non-root user), the replica drills that
server and a streaming replica of it (REDIS_URL: the Redis they use). Loopback only; each drill stops by itself.
Prints one Markdown table per drill and its facts (recovery times, counts). `cluster` kills a Cluster primary under
load, then moves 2,000 slots under load; `sentinel` kills the primary Sentinel watches: both with the breaker
probing every `--reset-s` seconds (the default setting's 10), the servers started for the run
(tests/drills/redis_servers.py)."""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from tests.drills.load import format_summary
from tests.drills.redis_servers import start_cluster, start_sentinel
from tests.drills.replica_scenarios import (
    follows_drill,
    ingest_drill,
    paused_replay_drill,
    primary_restarted_drill,
    replica_api,
    replica_killed_drill,
    replicated_demo,
)
from tests.drills.scenarios import postgres_drill, redis_drill, shutdown_drill, throwaway_demo_database
from tests.drills.topologies import api_env, channel_primary, cluster_env, failover_drill, namespace, reshard_drill


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--phase", type=float, default=8.0, help="seconds per phase")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--papers", type=int, default=2000)
    parser.add_argument(
        "--only", choices=["redis", "postgres", "shutdown", "cluster", "sentinel", "replicas"], default=None
    )
    parser.add_argument("--reset-s", type=float, default=10.0, help="the breaker's probe period in the topology drills")
    args = parser.parse_args()
    if args.only == "replicas":
        await replica_drills(args.phase, args.concurrency)
        return
    async with throwaway_demo_database(os.environ["DATABASE_URL"], papers=args.papers, prefix="wovepaper_drill") as dsn:
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
            reset = {"WOVEPAPER_REDIS_BREAKER_RESET_S": str(args.reset_s)}
            if args.only in (None, "cluster"):
                cluster = start_cluster(work / "cluster")
                try:
                    ns = namespace()
                    r = await failover_drill(
                        dsn,
                        api_env(cluster_env(cluster), ns, **reset),
                        work / "cluster-kill",
                        victim=lambda: channel_primary(cluster, ns),
                        recovered=cluster.healthy,
                        phase_s=args.phase,
                        concurrency=args.concurrency,
                    )
                    print(format_summary("\n## Cluster: a primary killed (SIGKILL)", r.summary))
                    print(r.facts, "bad:", len(r.bad))
                    cluster.wait_healthy()
                    env = api_env(cluster_env(cluster), namespace(), **reset)
                    r = await reshard_drill(dsn, cluster, env, work / "reshard", slots=2000, phase_s=args.phase)
                    print(format_summary("\n## Cluster: 2,000 slots moved", r.summary))
                    print(r.facts, "bad:", len(r.bad))
                finally:
                    cluster.stop()
            if args.only in (None, "sentinel"):
                sentinel = start_sentinel(work / "sentinel")
                try:
                    victim = sentinel.current_primary()
                    r = await failover_drill(
                        dsn,
                        api_env(sentinel.env(), namespace(), **reset),
                        work / "sentinel-kill",
                        victim=lambda: victim,
                        recovered=lambda: sentinel.current_primary() is not victim and sentinel.in_sync(),
                        phase_s=args.phase,
                        concurrency=args.concurrency,
                    )
                    print(format_summary("\n## Sentinel: the primary killed (SIGKILL)", r.summary))
                    print(r.facts, "bad:", len(r.bad))
                finally:
                    sentinel.stop()


async def replica_drills(phase_s: float, concurrency: int, delay_s: float = 3.0, max_lag_s: float = 5.0) -> None:
    """The five drills of tests/drills/test_replicas.py, longer (and 3 times drill 1's rounds)."""
    print(f"# replica drills, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}")
    # Not inherited by the API without Redis (start_api passes this process's environment on).
    redis_url = os.environ.pop("REDIS_URL")
    namespace = f"rdbench{int(time.time())}"
    with tempfile.TemporaryDirectory(prefix="wovepaper-drills-") as tmp:
        async with replicated_demo() as cluster:
            cached = replica_api(cluster, Path(tmp) / "cached.log", redis_url=redis_url, max_lag_s=max_lag_s,
                                 namespace=namespace)  # fmt: skip
            plain = replica_api(cluster, Path(tmp) / "plain.log", redis_url=None, max_lag_s=max_lag_s)
            try:
                r = await follows_drill(cluster, cached, rounds=300, delay_s=delay_s)
                print("\n## 1. follow/unfollow read back through a replica", delay_s, "s behind:", r.facts)
                r = await ingest_drill(cluster, cached, redis_url=redis_url, namespace=namespace, delay_s=delay_s)
                print("\n## 2. an ingest change read through a replica", delay_s, "s behind:", r.facts)
                r = await paused_replay_drill(cluster, cached, max_lag_s=max_lag_s)
                print("\n## 4. replay paused, maximum lag", max_lag_s, "s:", r.facts, "older:", len(r.bad))
                r = await replica_killed_drill(cluster, plain, phase_s=phase_s, concurrency=concurrency)
                print(format_summary("\n## 3. the replica killed and started", r.summary))
                print(r.facts)
                r = await primary_restarted_drill(cluster, plain, phase_s=phase_s, concurrency=concurrency)
                print(format_summary("\n## 5. the primary restarted", r.summary))
                print(r.facts, "bad:", len(r.bad))
            finally:
                cached.stop()
                plain.stop()


if __name__ == "__main__":
    asyncio.run(main())
