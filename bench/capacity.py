"""The capacity model of docs/capacity.md: from a traffic run's measured CPU per request, a sizing table.

    .venv/bin/python -m bench.capacity bench/results/traffic-<stamp>.json [--rates 100,1000,10000] [--papers 2500000]

The run must have `--per-class` figures (each class alone: the API's and PostgreSQL's CPU per request, and the
response cache's hit rate while it ran). Each class's cost is split into a hit and a miss: a hit costs the API
`--hit-api-ms` (what a response cache hit costs, measured apart: bench/warm.py) and PostgreSQL nothing, so the
miss costs (cost - hit rate x hit cost) / (1 - hit rate). At each target rate the hit rate each class would see is
computed for its popularity (Zipf, `--zipf`) over its number of entities, the response cache's lifetime
(`--ttl`, 600 s) and the invalidations the ingest causes (`--writes-per-s` commits a second, each dropping the
list entries and `--touched` entities' pages); the table then gives API and PostgreSQL cores at the utilisation
they are sized for, and Redis memory for the entries alive at once. Every assumption is a flag; the markdown
printed is what docs/capacity.md holds.
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Distinct cacheable entries a class has, by what it names (an entity, a page of a list, a query); None: not cached
# (signed-in requests, mutations, chat), or one entry (LatestPapers).
ENTITY_OF = {
    "ResearcherPage": "researchers",
    "PaperPage": "papers",
    "InstitutionPage": "institutions",
    "PaperList": "list_pages",
    "LatestPapers": "one",
    "ResolvePath": "paths",
    "Search": "queries",
    "Autocomplete": "prefixes",
    "ViewerFeed": None,
    "Follow": None,
    "Chat": None,
    "Crawler": "papers_uniform",
}
LISTS = {"PaperList", "LatestPapers", "Search", "Autocomplete"}  # tagged `lists`: every write drops them
# Response sizes (KB) a cached entry takes in Redis, by class (measured on the 200k database: bench/RESULTS.md).
ENTRY_KB = {
    "ResearcherPage": 31.0,
    "PaperPage": 5.0,
    "InstitutionPage": 20.0,
    "PaperList": 25.0,
    "LatestPapers": 25.0,
    "ResolvePath": 0.4,
    "Search": 40.0,
    "Autocomplete": 1.5,
    "Crawler": 5.0,
}


@dataclass
class Cost:
    share: float
    api_ms: float  # as measured, at the measured hit rate
    pg_ms: float
    redis_ms: float
    hit_rate: float


def zipf_hit_rate(n: int, s: float, rate: float, ttl: float, invalidation_rate: float = 0.0) -> tuple[float, float]:
    """(hit rate, mean entries alive) of a cache whose entries live `ttl` from the miss that stored them, over `n`
    items requested Zipf(s) at `rate` a second, each item also dropped `invalidation_rate` times a second. An item
    asked for at rate l is a renewal process: a miss, then the hits that arrive while its entry lives (an expected
    l x T_eff, with T_eff its mean lifetime), so its hit ratio is l T_eff / (1 + l T_eff), which is also the
    share of time it is stored."""
    if n <= 0 or rate <= 0:
        return 0.0, 0.0
    n_exact = min(n, 2_000_000)
    ranks = np.arange(1, n_exact + 1, dtype=np.float64)
    weights = ranks**-s
    if n > n_exact:  # the tail's weight, integrated
        tail = (n ** (1 - s) - n_exact ** (1 - s)) / (1 - s) if abs(s - 1) > 1e-9 else math.log(n / n_exact)
    else:
        tail = 0.0
    total = weights.sum() + tail
    lam = rate * weights / total
    lifetime = 1.0 / (1.0 / ttl + invalidation_rate) if invalidation_rate > 0 else ttl
    stored = lam * lifetime / (1 + lam * lifetime)
    return float((weights / total * stored).sum()), float(stored.sum())


def entities(kind: str | None, universe: dict[str, int]) -> int:
    if kind is None:
        return 0
    return {
        "researchers": universe["researchers"],
        "papers": universe["papers"],
        "institutions": universe["institutions"],
        "list_pages": universe["categories"] * 10,
        "one": 1,
        "paths": universe["papers"] + universe["researchers"],
        "queries": 200_000,
        "prefixes": 500_000,
        "papers_uniform": universe["papers"],
    }[kind]


def model(args: argparse.Namespace, run: dict[str, Any]) -> str:
    shares = {line["class"]: line["share"] for line in _shares(run)}
    per_class = {line["class"]: line for line in run["per_class"]}
    costs: dict[str, Cost] = {}
    for cls, share in shares.items():
        line = per_class.get(cls)
        if line is None:
            continue
        costs[cls] = Cost(
            share,
            line["server_cpu_ms_per_req"],
            line["pg_cpu_ms_per_req"],
            line.get("redis_cpu_ms_per_req", 0.0),
            line.get("response_cache_hit_rate") or 0.0,
        )
    universe = {
        "papers": args.papers,
        "researchers": int(args.papers * 0.57),  # the generator's proportion at 2.5M (1.43M researchers)
        "institutions": 500,
        "categories": 150,
    }
    out = [
        f"Inputs: {Path(args.traffic).name} ({run.get('papers', '?')} papers when measured), hit cost "
        f"{args.hit_api_ms} ms of API CPU, Zipf {args.zipf}, entry lifetime {args.ttl:.0f} s, ingest "
        f"{args.writes_per_s} commits/s touching {args.touched} entities each, sized for {args.papers:,} papers; "
        f"API cores at {args.api_utilisation:.0%} busy, PostgreSQL at {args.pg_utilisation:.0%}.",
        "",
        "| origin req/s | response cache hit rate | API cores | PostgreSQL cores (reads) | Redis CPU cores "
        "| Redis memory (responses) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    detail = [
        "",
        f"| class | share | API ms (miss) | PostgreSQL ms (miss) | hit rate at {', '.join(args.rates)} |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    hit_rates: dict[str, list[float]] = {c: [] for c in costs}
    for text in args.rates:
        rate = float(text)
        api = pg = redis_cpu = memory_kb = 0.0
        hits = 0.0
        for cls, c in costs.items():
            n = entities(ENTITY_OF.get(cls), universe)
            if cls == "Crawler" or n == 0:
                h, alive = (0.0, 0.0)
            else:
                invalidation = args.writes_per_s if cls in LISTS else args.writes_per_s * args.touched / max(n, 1)
                h, alive = zipf_hit_rate(n, args.zipf, rate * c.share, args.ttl, invalidation)
            hit_rates[cls].append(h)
            miss_api = (c.api_ms - c.hit_rate * args.hit_api_ms) / (1 - c.hit_rate) if c.hit_rate < 1 else c.api_ms
            miss_pg = c.pg_ms / (1 - c.hit_rate) if c.hit_rate < 1 else c.pg_ms
            api += rate * c.share * (h * args.hit_api_ms + (1 - h) * miss_api) / 1000
            pg += rate * c.share * (1 - h) * miss_pg / 1000
            redis_cpu += rate * c.share * c.redis_ms / 1000
            memory_kb += alive * ENTRY_KB.get(cls, 10.0)
            hits += c.share * h
        out.append(
            f"| {rate:,.0f} | {hits:.2f} | {math.ceil(api / args.api_utilisation * 10) / 10} "
            f"| {math.ceil(pg / args.pg_utilisation * 10) / 10} | {redis_cpu:.2f} | {memory_kb / 1024:,.0f} MB |"
        )
    for cls, c in costs.items():
        miss_api = (c.api_ms - c.hit_rate * args.hit_api_ms) / (1 - c.hit_rate) if c.hit_rate < 1 else c.api_ms
        miss_pg = c.pg_ms / (1 - c.hit_rate) if c.hit_rate < 1 else c.pg_ms
        rates = ", ".join(f"{h:.2f}" for h in hit_rates[cls])
        detail.append(f"| {cls} | {c.share:.3f} | {miss_api:.2f} | {miss_pg:.2f} | {rates} |")
    return "\n".join(out + detail)


def _shares(run: dict[str, Any]) -> list[dict[str, Any]]:
    from bench.site_mix import parse_shares

    shares = parse_shares(run.get("args", {}).get("shares"))
    return [{"class": k, "share": v} for k, v in shares.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("traffic", help="a bench/results/traffic-*.json made with --per-class")
    parser.add_argument("--rates", default="100,1000,10000")
    parser.add_argument("--papers", type=int, default=2_500_000)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--ttl", type=float, default=600.0, help="response cache entry lifetime, s (default 600)")
    parser.add_argument("--hit-api-ms", type=float, default=0.3, help="API CPU of a cache hit, ms (default 0.3)")
    parser.add_argument("--writes-per-s", type=float, default=2.0, help="ingest commits a second (default 2)")
    parser.add_argument("--touched", type=int, default=300, help="entities a commit touches (default 300)")
    parser.add_argument("--api-utilisation", type=float, default=0.6)
    parser.add_argument("--pg-utilisation", type=float, default=0.5)
    args = parser.parse_args()
    args.rates = args.rates.split(",")
    run = json.loads(Path(args.traffic).read_text())
    if not run.get("per_class"):
        raise SystemExit("the run has no per-class figures: run bench/traffic.py with --per-class S")
    print(model(args, run))


if __name__ == "__main__":
    main()
