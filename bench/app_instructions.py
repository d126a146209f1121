"""Instructions the app executes per request of one operation, in process: straight into the ASGI app (no HTTP, no
uvicorn), counted by valgrind's callgrind around the measured requests only.

    .venv/bin/python -m bench.app_instructions --database-url ... --operation PaperList [--requests 200]
        [--checkout /tmp/other-checkout ...]

Each checkout (this one by default) is counted in a process of its own (its code first on the path). About 30 s a
count, and the same count for the same code and data however busy the machine is: for weighing one change at a
time. `bench/run.py --instructions` counts whole servers over HTTP. No Redis, rate limits off; the request bodies
are bench/run.py's sample (40 variable sets, a fixed seed); "Typename" is `{ __typename }`, the fixed cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLED = ("ResearcherPage", "PaperPage", "PaperList")


def graphql_post_scope(body: bytes, state: Mapping[str, Any]) -> dict[str, Any]:
    """The ASGI scope of a JSON POST of `body` to /graphql, carrying the lifespan's `state`."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/graphql",
        "raw_path": b"/graphql",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
        ],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
        "state": dict(state),
    }


async def _serve(database_url: str, operation: str, requests: int) -> None:
    """Runs in the counted process: warm up, then `requests` requests with counting on."""
    from app import create_app
    from bench.run import OPERATIONS, sample_variables
    from edge.persisted import operation_documents
    from settings import Settings

    if operation in SAMPLED:
        variables = await sample_variables(database_url, operation, 40, 0.42)
        query = operation_documents(OPERATIONS)[operation]
    else:
        variables, query = [{}], "query Typename { __typename }"
    bodies = [json.dumps({"query": query, "variables": v, "operationName": operation}).encode() for v in variables]
    app = create_app(Settings(DATABASE_URL=database_url, rate_limits="off"))
    async with app.router.lifespan_context(app) as state:

        async def one(i: int) -> None:
            body, sent = bodies[i % len(bodies)], False
            out: list[MutableMapping[str, Any]] = []

            async def receive() -> dict[str, Any]:
                nonlocal sent
                if sent:
                    await asyncio.Event().wait()
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: MutableMapping[str, Any]) -> None:
                out.append(message)

            await app(graphql_post_scope(body, state or {}), receive, send)
            assert out[0]["status"] == 200 and b'"errors"' not in out[1]["body"], out[1]["body"][:300]

        for i in range(100):
            await one(i)
        _callgrind("-i", "on")
        for i in range(requests):
            await one(i)
        _callgrind("-i", "off")
        _callgrind("-d")


def _callgrind(*command: str) -> None:
    """Tell callgrind about this very process (it waits: nothing else is running here)."""
    subprocess.run(["callgrind_control", *command, str(os.getpid())], check=True, capture_output=True)


def count(checkout: Path, database_url: str, operation: str, requests: int) -> float:
    """Instructions per request of `operation` for the code in `checkout`."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
        # A fixed hash seed: with random ones, dict and set layouts move a count by about 1% from run to run.
        env.update(PYTHONPATH=str(checkout), PYTHONHASHSEED="0", WOVEPAPER_SEMANTIC_PRELOAD="off")
        env.update(WOVEPAPER_LOG_LEVEL="warning")
        command = [
            *("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"),
            # This file by its path: the checkout (first on the path) supplies the app and bench.run.
            *(sys.executable, __file__, "--child", database_url, operation, str(requests)),
        ]
        subprocess.run(command, cwd=checkout, env=env, check=True, capture_output=True)
        text = Path(f"{out}.1").read_text()
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("totals:")) / requests


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        # Run by its path, this file's folder came first on the path, where bench/chat.py would stand for `chat`.
        sys.path.remove(str(Path(__file__).resolve().parent))
        database_url, operation, requests = sys.argv[2:]
        asyncio.run(_serve(database_url, operation, int(requests)))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--operation", default="PaperList", choices=[*SAMPLED, "Typename"])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--checkout", type=Path, action="append", help="another checkout to count (repeatable)")
    args = parser.parse_args()
    if not args.database_url:
        sys.exit("--database-url or DATABASE_URL is required")
    for checkout in [ROOT, *(args.checkout or [])]:
        per_request = count(checkout, args.database_url, args.operation, args.requests)
        print(f"{args.operation} {checkout}: {per_request:,.0f} instructions per request", flush=True)


if __name__ == "__main__":
    main()
