"""Analysis throughput: papers per second through `ingest analyse` against the fake model, writes included.

    .venv/bin/python -m bench.analyse --database-url postgresql://postgres@127.0.0.1:5432/wovepaper_bench_13 \
        [--papers 5000] [--batch-size 20] [--latency-ms 0] [--connections 20]

The fake OpenAI-compatible server of the tests answers each request with a valid analysis of its paper,
after `--latency-ms` (0: at once, so what is timed is ours: queue reads, request building, JSON parsing and
validation, and the batch's transaction with its checkpoint). The run analyses the next `--papers` papers of
the database's queue (newest first), so each run writes papers the previous one did not. Results on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

import asyncpg

from db.queries.analyses import count_analysis_queue
from ingest.analyse import analyse
from llm import ModelClient
from tests.fake_model import Behaviour, Received, analyst, fake_model_in_thread


def slow_analyst(latency_s: float) -> Any:
    def respond(received: Received) -> Behaviour:
        answer = analyst(received)

        async def behave(r: Received, out: Any) -> None:
            await asyncio.sleep(latency_s)
            await answer(r, out)

        return behave

    return respond


async def run(dsn: str, base_url: str, papers: int, batch_size: int, connections: int) -> dict[str, Any]:
    conn = await asyncpg.connect(dsn)
    try:
        queued = await count_analysis_queue(conn)
        async with ModelClient(base_url, model="fake-analyst", rps=100_000.0, max_connections=connections) as client:
            t0 = time.perf_counter()
            summary = await analyse(conn, client, limit=papers, batch_size=batch_size, daily_tokens=0)
            seconds = time.perf_counter() - t0
    finally:
        await conn.close()
    return {"queued": queued, "summary": summary.line("analyse"), "seconds": seconds, "rate": summary.updated / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--papers", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--connections", type=int, default=20, help="as `ingest analyse` opens")
    args = parser.parse_args()
    responder = slow_analyst(args.latency_ms / 1000) if args.latency_ms else analyst
    with fake_model_in_thread(responder) as model:
        result = asyncio.run(run(args.database_url, model.base_url, args.papers, args.batch_size, args.connections))
    print(
        f"{result['queued']:,} queued; batch {args.batch_size}, {args.connections} connections, "
        f"model latency {args.latency_ms:g} ms: {result['summary']}"
    )
    print(f"{result['seconds']:.1f} s, {result['rate']:.1f} papers/s")


if __name__ == "__main__":
    main()
