"""The site's traffic, open-loop, against one API process: latency per class at a fixed arrival rate, with the
CPU each request costs the API and PostgreSQL.

    .venv/bin/python -m bench.traffic --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench \
        --duration 120 --rate auto [--ingest 100000] [--per-class 10] [--shares PaperPage=0.3,Chat=0]

It starts `wovepaper serve` (one worker unless `--workers`; Redis on: `--redis-url`, else a throwaway
redis-server), a fake model for chat (tests/fake_model.py, answering at once), signed-in readers (HS256 tokens
with a secret it gives the server, readers `traffic-reader-N` whose follows are drawn again from the seed at every run),
then:

1. `--rate auto`: the saturation rate, closed-loop: `--saturation-concurrency` requests of the mix always in
   flight for `--saturation-seconds` (after as long a warm-up): the most the server completes per second.
2. The run: requests of the mix (bench/site_mix.py: classes, shares, Zipf draws, the simulated CDN) sent at
   `--fraction` (0.7) of the saturation rate, or at `--rate N` a second, as a Poisson process (`--arrivals
   uniform` spaces them evenly), for `--duration` seconds; each latency counted from the request's intended send
   time (bench/loadgen.py), after `--warmup` seconds of the same mix, not measured. With `--ingest N`,
   `wovepaper ingest arxiv` loads N new records and `wovepaper ingest enrich` enriches them meanwhile, from fake
   upstreams in the real formats (bench/traffic_ingest.py).
3. Every answer checked (status, no GraphQL errors, the entity asked for), and the pages' `modifiedAt` against the
   database afterwards (bench/truth.py): `wrong` counts answers older than a change committed `--truth-grace`
   seconds before they were asked for (commit times need `track_commit_timestamp = on`; without it a change's
   `modified_at`, its transaction's start, is used with `--truth-allowance` seconds more).
4. `--per-class S`: each class alone, closed-loop for S seconds: its CPU per request (the capacity model's input).

Output: one JSON line per class (`class`, `sent`, `errors`, `p50_ms`, `p99_ms`, `p999_ms`, and `wrong`,
`not_modified`, `error_kinds`), then one with `"class": "all"` adding `rate_rps`, `saturation_rps`,
`server_cpu_ms_per_req`, `pg_cpu_ms_per_req` (the backends of the API's pool, told apart by `application_name`),
the response cache's hit rate and the machine's other load; the whole result in bench/results/traffic-<stamp>.json,
with the run 10 s at a time (`timeline`: requests by when they were due, their errors, cache hits, p50 and p99;
`class_timelines` the same for each class; `cpu_timeline`: the cores the server, its backends, the ingest's
backends, autovacuum, Redis, this client and the whole machine used).
Every run starts with an empty cache (a Redis namespace of its own). The database gains the readers (their follows
reset at each run) and what `--ingest` loads; use a copy (`createdb -T`) when that matters.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import random
import re
import resource
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import numpy as np

import localservers
from app import RESPONSE_TTL_S
from bench import truth
from bench.loadgen import Client, Record, arrival_times, closed_loop, encode_request, open_loop
from bench.run import _stat, total_cpu
from bench.site_mix import (
    DEFAULT_SHARES,
    Drawer,
    Site,
    fetch_rows,
    load_universe,
    parse_shares,
    schedule,
    seed_viewers,
    wanted_rows,
)

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# The application_name of the API's pool and of the ingest's connections (db/pool.py, ingest/runner.py): how their
# backends are told apart from each other and from this benchmark's own.
API_APP = "wovepaper"
INGEST_APP = "wovepaper-ingest"
AUTOVACUUM = "autovacuum"  # PostgreSQL's autovacuum workers on the database (its own bursts after the ingest's)


# ----------------------------------------------------------------------------------------------------- CPU


@dataclass
class Backends:
    """CPU seconds of the PostgreSQL backends of each application, sampled from /proc while they live (a backend
    that ends between samples loses at most a sample's worth)."""

    conn: asyncpg.Connection
    first: dict[int, float] = field(default_factory=dict)
    last: dict[int, float] = field(default_factory=dict)
    app: dict[int, str] = field(default_factory=dict)

    async def sample(self) -> None:
        rows = await self.conn.fetch(
            "SELECT pid, application_name, backend_type FROM pg_stat_activity WHERE datname = current_database()"
        )
        for r in rows:
            stat = _stat(r["pid"])
            if stat is None:
                continue
            self.first.setdefault(r["pid"], stat[1])
            self.last[r["pid"]] = stat[1]
            self.app[r["pid"]] = AUTOVACUUM if r["backend_type"] == "autovacuum worker" else r["application_name"] or ""

    def reset(self) -> None:
        self.first = dict(self.last)

    def seconds(self, app: str) -> float:
        # The ingest names its connections `wovepaper-ingest <stage> <host>:<pid>` (ingest/locks.py run_name).
        return sum(self.last[p] - self.first.get(p, self.last[p]) for p in self.last if _is_app(self.app[p], app))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self.sample()
            try:
                await asyncio.wait_for(stop.wait(), 1.0)
            except TimeoutError:
                pass


def _is_app(name: str, app: str) -> bool:
    return name == app or name.startswith(app + " ")


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its descendants."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p))) is not None}
    tree, grew = {pid}, True
    while grew:
        grew = False
        for child, (parent, _) in stats.items():
            if parent in tree and child not in tree:
                tree.add(child)
                grew = True
    return sum(stats[p][1] for p in tree if p in stats)


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Meter:
    """CPU of the server, its PostgreSQL backends, Redis, this client and the whole machine over a window."""

    server_pid: int
    redis_pid: int | None
    backends: Backends
    marks: dict[str, float] = field(default_factory=dict)

    async def start(self) -> None:
        await self.backends.sample()
        self.backends.reset()
        busy, total = total_cpu()
        self.marks = {
            "server": tree_cpu(self.server_pid),
            "redis": tree_cpu(self.redis_pid) if self.redis_pid else 0.0,
            "client": own_cpu(),
            "busy": busy,
            "total": total,
            "wall": time.monotonic(),
        }

    def used(self) -> dict[str, float]:
        """CPU seconds of each part since start(), by the backends' latest sample."""
        return {
            "server": tree_cpu(self.server_pid) - self.marks["server"],
            "pg_api": self.backends.seconds(API_APP),
            "pg_ingest": self.backends.seconds(INGEST_APP),
            "pg_autovacuum": self.backends.seconds(AUTOVACUUM),
            "redis": (tree_cpu(self.redis_pid) - self.marks["redis"]) if self.redis_pid else 0.0,
            "client": own_cpu() - self.marks["client"],
        }

    async def timeline(self, step_s: float, stop: asyncio.Event) -> list[dict[str, float]]:
        """Cores each part used, `step_s` at a time from start() until `stop`: which part a slow stretch of the run
        went to (a harvest page, an enrichment batch, autovacuum after them)."""
        out: list[dict[str, float]] = []
        before, busy_before, began = self.used(), total_cpu()[0], time.monotonic()
        at = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), began + at + step_s - time.monotonic())
            now, busy, elapsed = self.used(), total_cpu()[0], time.monotonic() - began - at
            window = {"from_s": round(at, 1), **{k: round((now[k] - before[k]) / elapsed, 2) for k in now}}
            window["machine"] = round((busy - busy_before) / tick / elapsed, 2)
            out.append(window)
            before, busy_before, at = now, busy, at + elapsed
        return out

    async def stop(self) -> dict[str, float]:
        await self.backends.sample()
        busy, total = total_cpu()
        cores = os.cpu_count() or 1
        tick = os.sysconf("SC_CLK_TCK")
        wall = time.monotonic() - self.marks["wall"]
        used = self.used()
        machine = (busy - self.marks["busy"]) / tick
        used["machine_busy_cores"] = (busy - self.marks["busy"]) / (total - self.marks["total"]) * cores
        used["others"] = max(0.0, machine - sum(v for k, v in used.items() if k != "machine_busy_cores"))
        used["wall"] = wall
        return used


# -------------------------------------------------------------------------------------------------- server


@contextmanager
def api_server(env: dict[str, str], workers: int, log: Path) -> Iterator[tuple[int, int]]:
    """`wovepaper serve` as deployed; yields (pid, port)."""
    port = localservers.free_port()
    argv = [str(ROOT / ".venv" / "bin" / "wovepaper"), "serve", "--port", str(port), "--workers", str(workers)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the API exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the API did not become ready within 120 s")
            time.sleep(0.3)
        yield proc.pid, port
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


_METRIC = re.compile(r'^wovepaper_cache_events_total\{cache="(\w+)",event="(\w+)"\} ([0-9.e+]+)$', re.M)


_LAG_BUCKET = re.compile(r'^wovepaper_event_loop_lag_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$', re.M)
_STRAINED = re.compile(r"^wovepaper_site_strained_marks_total ([0-9.e+]+)$", re.M)


async def scrape(client: Client) -> tuple[dict[str, float], dict[float, float]]:
    """The cache's events and the event loop's lag buckets (upper bound in seconds: cumulative count)."""
    response = await client.request(encode_request("GET", "/metrics", client.authority))
    text = response.body.decode()
    events = {f"{c}_{e}": float(v) for c, e, v in _METRIC.findall(text)}
    events["site_strained"] = sum(float(v) for v in _STRAINED.findall(text))
    return events, {float(le): float(v) for le, v in _LAG_BUCKET.findall(text)}


def lag_quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The q-quantile of the lag observed between two scrapes, in ms, interpolated within its bucket as
    Prometheus's histogram_quantile does (None without samples; the last finite bound when it is beyond it)."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    if not counts or counts[-1] <= 0:
        return None
    rank = q * counts[-1]
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return round(lower * 1000, 2)
            inside = cumulative - below
            return round((lower + (bound - lower) * ((rank - below) / inside if inside else 1.0)) * 1000, 2)
        lower, below = bound, cumulative
    return round(lower * 1000, 2)


def hit_rate(before: dict[str, float], after: dict[str, float], cache: str) -> float | None:
    hits = after.get(f"{cache}_hit", 0) - before.get(f"{cache}_hit", 0)
    misses = after.get(f"{cache}_miss", 0) - before.get(f"{cache}_miss", 0)
    return round(hits / (hits + misses), 4) if hits + misses else None


# ------------------------------------------------------------------------------------------------------ run


def _pct(values: list[float], p: float) -> float:
    return round(float(np.percentile(np.asarray(values), p)), 2) if values else 0.0


async def run(args: argparse.Namespace, redis_url: str, redis_pid: int | None) -> dict[str, Any]:
    rng = random.Random(args.seed)
    shares = parse_shares(args.shares)
    admin = await asyncpg.connect(args.database_url)
    await seed_viewers(admin, args.viewers, args.seed)
    universe = await load_universe(admin, args.viewers, args.seed)
    drawer = Drawer(universe, shares, args.zipf, rng, hybrid_share=args.hybrid_share, crawlers=args.crawlers)
    secret = secrets.token_hex(32)
    from tests.fake_model import fake_model_in_thread, reply

    env = {
        "DATABASE_URL": args.database_url,
        "REDIS_URL": redis_url,
        "WOVEPAPER_CACHE_NAMESPACE": f"traffic{rng.randrange(10**9)}",  # an empty cache: a cold start
        "WOVEPAPER_JWT_SECRET": secret,
        "WOVEPAPER_CORS_ORIGINS": "https://www.wovepaper.com",
        "WOVEPAPER_RATE_LIMITS": args.rate_limits,
        "WOVEPAPER_CHAT_DAILY_MESSAGES": str(10**9),
        "WOVEPAPER_LLM_MODEL": "fake",
        "WOVEPAPER_LLM_RPS": "100000",
        "WOVEPAPER_SEMANTIC_SEARCH": "true" if args.hybrid_share > 0 else "false",
        "WOVEPAPER_SEMANTIC_PRELOAD": "true" if args.hybrid_share > 0 else "false",
        "WOVEPAPER_LOG_FORMAT": "json",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    answer = "An answer from the papers [arXiv:0000.00000]."
    with ExitStack() as stack:
        model = stack.enter_context(fake_model_in_thread(lambda received: reply(answer, usage=(500, 12))))
        env["WOVEPAPER_LLM_API_URL"] = model.base_url
        pid, port = stack.enter_context(api_server(env, args.workers, RESULTS / f"traffic-{stamp}-api.log"))
        client = Client("127.0.0.1", port, timeout_s=args.timeout)
        site = Site(client, universe, jwt_secret=secret, revalidate=args.revalidate, rng=random.Random(args.seed + 1))
        sampling = await asyncpg.connect(args.database_url)
        meter = Meter(pid, redis_pid, Backends(sampling))
        stop = asyncio.Event()
        sampler = asyncio.create_task(meter.backends.run(stop))
        result: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "args": vars(args)}
        result["papers"], result["researchers"] = universe.papers, universe.researchers

        # Saturation, closed-loop, after a warm-up of the same length.
        saturation = None
        rate = float(args.rate) if args.rate != "auto" else 0.0
        if args.rate == "auto":
            n = int(args.saturation_seconds * 2 * 3000)
            draws = [drawer.draw() for _ in range(n)]
            await fetch_rows(admin, universe, wanted_rows(draws))
            stream = _cycle(site, draws)
            warm: dict[str, Record] = {}
            await closed_loop(stream, args.saturation_concurrency, args.saturation_seconds, warm)
            sat: dict[str, Record] = {}
            await meter.start()
            done, seconds = await closed_loop(stream, args.saturation_concurrency, args.saturation_seconds, sat)
            used = await meter.stop()
            saturation = done / seconds
            rate = saturation * args.fraction
            result["saturation"] = {
                "rps": round(saturation, 1),
                "errors": sum(r.errors for r in sat.values()),
                "server_cpu_ms_per_req": round(used["server"] * 1000 / max(done, 1), 3),
                "pg_cpu_ms_per_req": round(used["pg_api"] * 1000 / max(done, 1), 3),
                "machine_busy_cores": round(used["machine_busy_cores"], 2),
                "others_cores": round(used["others"] / used["wall"], 2),
            }
            print(json.dumps({"phase": "saturation", **result["saturation"]}), file=sys.stderr, flush=True)

        # The run.
        if args.warmup:
            # The same mix at the same rate, not measured: a server that has just started answers its first
            # seconds from cold plans, pools and buffers, which a site serving all day does not.
            warm_drawn, warm_jobs = schedule(drawer, arrival_times(rate, args.warmup, rng, poisson=True))
            await fetch_rows(admin, universe, wanted_rows([d for _, d in warm_drawn]))
            await open_loop(warm_jobs(site), {}, grace_s=args.timeout)
        times = arrival_times(rate, args.duration, rng, poisson=args.arrivals == "poisson")
        drawn, jobs = schedule(drawer, times)
        await fetch_rows(admin, universe, wanted_rows([d for _, d in drawn]))
        site.seen.clear()
        site.latest.clear()
        records: dict[str, Record] = {}
        before, lag_before = await scrape(client)
        ingest = None
        if args.ingest:
            from bench.traffic_ingest import IngestDuringLoad

            ingest = IngestDuringLoad(args.database_url, args.ingest, args.seed, redis_url, env)
            await ingest.prepare()
        await meter.start()
        load_start = os.getloadavg()
        ingest_task = None
        if ingest is not None:
            ingest_task = asyncio.create_task(ingest.run(delay_s=args.ingest_delay, enrich_batch=args.enrich_batch))
        measured = asyncio.Event()
        cpu_timeline = asyncio.create_task(meter.timeline(10.0, measured))
        last = await open_loop(jobs(site), records, grace_s=args.timeout)
        measured.set()
        result["cpu_timeline"] = await cpu_timeline
        used = await meter.stop()
        after, lag_after = await scrape(client)
        if ingest_task is not None:
            result["ingest"] = await ingest.finish(ingest_task)
        verdicts = await truth.check(admin, site.seen, site.latest, args.truth_grace, args.truth_allowance)
        pages_held, unlisted, stale, stale_examples = await truth.stale_entries(
            admin, redis_url, env["WOVEPAPER_CACHE_NAMESPACE"], RESPONSE_TTL_S, args.truth_grace, args.truth_allowance
        )

        lines: list[dict[str, Any]] = []
        for cls in DEFAULT_SHARES:
            if cls not in records:
                continue
            v = verdicts.get(cls)
            line = {"class": cls, **records[cls].summary()}
            line.update(wrong=v.wrong if v else 0, truth_checked=v.checked if v else 0)
            if v:
                line["truth_basis"] = v.basis
            if v and v.examples:
                line["wrong_examples"] = v.examples
            lines.append(line)
        total = Record()
        for r in records.values():
            total.merge(r)
        sent = max(total.sent, 1)
        all_line = {
            "class": "all",
            **total.summary(),
            "wrong": sum(v.wrong for v in verdicts.values()),
            "rate_rps": round(rate, 1),
            "achieved_rps": round(total.sent / max(last, 1e-9), 1),
            "saturation_rps": round(saturation, 1) if saturation else None,
            "server_cpu_ms_per_req": round(used["server"] * 1000 / sent, 3),
            "pg_cpu_ms_per_req": round(used["pg_api"] * 1000 / sent, 3),
            "redis_cpu_ms_per_req": round(used["redis"] * 1000 / sent, 3),
            "client_cpu_ms_per_req": round(used["client"] * 1000 / sent, 3),
            "ingest_pg_cpu_s": round(used["pg_ingest"], 1),
            "autovacuum_cpu_s": round(used["pg_autovacuum"], 1),
            # The pages the response cache held at the end, and those older than a write committed before.
            "pages_held": pages_held,
            "pages_unlisted": unlisted,
            "stale_entries": stale,
            **({"stale_examples": stale_examples} if stale_examples else {}),
            "response_cache_hit_rate": hit_rate(before, after, "response"),
            "aggregate_cache_hit_rate": hit_rate(before, after, "aggregate"),
            # Responses stored, and stores of any value refused because an invalidation ran while it was computed.
            "response_stores": after.get("response_store", 0) - before.get("response_store", 0),
            "stale_stores_skipped": after.get("aggregate_stale_store_skipped", 0)
            - before.get("aggregate_stale_store_skipped", 0),
            "client_lag_p99_ms": _pct(total.lags_ms, 99),
            # Marks the ingest waited on (db/cache/strain.py): at most four a second.
            "site_strained_marks": after["site_strained"] - before["site_strained"],
            "server_loop_lag_p50_ms": lag_quantile(lag_before, lag_after, 0.5),
            "server_loop_lag_p99_ms": lag_quantile(lag_before, lag_after, 0.99),
            "server_loop_lag_max_bucket_ms": lag_quantile(lag_before, lag_after, 1.0),
            "machine_busy_cores": round(used["machine_busy_cores"], 2),
            "others_cores": round(used["others"] / used["wall"], 2),
            "loadavg_start": [round(x, 2) for x in load_start],
            "loadavg_end": [round(x, 2) for x in os.getloadavg()],
            "duration_s": args.duration,
        }
        if redis_pid:
            all_line["redis_used_memory_mb"], all_line["redis_evicted_keys"] = await _redis_memory(redis_url)
        lines.append(all_line)
        result["classes"] = lines
        # Every class together, 10 s at a time (the ingest's report says when its stages started and ended), and
        # each class alone: which pages a stage of the ingest slows, and whether their cache hits went with it.
        result["timeline"] = total.timeline(10.0)
        result["class_timelines"] = {cls: r.timeline(10.0) for cls, r in sorted(records.items())}

        if args.per_class:
            result["per_class"] = await per_class(args, site, drawer, admin, meter, client, shares)
        client.close()
        stop.set()
        await sampler
        await sampling.close()
    await admin.close()
    path = RESULTS / f"traffic-{stamp}.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    result["path"] = str(path)
    return result


def _cycle(site: Site, draws: list[Any]) -> Iterator[tuple[str, Any]]:
    while True:
        for d in draws:
            job = site.job(d)
            if job is not None:
                yield d.cls, job


async def per_class(
    args: argparse.Namespace,
    site: Site,
    drawer: Drawer,
    admin: asyncpg.Connection,
    meter: Meter,
    client: Client,
    shares: dict[str, float],
) -> list[dict[str, Any]]:
    """Each class alone, closed-loop: the CPU one request of it costs the API, PostgreSQL and Redis."""
    out = []
    for cls in shares:
        alone = Drawer(drawer.universe, {cls: 1.0}, drawer.zipf, random.Random(args.seed + 7), crawlers=drawer.crawlers)
        draws = [alone.draw() for _ in range(20_000)]
        await fetch_rows(admin, drawer.universe, wanted_rows(draws))
        records: dict[str, Record] = {}
        before, lag_before = await scrape(client)
        await meter.start()
        done, seconds = await closed_loop(_cycle(site, draws), args.per_class_concurrency, args.per_class, records)
        used = await meter.stop()
        after, lag_after = await scrape(client)
        r = records.get(cls, Record())
        line = {
            "class": cls,
            "rps": round(done / seconds, 1),
            "errors": r.errors,
            "p50_ms": _pct(r.latencies_ms, 50),
            "server_cpu_ms_per_req": round(used["server"] * 1000 / max(done, 1), 3),
            "pg_cpu_ms_per_req": round(used["pg_api"] * 1000 / max(done, 1), 3),
            "redis_cpu_ms_per_req": round(used["redis"] * 1000 / max(done, 1), 3),
            "response_cache_hit_rate": hit_rate(before, after, "response"),
            "not_modified": r.outcomes.get("not_modified", 0),
            "others_cores": round(used["others"] / used["wall"], 2),
        }
        print(json.dumps({"phase": "per-class", **line}), file=sys.stderr, flush=True)
        out.append(line)
    return out


async def _redis_memory(url: str) -> tuple[float, int]:
    """The throwaway Redis's memory at the end (MB), and the keys it evicted: while it evicts, each answer from
    it checks its tag sets (docs/operating.md), a cost the run's figures then include."""
    import redis.asyncio as redis

    r = redis.from_url(url)
    try:
        memory, stats = await r.info("memory"), await r.info("stats")
        return round(memory["used_memory"] / 2**20, 1), int(stats["evicted_keys"])
    finally:
        await r.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"), help="default: a throwaway redis-server")
    parser.add_argument(
        "--redis-maxmemory",
        default=localservers.LOCAL_MAXMEMORY,
        help=f"the throwaway redis-server's maxmemory (default {localservers.LOCAL_MAXMEMORY}; docs/capacity.md)",
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of the run (default 60)")
    parser.add_argument("--rate", default="auto", help="requests/s, or `auto`: --fraction of the saturation rate")
    parser.add_argument("--fraction", type=float, default=0.7, help="of the saturation rate, with --rate auto")
    parser.add_argument("--shares", help="class=share,... over the defaults (bench/site_mix.py), normalised")
    parser.add_argument("--zipf", type=float, default=1.0, help="exponent of the popularity draws (default 1.0)")
    parser.add_argument(
        "--revalidate", type=float, default=0.8, help="chance that a page the CDN holds is revalidated (default 0.8)"
    )
    parser.add_argument("--hybrid-share", type=float, default=0.0, help="share of searches in HYBRID mode")
    parser.add_argument(
        "--warmup", type=float, default=0, help="seconds of the mix at the run's rate before it is measured (default 0)"
    )
    parser.add_argument("--viewers", type=int, default=2000, help="signed-in readers (default 2000)")
    parser.add_argument("--crawlers", type=int, default=4, help="crawlers walking the sitemap (default 4)")
    parser.add_argument("--arrivals", choices=("poisson", "uniform"), default="poisson")
    parser.add_argument("--saturation-seconds", type=float, default=15.0)
    parser.add_argument("--saturation-concurrency", type=int, default=32)
    parser.add_argument("--per-class", type=float, default=0.0, metavar="S", help="then each class alone for S s")
    parser.add_argument("--per-class-concurrency", type=int, default=8)
    parser.add_argument("--ingest", type=int, default=0, metavar="N", help="ingest N new records during the run")
    parser.add_argument("--ingest-delay", type=float, default=5.0, help="seconds into the run the ingest starts")
    parser.add_argument(
        "--enrich-batch", type=int, default=None, metavar="N", help="papers per enrichment transaction (default 100)"
    )
    parser.add_argument("--truth-grace", type=float, default=5.0,
                        help="seconds a committed change may take to reach the answers (default 5)")  # fmt: skip
    parser.add_argument(
        "--truth-allowance",
        type=float,
        default=30.0,
        help="without track_commit_timestamp: seconds a write's transaction may run past its modified_at (default 30)",
    )
    parser.add_argument("--rate-limits", choices=("on", "off"), default="on")
    parser.add_argument("--workers", type=int, default=1, help="API worker processes (default 1)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds a request may take (default 30)")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args()
    if not args.database_url:
        sys.exit("error: give --database-url or set DATABASE_URL")
    if urlsplit(args.database_url).hostname not in (None, "", "127.0.0.1", "localhost", "::1"):
        sys.exit("error: the database must be on this machine (its backends' CPU is read from /proc)")
    local = None
    redis_url, redis_pid = args.redis_url, None
    if redis_url is None:
        directory = Path(tempfile.mkdtemp(prefix="traffic-redis-"))
        local = localservers.start_redis(directory, port=localservers.free_port(), maxmemory=args.redis_maxmemory)
        redis_url, redis_pid = local.url, local.pid
    try:
        import uvloop

        result = uvloop.run(run(args, redis_url, redis_pid))
    finally:
        if local is not None:
            local.stop()
    for line in result["classes"]:
        print(json.dumps(line), flush=True)
    print(f"wrote {result['path']}", file=sys.stderr)


if __name__ == "__main__":
    main()
