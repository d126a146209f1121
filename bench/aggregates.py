"""Aggregate and cache benchmark: cold aggregates, cached reads, and a warm-response-cache ResearcherPage.

    .venv/bin/python -m bench.aggregates --database-url postgresql://postgres@/wovepaper_bench?host=/var/run/postgresql
    .venv/bin/python -m bench.aggregates --database-url ... --page        # also the ResearcherPage vs the floor

Part 1 (in process): the researcher with the most papers at or above 2,000 (else the heaviest), its
statistics statement timed cold (first run on a fresh connection: statement prepared, pages maybe
not in shared buffers) and warm in PostgreSQL but missing in Redis (what a cache miss costs), then
the cached read through the store (Redis GET + JSON decode + row building) as the API does it.
Part 2 (--page): the floor and the API (with Redis, response cache warmed over every request
body first) under wrk, floor first and last in each round, ratio = API req/s / median floor req/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx

import localservers
from db.cache import keys
from db.cache.client import create_redis
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.pool import create_pool
from db.queries.aggregates import fetch_researcher_coauthors, fetch_researcher_network, fetch_researcher_stats
from db.records import Touched
from resolvers.aggregates import load_researcher_stats

ROOT = Path(__file__).resolve().parent.parent


def ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "median_ms": round(statistics.median(s) * 1000, 3),
        "p95_ms": round(s[int(len(s) * 0.95) - 1 if len(s) > 1 else 0] * 1000, 3),
        "min_ms": round(s[0] * 1000, 3),
        "n": len(s),
    }


async def timed(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        await fn()
        out.append(time.perf_counter() - t0)
    return out


async def pick_researcher(conn: asyncpg.Connection) -> asyncpg.Record:
    row = await conn.fetchrow(
        """SELECT id, name, paper_count, works_count, h_index FROM researchers
            WHERE paper_count >= 2000 ORDER BY paper_count, id LIMIT 1"""
    )
    if row is None:
        row = await conn.fetchrow(
            "SELECT id, name, paper_count, works_count, h_index FROM researchers ORDER BY paper_count DESC LIMIT 1"
        )
    assert row is not None, "empty database"
    return row


async def aggregates_part(database_url: str, redis_url: str, n: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    conn = await asyncpg.connect(database_url)
    try:
        r = await pick_researcher(conn)
        ext = await conn.fetchval("SELECT count(*) FROM researcher_works WHERE researcher_id = $1", r["id"])
        papers = await conn.fetchval("SELECT count(*) FROM papers")
    finally:
        await conn.close()
    rid = r["id"]
    result["database"] = {"papers": papers}
    # The box is shared: the load average says how much else ran during these timings.
    result["load_average_at_start"] = [round(x, 2) for x in os.getloadavg()]
    result["researcher"] = {
        "id": rid,
        "papers": r["paper_count"],
        "external_works": ext,
        "works_count": r["works_count"],
        "h_index": r["h_index"],
    }

    # Cold: a fresh connection, so the statement is parsed and planned on this call.
    fresh = await asyncpg.connect(database_url)
    try:
        t0 = time.perf_counter()
        stats = await fetch_researcher_stats(fresh, researcher_id=rid)
        result["stats_first_call_fresh_connection_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        assert stats is not None
        result["stats_figures"] = {
            "paper_count": stats.paper_count,
            "works_count": stats.works_count,
            "h_index": stats.h_index,
            "citation_count": stats.citation_count,
            "matched_papers": stats.matched_papers,
        }
        result["stats_sql"] = ms(await timed(lambda: fetch_researcher_stats(fresh, researcher_id=rid), n))
        result["coauthors_sql"] = ms(await timed(lambda: fetch_researcher_coauthors(fresh, researcher_id=rid), n))
        for depth in (1, 2):
            result[f"network_depth{depth}_sql"] = ms(
                await timed(
                    lambda d=depth: fetch_researcher_network(  # type: ignore[misc]
                        fresh, researcher_id=rid, depth=d, min_shared=1, limit=100
                    ),
                    max(n // 4, 3),
                )
            )
    finally:
        await fresh.close()

    pool = await create_pool(database_url, min_size=2, max_size=4)
    store = CacheStore(create_redis(redis_url, timeout_s=0.25), namespace="bench", ttl_s=600)
    try:

        async def miss() -> None:
            await invalidate(store, Touched(researchers={rid}))
            await load_researcher_stats(pool, store, rid)

        # A miss through the store: invalidation, MGET, the statement, the guarded SET.
        result["cache_miss_via_store"] = ms(await timed(miss, n))
        await load_researcher_stats(pool, store, rid)
        result["cached_read_via_store"] = ms(await timed(lambda: load_researcher_stats(pool, store, rid), n * 50))
        assert store.redis is not None
        redis = store.redis
        key = keys.researcher_stats("bench", rid)
        result["redis_get_alone"] = ms(await timed(lambda: redis.get(key), n * 50))
        result["cache_counters"] = {"hits": store.metrics.hits, "misses": store.metrics.misses}
        result["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        await store.aclose()
        await pool.close()
    return result


def page_part(database_url: str, redis_url: str, rounds: int, duration: int, ids: int) -> dict[str, Any]:
    try:
        from bench import floor  # noqa: F401
    except ImportError:
        return {"skipped": "bench/floor.py is not there yet"}
    from bench.run import body_for, running, sample_variables, servers, wrk

    operation = "ResearcherPage"
    variables = asyncio.run(sample_variables(database_url, operation, ids, 0.42))
    all_servers = servers(database_url, redis_url)
    # Bodies of our own (bench.run's files are shared with its runs, which may rewrite them meanwhile).
    out_dir = ROOT / "bench" / "results" / "bodies-aggregates"
    out_dir.mkdir(parents=True, exist_ok=True)
    bodies = {}
    for name in ("floor", "wovepaper"):
        bodies[name] = out_dir / f"{operation}.{name}.jsonl"
        bodies[name].write_text("\n".join(body_for(name, operation, v) for v in variables) + "\n")
    rows: list[dict[str, Any]] = []
    for round_no in range(rounds):
        for name in ("floor", "wovepaper", "floor"):
            server = all_servers[name]
            with running(server) as (pid, url):
                # Every body once (fills the response cache for the API), then wrk.
                with httpx.Client(timeout=60) as client:
                    for line in bodies[name].read_text().splitlines():
                        resp = client.post(
                            url + server.path, content=line, headers={"content-type": "application/json"}
                        )
                        resp.raise_for_status()
                    if name == "wovepaper":
                        again = client.post(
                            url + server.path,
                            content=bodies[name].read_text().splitlines()[0],
                            headers={"content-type": "application/json"},
                        )
                        assert again.headers.get("x-cache") == "hit", "the response cache is not serving"
                r = wrk(url, server.path, bodies[name], duration, pid)
                if name == "wovepaper":
                    with httpx.Client(timeout=10) as client:
                        r["metrics"] = [
                            ln for ln in client.get(url + "/metrics").text.splitlines() if ln.startswith("wovepaper_")
                        ]
            row = {"round": round_no, "server": name, **r}
            print(json.dumps({k: v for k, v in row.items() if k != "metrics"}), flush=True)
            rows.append(row)
    ratios = []
    for round_no in range(rounds):
        floor_rps = statistics.median(x["rps"] for x in rows if x["round"] == round_no and x["server"] == "floor")
        api = [x["rps"] for x in rows if x["round"] == round_no and x["server"] == "wovepaper"]
        ratios += [a / floor_rps for a in api]
    return {
        "ids": len(variables),
        "rows": rows,
        "ratio_median": round(statistics.median(ratios), 3),
        "floor_rps_median": round(statistics.median(x["rps"] for x in rows if x["server"] == "floor"), 1),
        "wovepaper_rps_median": round(statistics.median(x["rps"] for x in rows if x["server"] == "wovepaper"), 1),
    }


def markdown(out: dict[str, Any]) -> str:
    """The summary table for bench/RESULTS.md."""
    a = out["aggregates"]
    r = a["researcher"]
    lines = [
        f"Database: {a['database']['papers']:,} papers; researcher {r['id']}: {a['stats_figures']['paper_count']:,} "
        f"archive papers, {r['external_works']:,} external works ({a['stats_figures']['works_count']:,} distinct "
        f"career works, h-index {a['stats_figures']['h_index']}). Load average during the run: "
        f"{a['load_average_at_start'][0]} -> {a['load_average_at_end'][0]} (2 cores).",
        "",
        "| measurement | median ms | p95 ms | min ms | n |",
        "|---|---:|---:|---:|---:|",
        f"| stats statement, first call on a fresh connection | {a['stats_first_call_fresh_connection_ms']} | | | 1 |",
    ]
    for key, label in (
        ("stats_sql", "stats statement (the page's aggregates), Redis not involved"),
        ("cache_miss_via_store", "cache miss through the store (invalidate, MGET, statement, guarded SET)"),
        ("cached_read_via_store", "cached read through the store (MGET, JSON decode, rows)"),
        ("redis_get_alone", "Redis GET alone (round trip floor)"),
        ("coauthors_sql", "coauthors statement"),
        ("network_depth1_sql", "network depth 1 statement"),
        ("network_depth2_sql", "network depth 2 statement"),
    ):
        m = a[key]
        lines.append(f"| {label} | {m['median_ms']} | {m['p95_ms']} | {m['min_ms']} | {m['n']} |")
    page = out.get("researcher_page")
    if page and "rows" in page:
        lines += [
            "",
            f"ResearcherPage, warm response cache ({page['ids']} researcher ids, every body requested once first): "
            f"wovepaper {page['wovepaper_rps_median']} req/s, floor {page['floor_rps_median']} req/s, "
            f"ratio {page['ratio_median']} (median of rounds).",
            "",
            "| round | server | req/s | p50 ms | p99 ms | server CPU ms/req |",
            "|---:|---|---:|---:|---:|---:|",
        ]
        for row in page["rows"]:
            lines.append(
                f"| {row['round']} | {row['server']} | {row['rps']:.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} "
                f"| {row['server_cpu_ms_per_req']:.3f} |"
            )
    elif page:
        lines += ["", f"ResearcherPage: {page.get('skipped')}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", help="default: a throwaway redis-server started here")
    parser.add_argument("-n", type=int, default=20, help="repetitions per timing")
    parser.add_argument("--page", action="store_true", help="also run the ResearcherPage against the floor")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=15)
    parser.add_argument("--ids", type=int, default=500)
    args = parser.parse_args()
    local = None
    redis_url = args.redis_url
    if redis_url is None:
        local = localservers.start_redis(Path(tempfile.mkdtemp(prefix="bench-redis-")), port=localservers.free_port())
        redis_url = local.url
    try:
        out: dict[str, Any] = {"aggregates": asyncio.run(aggregates_part(args.database_url, redis_url, args.n))}
        print(json.dumps(out["aggregates"], indent=1), flush=True)
        if args.page:
            out["researcher_page"] = page_part(args.database_url, redis_url, args.rounds, args.duration, args.ids)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        path = ROOT / "bench" / "results" / f"aggregates-{stamp}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(out, indent=1))
        print(f"wrote {path}", file=sys.stderr)
        print(markdown(out))
    finally:
        if local is not None:
            local.stop()


if __name__ == "__main__":
    main()
