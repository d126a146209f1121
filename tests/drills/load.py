"""Steady load of the site's operations against a served API, recorded per phase of a drill.

Every answer is classified: `ok` (HTTP 200, no errors, the same data as before the fault), a coded error
(`SERVICE_UNAVAILABLE`, `OVERLOADED`, ..., with its HTTP status), `WRONG_DATA`, `HTTP_<status>` without a
GraphQL error body, or `NO_ANSWER` (transport error or no answer within the client timeout)."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from edge.persisted import operation_documents

OPERATIONS = Path(__file__).resolve().parents[2] / "frontend_contract" / "operations"
RETRYABLE = frozenset({"SERVICE_UNAVAILABLE", "OVERLOADED"})


def operation_text(name: str) -> str:
    return operation_documents(OPERATIONS)[name]


@dataclass(frozen=True)
class Call:
    name: str
    body: dict[str, Any]


async def site_calls(dsn: str, *, researchers: int = 20) -> list[Call]:
    """ResearcherPage, InstitutionPage and PaperPage for ids of the database, plus ResearchersList."""
    conn = await asyncpg.connect(dsn)
    try:
        rids = [r["id"] for r in await conn.fetch("SELECT id FROM researchers ORDER BY id LIMIT $1", researchers)]
        iids = [r["id"] for r in await conn.fetch("SELECT id FROM institutions ORDER BY id LIMIT 5")]
        aids = [r["arxiv_id"] for r in await conn.fetch("SELECT arxiv_id FROM papers ORDER BY id LIMIT 5")]
    finally:
        await conn.close()

    def call(name: str, variables: dict[str, Any]) -> Call:
        return Call(name, {"query": operation_text(name), "operationName": name, "variables": variables})

    calls = [call("ResearcherPage", {"id": str(i)}) for i in rids]
    calls += [call("InstitutionPage", {"id": str(i)}) for i in iids]
    calls += [call("PaperPage", {"id": a}) for a in aids]
    calls.append(call("ResearchersList", {"first": 24}))
    return calls


@dataclass
class Outcome:
    phase: str
    seconds: float
    outcome: str
    status: int
    retry_after: bool


@dataclass
class Load:
    base_url: str
    calls: list[Call]
    concurrency: int = 8
    timeout_s: float = 20.0
    phase: str = "warm-up"
    expected: dict[int, Any] = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def prepare(self) -> None:
        """The expected data of every call, read before any fault."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s) as client:
            for i, c in enumerate(self.calls):
                response = await client.post("/graphql", json=c.body)
                body = response.json()
                assert response.status_code == 200 and "errors" not in body, (c.name, body)
                self.expected[i] = body["data"]

    async def __aenter__(self) -> Load:
        await self.prepare()
        self._tasks = [asyncio.create_task(self._worker(w)) for w in range(self.concurrency)]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.wait_for(asyncio.gather(*self._tasks), timeout=self.timeout_s + 10)

    async def _worker(self, worker: int) -> None:
        async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout_s) as client:
            n = worker
            while not self._stop.is_set():
                index = n % len(self.calls)
                n += self.concurrency
                started = time.perf_counter()
                try:
                    response = await client.post("/graphql", json=self.calls[index].body)
                except httpx.HTTPError:
                    self.outcomes.append(Outcome(self.phase, time.perf_counter() - started, "NO_ANSWER", 0, False))
                    await asyncio.sleep(0.05)
                    continue
                seconds = time.perf_counter() - started
                # Counted in the phase its answer came in.
                self.outcomes.append(
                    Outcome(
                        self.phase,
                        seconds,
                        self._classify(index, response),
                        response.status_code,
                        "retry-after" in response.headers,
                    )
                )

    def _classify(self, index: int, response: httpx.Response) -> str:
        try:
            body = response.json()
        except ValueError:
            return f"HTTP_{response.status_code}"
        errors = body.get("errors") if isinstance(body, dict) else None
        if errors:
            codes = sorted({str((e.get("extensions") or {}).get("code")) for e in errors})
            return "+".join(codes)
        if response.status_code != 200:
            return f"HTTP_{response.status_code}"
        return "ok" if body.get("data") == self.expected[index] else "WRONG_DATA"

    async def run_phase(self, name: str, seconds: float) -> None:
        self.phase = name
        await asyncio.sleep(seconds)

    def summary(self) -> dict[str, dict[str, Any]]:
        by_phase: dict[str, list[Outcome]] = defaultdict(list)
        for o in self.outcomes:
            by_phase[o.phase].append(o)
        out: dict[str, dict[str, Any]] = {}
        for phase, items in by_phase.items():
            times = sorted(o.seconds for o in items)
            out[phase] = {
                "requests": len(items),
                "outcomes": dict(Counter(o.outcome for o in items)),
                "p50_ms": round(statistics.median(times) * 1000, 1),
                "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))] * 1000, 1),
                "max_ms": round(times[-1] * 1000, 1),
            }
        return out

    def bad(self) -> list[Outcome]:
        """Answers that break the promise: anything but the right data or a coded, retryable 503."""
        return [
            o
            for o in self.outcomes
            if o.outcome != "ok" and not (o.outcome in RETRYABLE and o.status == 503 and o.retry_after)
        ]


def format_summary(title: str, summary: dict[str, dict[str, Any]]) -> str:
    lines = [
        title,
        "| phase | requests | outcomes | p50 ms | p99 ms | max ms |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    for phase, s in summary.items():
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(s["outcomes"].items()))
        lines.append(f"| {phase} | {s['requests']} | {outcomes} | {s['p50_ms']} | {s['p99_ms']} | {s['max_ms']} |")
    return "\n".join(lines)
