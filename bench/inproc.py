"""In-process timing of the ResearcherPage through the whole ASGI app, without HTTP or wrk.

    .venv/bin/python -m bench.inproc --database-url ... [--requests 300] [--profile out.html]

Runs the same researcher ids through the app with graphql-core's executor and with the
FastExecutor, and prints wall and process-CPU milliseconds per request for each (PostgreSQL's
time is in wall, not in CPU). --profile writes a pyinstrument profile of the fast variant.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
from starlette.types import Receive, Scope, Send
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext

from app import create_app
from bench.run import OPERATIONS
from schema import build_schema
from settings import Settings


async def ids_with_full_pages(dsn: str, n: int) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT id FROM researchers ORDER BY paper_count DESC, id LIMIT $1", n)
    finally:
        await conn.close()
    return [str(r["id"]) for r in rows]


async def drive(dsn: str, executor: Any, ids: list[str], requests: int, profile: str | None) -> tuple[float, float]:
    settings = Settings(DATABASE_URL=dsn, rate_limits="off")
    schema = build_schema(settings, execution_context_class=executor)
    app = create_app(settings, schema=schema)
    from edge.persisted import operation_documents

    query = operation_documents(OPERATIONS)["ResearcherPage"]
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
            await app({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:

            async def one(i: int) -> None:
                body = {"query": query, "variables": {"id": ids[i % len(ids)]}, "operationName": "ResearcherPage"}
                r = await client.post("/graphql", json=body)
                assert r.status_code == 200 and "errors" not in r.json(), r.text[:500]

            for i in range(30):
                await one(i)
            profiler = None
            if profile:
                from pyinstrument import Profiler

                profiler = Profiler(async_mode="enabled")
                profiler.start()
            wall0, cpu0 = time.perf_counter(), time.process_time()
            for i in range(requests):
                await one(i)
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            if profiler is not None and profile:
                profiler.stop()
                Path(profile).write_text(profiler.output_html())  # noqa: ASYNC240
                print(profiler.output_text(unicode=False, color=False, show_all=False)[:6000])
    return wall * 1000 / requests, cpu * 1000 / requests


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--profile")
    parser.add_argument("--variants", default="graphql-core,fast")
    args = parser.parse_args()
    ids = asyncio.run(ids_with_full_pages(args.database_url, 50))
    from schema.fast_executor import FastExecutor

    variants = {"graphql-core": StrawberryGraphQLCoreExecutionContext, "fast": FastExecutor}
    for name in args.variants.split(","):
        executor = variants[name]
        wall, cpu = asyncio.run(drive(args.database_url, executor, ids, args.requests, None))
        print(f"{name:12s} wall {wall:6.2f} ms/req   cpu {cpu:6.2f} ms/req")
    if args.profile:
        asyncio.run(drive(args.database_url, FastExecutor, ids, args.requests, args.profile))


if __name__ == "__main__":
    main()
