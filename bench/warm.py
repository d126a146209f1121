"""The warm path against its own limit: a whole-response cache hit against uvicorn + Starlette answering the same
bytes as a constant, server CPU per request side by side.

    .venv/bin/python -m bench.warm --database-url postgresql://... --redis-url redis://... \\
        [--rounds 3 --duration 10 --ids 200] [--baseline-root DIR] [--rate-limit] [--instructions N] [--only VARIANT]

Every variant runs as one uvicorn worker (uvloop, httptools, no access log; the API with the HTTP protocol `wovepaper
serve` uses, edge/protocol.py, where the checkout has it) driven by
`wrk -t2 -c16 -d<duration>s` with the ResearcherPage bodies of `--ids` researchers with a full first page,
all warmed (each body sent twice) before wrk starts. Variants:
- constant: `bench.constant:create`, one route returning a fixed response body: a page of median size
  from those ids, as the API answers it;
- hit: the API, response cache warm (the in-process tier in front of Redis);
- hit, Redis tier only: the same with `WOVEPAPER_NEAR_CACHE_MB=0` (every hit reads Redis);
- hit, rate limit on (`--rate-limit`): one client (wrk's address) with a budget too large to run out, its points
  leased (edge/ratelimit.py);
- hit, rate limit on, 10,000 clients (`--rate-limit`): each request from one of 10,000 addresses
  (X-Forwarded-For from a trusted loopback proxy), each with the default budget: most charges go to Redis;
- hit, baseline (`--baseline-root`): the API of another checkout (e.g. `git archive <commit>`), same settings
  (and with the rate limit charged too, with `--rate-limit`);
- answer looked up (Starlette): `bench.constant:create` reading each request's body and sending the answer the API
  gave it (`BENCH_CONSTANT_ANSWERS`): the least any cache of whole answers does, for scale; not the target's measure;
- with `--topologies`: hit and hit, Redis tier only on a Redis Cluster (3 primaries, 3 replicas) and under Sentinel
  (a primary, a replica, 3 Sentinels), started for the run on loopback by tests/drills/redis_servers.py.
With `--instructions N`, instead of wrk: each variant under valgrind's callgrind, the instructions its process
executes per request over N requests sent one at a time (user space only; stable where CPU time is not). With
`--loaded-instructions SECONDS`, the same count while wrk loads the variant as above for that long (it runs some 50
times slower under callgrind, 16 requests still in flight): what one request at a time leaves out, such as request
lines written out together and rate-limit charges sharing a round trip or a lease.
Variants alternate order every round; CPU per request is the server process's user + system time from
/proc/<pid>/stat over the wrk run divided by the requests wrk completed. The load average is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import httpx

from bench.app_instructions import graphql_post_scope
from bench.run import (
    ROOT,
    Server,
    body_for,
    count_instructions,
    deployed_protocol,
    running,
    sample_variables,
    under_callgrind,
    wrk,
)

BENCH = ROOT / "bench"
OUT = BENCH / "results" / "warm"


# The rate-limited variant as anonymous readers behind a proxy are: each request from one of many addresses, each with
# the default budget, so that most charges go to Redis (a lease serves only a client that keeps coming).
MANY = "hit, rate limit on, 10,000 clients"
MANY_CLIENTS = 10_000


def clients(server: Server) -> int:
    """The client addresses a variant's requests come from (0: wrk's own)."""
    return MANY_CLIENTS if server.env.get("WOVEPAPER_TRUSTED_PROXIES") else 0


def api_server(name: str, database_url: str, redis_url: str, *, root: Path = ROOT, **env: str) -> Server:
    uvicorn = ["-m", "uvicorn", "--host", "127.0.0.1", "--workers", "1", "--no-access-log", "--log-level", "warning"]
    uvicorn += deployed_protocol(root)
    base = {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
        "WOVEPAPER_RATE_LIMITS": "off",
        "WOVEPAPER_CACHE_NAMESPACE": "benchwarm-" + name.replace(" ", "").replace(",", "-")[:20],
        "WOVEPAPER_ANON_POINTS_PER_HOUR": str(10**12),
        # The shared 2-core machine can stall Redis calls past the default 0.25 s: a breaker opening then would
        # measure GraphQL instead of the cache.
        "WOVEPAPER_REDIS_TIMEOUT_S": "1.0",
    }
    return Server(name, [sys.executable, *uvicorn, "app:create_app", "--factory"], {**base, **env})


def many_clients(name: str, database_url: str, redis_url: str, *, root: Path = ROOT) -> Server:
    """The API as MANY's variants serve it: rate limits on, the default budget, the loopback proxy trusted."""
    return api_server(
        name,
        database_url,
        redis_url,
        root=root,
        WOVEPAPER_RATE_LIMITS="on",
        WOVEPAPER_ANON_POINTS_PER_HOUR="1000",
        WOVEPAPER_TRUSTED_PROXIES="127.0.0.1",
    )


def warm_up(url: str, bodies: list[str], *, proxied: bool = False) -> tuple[bytes, dict[str, str]]:
    """Every body twice (the second answer comes from the cache): the answer of median size, for the constant, and
    every body's answer. `proxied`: each request from an address of its own, outside wrk's (a budget of the default
    size would not last the warm-ups of every round)."""
    sizes: list[tuple[int, bytes]] = []
    answers: dict[str, str] = {}
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=60) as client:
        for i in range(2 * len(bodies)):
            body = bodies[i % len(bodies)]
            if proxied:
                headers["x-forwarded-for"] = f"198.18.{i // 256 % 256}.{i % 256}"
            r = client.post(url + "/graphql", content=body, headers=headers)
            r.raise_for_status()
            assert b'"errors"' not in r.content, r.text[:300]
            sizes.append((len(r.content), r.content))
            answers[body] = r.text
        assert r.headers.get("x-cache") == "hit", r.headers
    sizes.sort(key=lambda s: s[0])
    return sizes[len(sizes) // 2][1], answers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--ids", type=int, default=200)
    parser.add_argument("--baseline-root", type=Path, help="another checkout to serve as the baseline API")
    parser.add_argument("--rate-limit", action="store_true", help="add a variant with the rate limit charged")
    parser.add_argument(
        "--topologies", action="store_true", help="add hits on a Redis Cluster and under Sentinel (started here)"
    )
    parser.add_argument("--decompose", action="store_true", help="only the in-process CPU per hit")
    parser.add_argument(
        "--only", action="append", metavar="VARIANT", help="run this variant (repeatable); the constant always runs"
    )
    parser.add_argument(
        "--instructions", type=int, metavar="N", help="instead of wrk: instructions per request under callgrind, N each"
    )
    parser.add_argument(
        "--loaded-instructions", type=int, metavar="SECONDS", help="instructions per request under callgrind and wrk"
    )
    args = parser.parse_args()
    if args.decompose:
        variables = asyncio.run(sample_variables(args.database_url, "ResearcherPage", args.ids, 0.42))
        bodies = [body_for("wovepaper", "ResearcherPage", v) for v in variables]
        asyncio.run(decompose(args.database_url, args.redis_url, bodies))
        return

    variables = asyncio.run(sample_variables(args.database_url, "ResearcherPage", args.ids, 0.42))
    bodies = [body_for("wovepaper", "ResearcherPage", v) for v in variables]
    OUT.mkdir(parents=True, exist_ok=True)
    bodies_path = OUT / "bodies.jsonl"
    bodies_path.write_text("\n".join(bodies) + "\n")
    constant_path = OUT / "constant.json"

    variants = {
        "hit": api_server("hit", args.database_url, args.redis_url),
        "hit, Redis tier only": api_server("hit redis", args.database_url, args.redis_url, WOVEPAPER_NEAR_CACHE_MB="0"),
    }
    with contextlib.ExitStack() as servers:
        if args.topologies:
            variants |= topology_variants(args.database_url, servers)
        run(args, parser, variants, bodies, bodies_path, constant_path)


def topology_variants(database_url: str, servers: contextlib.ExitStack) -> dict[str, Server]:
    """The hit variants on a Redis Cluster and under Sentinel, the servers started for the run (stopped with it)."""
    import tempfile

    from tests.drills.redis_servers import start_cluster, start_sentinel

    work = Path(servers.enter_context(tempfile.TemporaryDirectory(prefix="wovepaper-warm-")))
    cluster = start_cluster(work / "cluster")
    servers.callback(cluster.stop)
    sentinel = start_sentinel(work / "sentinel")
    servers.callback(sentinel.stop)
    on_cluster = {"WOVEPAPER_REDIS_CLUSTER": "true"}
    under_sentinel = {k: v for k, v in sentinel.env().items() if k != "REDIS_URL"}
    return {
        "hit, Cluster": api_server("hit cluster", database_url, cluster.url, **on_cluster),
        "hit, Redis tier only, Cluster": api_server(
            "hit redis cluster", database_url, cluster.url, WOVEPAPER_NEAR_CACHE_MB="0", **on_cluster
        ),
        "hit, Sentinel": api_server("hit sentinel", database_url, sentinel.url, **under_sentinel),
        "hit, Redis tier only, Sentinel": api_server(
            "hit redis sentinel", database_url, sentinel.url, WOVEPAPER_NEAR_CACHE_MB="0", **under_sentinel
        ),
    }


def run(
    args: argparse.Namespace,
    parser: argparse.ArgumentParser,
    variants: dict[str, Server],
    bodies: list[str],
    bodies_path: Path,
    constant_path: Path,
) -> None:
    if args.rate_limit:
        variants["hit, rate limit on"] = api_server(
            "hit rl", args.database_url, args.redis_url, WOVEPAPER_RATE_LIMITS="on"
        )
        variants[MANY] = many_clients("hit many", args.database_url, args.redis_url)
    if args.baseline_root:
        base = api_server("baseline", args.database_url, args.redis_url, root=args.baseline_root)
        # The baseline's modules come first on the path; its app is built by the same factory.
        argv = [*base.argv[:-2], "--app-dir", str(args.baseline_root.resolve()), *base.argv[-2:]]
        variants["hit, baseline"] = replace(base, argv=argv)
        if args.rate_limit:
            limited = api_server(
                "baseline rl", args.database_url, args.redis_url, root=args.baseline_root, WOVEPAPER_RATE_LIMITS="on"
            )
            variants["hit, rate limit on, baseline"] = replace(limited, argv=argv)
            many = many_clients("baseline many", args.database_url, args.redis_url, root=args.baseline_root)
            variants[MANY + ", baseline"] = replace(many, argv=argv)
    starlette = [sys.executable, "-m", "uvicorn", "--host", "127.0.0.1", "--workers", "1", "--no-access-log"]
    starlette += ["--log-level", "warning", "bench.constant:create", "--factory"]
    constant = Server("constant", starlette, {"BENCH_CONSTANT_BODY": str(constant_path)})
    answers_path = OUT / "answers.json"
    # Not the target's measure: what reading the request and choosing its answer costs any cache of whole answers.
    looked_up = Server("looked up", starlette, {"BENCH_CONSTANT_ANSWERS": str(answers_path)})
    variants["answer looked up (Starlette)"] = looked_up
    # Its answers are the constant's and the looked-up variant's.
    answering = variants["hit"]
    if args.only:
        unknown = set(args.only) - set(variants)
        if unknown:
            parser.error(f"no such variant: {', '.join(sorted(unknown))} (variants: {', '.join(variants)})")
        variants = {name: server for name, server in variants.items() if name in args.only}
    with running(answering) as (_, url):
        median, answers = warm_up(url, bodies)
    constant_path.write_bytes(median)
    answers_path.write_text(json.dumps(answers))
    print(f"constant body: {constant_path.stat().st_size} bytes; {len(bodies)} ids", flush=True)

    if args.instructions or args.loaded_instructions:
        # Its Redis calls cross to another process, which callgrind does not see.
        variants.pop("hit, Redis tier only", None)
        everyone = [("constant", constant), *variants.items()]
        encoded = [b.encode() for b in bodies]
        # An entry in memory must outlive the slowed run: the program runs some 50 times slower under callgrind.
        held = {"WOVEPAPER_NEAR_CACHE_MAX_AGE_S": "3600"}
        counted = {
            name: count_instructions(replace(server, env={**server.env, **held}), encoded, args.instructions, 2)
            if args.instructions
            else count_loaded(
                replace(server, env={**server.env, **held}), bodies, bodies_path, args.loaded_instructions
            )
            for name, server in everyone
        }
        for name, per_request in counted.items():
            print(f"| {name} | {per_request:,.0f} | {per_request / counted['constant']:.3f} |")
        return

    results: dict[str, list[dict[str, float]]] = {}
    ratios: dict[str, list[float]] = {}
    order = [("constant", constant), *variants.items()]
    for round_no in range(args.rounds):
        got: dict[str, dict[str, float]] = {}
        for name, server in order if round_no % 2 == 0 else list(reversed(order)):
            with running(server) as (pid, url):
                if name != "constant" and not server.env.get("BENCH_CONSTANT_ANSWERS"):
                    warm_up(url, bodies, proxied=clients(server) > 0)
                got[name] = r = wrk(url, "/graphql", bodies_path, args.duration, pid, clients=clients(server))
            load = os.getloadavg()[0]
            r["load"] = load
            print(
                f"round {round_no + 1} {name}: {r['rps']:.0f} req/s, "
                f"{r['server_cpu_ms_per_req'] * 1000:.0f} us CPU/req, "
                f"p50 {r['p50_ms']:.2f} ms, non-2xx {r['non_2xx']:.0f}, load {load:.1f}",
                flush=True,
            )
            results.setdefault(name, []).append(r)
        for name in variants:
            ratios.setdefault(name, []).append(
                got[name]["server_cpu_ms_per_req"] / got["constant"]["server_cpu_ms_per_req"]
            )
    report(results, ratios)


def count_loaded(server: Server, bodies: list[str], bodies_path: Path, seconds: int) -> float:
    """Instructions the server's process executes per request under callgrind while wrk loads it for `seconds`."""
    with under_callgrind(server, "loaded-") as counted:
        if not server.env.get("BENCH_CONSTANT_ANSWERS") and server.name != "constant":
            warm_up(counted.url, bodies, proxied=clients(server) > 0)
        with counted.counting():
            rps = wrk(counted.url, "/graphql", bodies_path, seconds, counted.pid, clients=clients(server))["rps"]
    return counted.total / (rps * seconds)


async def decompose(database_url: str, redis_url: str, bodies: list[str], n: int = 3000) -> None:
    """CPU per hit in this process, no HTTP: the app's own share of a hit, against Starlette answering a constant
    the same way, with the request log line and without it. Stable where req/s swings with the machine's load."""
    import logging

    from app import create_app
    from settings import Settings
    from telemetry import logs

    logs.configure("json")
    logging.getLogger().handlers[0].stream = open(os.devnull, "w")  # noqa: SIM115, ASYNC230 (lives with the run)
    settings = Settings(
        DATABASE_URL=database_url,
        REDIS_URL=redis_url,
        rate_limits="off",
        semantic_preload=False,
        cache_namespace="benchwarm-decompose",
        redis_timeout_s=1.0,
    )
    app = create_app(settings)
    sent: list[bytes] = []

    async def call(target: object, state: dict[str, object], body: bytes) -> None:
        scope = graphql_post_scope(body, state)
        message = {"type": "http.request", "body": body, "more_body": False}

        async def receive() -> dict[str, object]:
            return message

        async def send(m: dict[str, object]) -> None:
            if m["type"] == "http.response.body":
                sent.append(m["body"])  # type: ignore[arg-type]

        await target(scope, receive, send)  # type: ignore[operator]

    raw = [b.encode() for b in bodies]
    async with app.router.lifespan_context(app) as state:
        near = state["near"]  # type: ignore[index]
        for _ in range(100):
            if near.listening():
                break
            await asyncio.sleep(0.05)
        for body in raw * 2:
            await call(app, state, body)  # type: ignore[arg-type]
        constant = create_constant(sent[-1])

        async def timed(target: object, st: dict[str, object]) -> float:
            started = time.process_time()
            for i in range(n):
                await call(target, st, raw[i % len(raw)])
            return (time.process_time() - started) / n * 1e6

        rows = {
            "hit, whole app": await timed(app, state),  # type: ignore[arg-type]
            "constant (Starlette)": await timed(constant, {}),
        }
        logging.disable(logging.INFO)
        rows["hit, no request log line"] = await timed(app, state)  # type: ignore[arg-type]
        logging.disable(logging.NOTSET)
        print(f"near hits: {state['cache'].metrics.response_near_hits}")  # type: ignore[index]
    for name, micros in rows.items():
        print(f"{name}: {micros:.1f} µs CPU per request (in process, no HTTP)")


def create_constant(body: bytes) -> object:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    async def graphql(request: Request) -> Response:
        return Response(body, media_type="application/json")

    return Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])


def report(results: dict[str, list[dict[str, float]]], ratios: dict[str, list[float]]) -> None:
    print()
    print("| variant | req/s per round | server CPU µs/req per round | median µs/req | x constant (median of rounds) |")
    print("|---|---|---|---:|---:|")
    for name, rows in results.items():
        cpu = [r["server_cpu_ms_per_req"] * 1000 for r in rows]
        ratio = f"{statistics.median(ratios[name]):.2f}" if name in ratios else "1.00"
        rps = ", ".join(f"{r['rps']:.0f}" for r in rows)
        print(f"| {name} | {rps} | {', '.join(f'{c:.0f}' for c in cpu)} | {statistics.median(cpu):.0f} | {ratio} |")
    for name, values in ratios.items():
        print(f"{name} / constant per round: {', '.join(f'{v:.2f}' for v in values)}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {time.strftime('%H:%M UTC')}")
    (OUT / "last.json").write_text(json.dumps({"results": results, "ratios": ratios}, indent=1))


if __name__ == "__main__":
    main()
