"""The fault drills, shared by the test suite (short phases) and bench/drills.py (longer ones, for the numbers in
bench/RESULTS.md). Each starts what it breaks, on loopback, and stops everything it started."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx

import localservers
from db.admin import create_database
from db.cache.client import create_redis
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.migrate import migrate
from db.records import Touched
from localservers import with_database
from tests.drills.load import Load, operation_text, site_calls
from tests.drills.servers import DrillPostgres
from tests.server_process import ServerProcess, start_api

# Whole-response hits: the site's anonymous operations are answered from there when Redis serves.
HITS = 'wovepaper_cache_events_total{cache="response",event="hit"}'


@dataclass
class DrillResult:
    summary: dict[str, dict[str, Any]]
    bad: list[Any]
    facts: dict[str, Any] = field(default_factory=dict)


@contextlib.asynccontextmanager
async def throwaway_demo_database(admin_dsn: str, *, papers: int, prefix: str) -> AsyncIterator[str]:
    """A database of its own on the server of `admin_dsn`, with the demo data; dropped at the end."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(admin_dsn)
    try:
        await create_database(admin, name)
    finally:
        await admin.close()
    try:
        dsn = with_database(admin_dsn, name)
        await load_small_demo(dsn, papers=papers)
        yield dsn
    finally:
        admin = await asyncpg.connect(admin_dsn)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def load_small_demo(dsn: str, papers: int = 300) -> None:
    from demo import load_demo

    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        await load_demo(conn, papers=papers, seed=7)
    finally:
        await conn.close()


async def metric(client: httpx.AsyncClient, name: str) -> float:
    text = (await client.get("/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def until(predicate: Any, timeout_s: float, every_s: float = 0.1) -> float | None:
    """Seconds until `await predicate()` is true, or None after `timeout_s`."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if await predicate():
            return time.monotonic() - started
        await asyncio.sleep(every_s)
    return None


async def redis_drill(
    dsn: str, work: Path, *, phase_s: float, concurrency: int = 8, reset_s: float = 2.0
) -> DrillResult:
    """Redis frozen (SIGSTOP), back (SIGCONT), killed (SIGKILL) and restarted, under a steady load; an ingest-side
    invalidation made while it is frozen is delivered by the next one."""
    os.makedirs(work, exist_ok=True)
    port = localservers.free_port()
    redis = localservers.start_redis(work / "redis", port=port)
    namespace = f"drill{uuid.uuid4().hex[:8]}"
    env = {
        "DATABASE_URL": dsn,
        "REDIS_URL": redis.url,
        "WOVEPAPER_CACHE_NAMESPACE": namespace,
        "WOVEPAPER_REDIS_BREAKER_RESET_S": str(reset_s),
        "WOVEPAPER_REDIS_BREAKER_MIN_CALLS": "5",
    }
    api = start_api(env, work / "api.log")
    ingest_cache = CacheStore(create_redis(redis.url, timeout_s=0.25), namespace=namespace, ttl_s=600)
    facts: dict[str, Any] = {}
    try:
        calls = await site_calls(dsn)
        conn = await asyncpg.connect(dsn)
        try:
            # A researcher outside the load's calls: the one the "ingest" renames while Redis is frozen.
            renamed = await conn.fetchval("SELECT max(id) FROM researchers")
        finally:
            await conn.close()
        probe_body = {"query": operation_text("ResearcherPage"), "variables": {"id": str(renamed)}}
        async with (
            httpx.AsyncClient(base_url=api.url, timeout=20) as client,
            Load(api.url, calls, concurrency=concurrency) as load,
        ):

            async def name_served() -> str:
                return str((await client.post("/graphql", json=probe_body)).json()["data"]["researcher"]["name"])

            old_name = await name_served()  # now cached
            await load.run_phase("redis up", phase_s)
            os.kill(redis.pid, signal.SIGSTOP)
            try:
                load.phase = "redis frozen"
                conn = await asyncpg.connect(dsn)
                try:
                    await conn.execute("UPDATE researchers SET name = name || ' (renamed)' WHERE id = $1", renamed)
                finally:
                    await conn.close()
                await invalidate(ingest_cache, Touched(researchers={renamed}))
                facts["invalidation_deferred"] = bool(ingest_cache.pending_invalidation)
                await load.run_phase("redis frozen", phase_s)
            finally:
                os.kill(redis.pid, signal.SIGCONT)
            load.phase = "redis back"
            hits = await metric(client, HITS)

            async def cache_used() -> bool:
                breaker = await metric(client, "wovepaper_cache_breaker_state")
                now = await metric(client, HITS)
                return breaker == 0 and now > hits

            facts["cache_back_after_s"] = await until(cache_used, reset_s + 30)
            await invalidate(ingest_cache, Touched())  # the ingest's next invalidation sends the deferred one
            facts["invalidation_delivered"] = not ingest_cache.pending_invalidation
            facts["stale_name_before"] = old_name
            facts["name_after_invalidation"] = await name_served()
            await load.run_phase("redis back", phase_s)
            redis.process.kill()
            redis.process.wait(5)
            await load.run_phase("redis killed", phase_s)
            redis = localservers.start_redis(work / "redis2", port=port)
            load.phase = "redis restarted"
            facts["cache_back_after_restart_s"] = await until(lambda: _breaker_closed(client), reset_s + 30)
            await load.run_phase("redis restarted", phase_s)
        return DrillResult(load.summary(), load.bad(), facts)
    finally:
        await ingest_cache.aclose()
        api.stop()
        redis.stop()


async def _breaker_closed(client: httpx.AsyncClient) -> bool:
    return await metric(client, "wovepaper_cache_breaker_state") == 0


async def postgres_drill(work: Path, *, phase_s: float, concurrency: int = 8) -> DrillResult:
    """A PostgreSQL the drill owns, restarted (`pg_ctl restart -m fast`), stopped and started, and its API
    connections terminated, under a steady load of the site's operations; /readyz followed throughout."""
    os.makedirs(work, exist_ok=True)
    pg = await asyncio.to_thread(DrillPostgres.create)
    facts: dict[str, Any] = {}
    api: ServerProcess | None = None
    try:
        admin = await asyncpg.connect(pg.admin_dsn)
        try:
            await admin.execute("CREATE DATABASE drill")
        finally:
            await admin.close()
        dsn = pg.dsn("drill")
        await load_small_demo(dsn)
        api = start_api({"DATABASE_URL": dsn, "WOVEPAPER_POOL_MAX_SIZE": "6"}, work / "api.log")
        calls = await site_calls(dsn)
        async with (
            httpx.AsyncClient(base_url=api.url, timeout=20) as client,
            Load(api.url, calls, concurrency=concurrency) as load,
        ):

            async def ready() -> bool:
                return (await client.get("/readyz")).status_code == 200

            async def down() -> bool:
                r = await client.get("/readyz")
                return r.status_code == 503 and r.json()["status"] == "down"

            await load.run_phase("postgres up", phase_s)
            load.phase = "restart -m fast"
            started = time.monotonic()
            await asyncio.to_thread(pg.restart)
            facts["restart_s"] = round(time.monotonic() - started, 2)
            facts["ready_after_restart_s"] = await until(ready, 30)
            await load.run_phase("after restart", phase_s)
            load.phase = "stopped"
            await asyncio.to_thread(pg._run, "pg_ctl", "-D", str(pg.data), "-m", "fast", "-w", "stop")
            facts["readyz_down_while_stopped"] = await until(down, 10) is not None
            await load.run_phase("stopped", phase_s / 2)
            load.phase = "started again"
            started = time.monotonic()
            await asyncio.to_thread(pg.start)
            recovered = await until(ready, 30)
            facts["ready_after_start_s"] = None if recovered is None else round(time.monotonic() - started, 2)
            await load.run_phase("started again", phase_s)
            load.phase = "backends terminated"
            terminator = await asyncpg.connect(pg.admin_dsn)
            try:
                deadline = time.monotonic() + phase_s
                killed = 0
                while time.monotonic() < deadline:
                    killed += await terminator.fetchval(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE datname = 'drill' AND application_name = 'wovepaper'"
                    )
                    await asyncio.sleep(0.3)
                facts["backends_terminated"] = killed
            finally:
                await terminator.close()
            await load.run_phase("after terminations", phase_s)
            facts["ready_at_end"] = await ready()
        log = (work / "api.log").read_text(errors="replace")
        facts["internal_errors_logged"] = log.count("INTERNAL_SERVER_ERROR") + log.count("unexpected error")
        facts["state_12_logged"] = log.count("cannot switch to state")
        # While stopped a request may only fail with a coded 503; in every other phase too.
        return DrillResult(load.summary(), load.bad(), facts)
    finally:
        if api is not None:
            api.stop()
        await asyncio.to_thread(pg.stop)


async def shutdown_drill(dsn: str, work: Path, *, drain_s: float = 1.5, grace_s: float = 10.0) -> DrillResult:
    """SIGTERM under load: /readyz says draining while requests are still answered, in-flight requests complete,
    the process exits within drain + grace."""
    os.makedirs(work, exist_ok=True)
    api = start_api(
        {
            "DATABASE_URL": dsn,
            "WOVEPAPER_SHUTDOWN_DRAIN_S": str(drain_s),
            "WOVEPAPER_SHUTDOWN_GRACE_S": str(grace_s),
        },
        work / "api.log",
    )
    facts: dict[str, Any] = {}
    try:
        calls = await site_calls(dsn)
        async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:
            load = Load(api.url, calls, concurrency=6)
            async with load:
                await load.run_phase("serving", 1.0)
                load.phase = "draining"
                sent = time.monotonic()
                api.process.send_signal(signal.SIGTERM)

                async def draining() -> bool:
                    r = await client.get("/readyz")
                    return r.status_code == 503 and r.json()["status"] == "draining"

                facts["readyz_draining_after_s"] = await until(draining, drain_s, every_s=0.05)
                # Still answering while draining.
                facts["graphql_while_draining"] = (await client.post("/graphql", json=calls[0].body)).status_code
                await asyncio.sleep(max(0.0, drain_s - (time.monotonic() - sent)))
                load.phase = "stopping"
                exited = await asyncio.to_thread(_wait, api, drain_s + grace_s + 15)
                facts["exit_code"] = api.process.returncode
                facts["exited_after_s"] = None if not exited else round(time.monotonic() - sent, 2)
        log = (work / "api.log").read_text(errors="replace")
        facts["shutdown_complete"] = "Application shutdown complete" in log
        return DrillResult(load.summary(), [o for o in load.bad() if o.phase in ("serving", "draining")], facts)
    finally:
        api.stop()


def _wait(api: ServerProcess, timeout_s: float) -> bool:
    try:
        api.process.wait(timeout_s)
        return True
    except Exception:
        return False
