"""The replica drills, shared by the test suite and bench/drills.py: a PostgreSQL the drill owns, a streaming replica
made from it with `pg_basebackup -R` (both run as a non-root user, on loopback), `wovepaper serve` reading from
the replica, and what breaks it: a replay delay (`recovery_min_apply_delay`), a paused replay, a killed replica, a
restarted primary. Their assertions are about answers; the times they print are facts, never asserted."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from cdn.purge import HttpPurge
from db.cache.client import create_redis
from db.cache.invalidation import attach_purge
from db.cache.store import CacheStore
from ingest.harvest import harvest_arxiv
from ingest.purge import PurgeAfterReplicas
from tests.drills.load import Load, operation_text, site_calls
from tests.drills.scenarios import DrillResult, load_small_demo, metric, until
from tests.drills.servers import DrillPostgres, DrillReplica
from tests.ingest.conftest import FakeClock, FakeOAI, list_records_page
from tests.ingest.upstreams import arxiv_raw, enrich_archive_page
from tests.jwt_support import SECRET, hs256
from tests.server_process import ServerProcess, start_api

DATABASE = "drill"
FOLLOWING = "{ viewer { following(first: 100) { nodes { databaseId } } } }"
FOLLOW = "mutation F($id: String!) { followResearcher(input: { id: $id }) { researcher { databaseId } } }"
UNFOLLOW = "mutation U($id: String!) { unfollowResearcher(input: { id: $id }) { researcher { databaseId } } }"
CHEMCROW = "2304.05376"


@dataclass
class Replicated:
    """A primary with the small demo database and one streaming replica of it."""

    primary: DrillPostgres
    replica: DrillReplica

    @property
    def primary_dsn(self) -> str:
        return self.primary.dsn(DATABASE)

    @property
    def replica_dsn(self) -> str:
        return self.replica.dsn(DATABASE)

    @property
    def label(self) -> str:
        """The replica's label in the metrics."""
        return f"127.0.0.1:{self.replica.port}/{DATABASE}"

    async def on_replica(self, sql: str, *args: Any) -> Any:
        conn = await asyncpg.connect(self.replica_dsn)
        try:
            return await conn.fetchval(sql, *args)
        finally:
            await conn.close()

    async def apply_delay(self, seconds: float) -> None:
        """`recovery_min_apply_delay`: each commit is replayed that long after it committed on the primary."""
        conn = await asyncpg.connect(self.replica.admin_dsn)
        try:
            await conn.execute(f"ALTER SYSTEM SET recovery_min_apply_delay = '{int(seconds * 1000)}ms'")
            await conn.execute("SELECT pg_reload_conf()")
        finally:
            await conn.close()

    async def caught_up(self, timeout_s: float = 30) -> None:
        """Until the replica has replayed everything the primary has written by now."""
        conn = await asyncpg.connect(self.primary_dsn)
        try:
            # The insert position: the ingest's commits do not wait for the disk (nor for the written position).
            written = await conn.fetchval("SELECT pg_current_wal_insert_lsn()")
        finally:
            await conn.close()

        async def replayed() -> bool:
            return bool(await self.on_replica("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", written))

        assert await until(replayed, timeout_s, every_s=0.05) is not None, "the replica did not catch up"


@contextlib.asynccontextmanager
async def replicated_demo() -> AsyncIterator[Replicated]:
    pg = await asyncio.to_thread(DrillPostgres.create)
    try:
        admin = await asyncpg.connect(pg.admin_dsn)
        try:
            await admin.execute(f"CREATE DATABASE {DATABASE}")
        finally:
            await admin.close()
        await load_small_demo(pg.dsn(DATABASE))
        replica = await asyncio.to_thread(DrillReplica.create, pg)
        try:
            yield Replicated(pg, replica)
        finally:
            if replica.running():
                await asyncio.to_thread(replica.kill)
    finally:
        await asyncio.to_thread(pg.stop)


def replica_api(
    cluster: Replicated, log: Path, *, redis_url: str | None, max_lag_s: float, namespace: str = "rd"
) -> ServerProcess:
    env = {
        "DATABASE_URL": cluster.primary_dsn,
        "WOVEPAPER_DATABASE_REPLICA_URLS": cluster.replica_dsn,
        "WOVEPAPER_REPLICA_MAX_LAG_S": str(max_lag_s),
        "WOVEPAPER_JWT_SECRET": SECRET,
        "WOVEPAPER_POOL_MAX_SIZE": "6",
    }
    if redis_url is not None:
        env |= {"REDIS_URL": redis_url, "WOVEPAPER_CACHE_NAMESPACE": namespace}
    return start_api(env, log)


async def replica_reads(client: httpx.AsyncClient, cluster: Replicated) -> float:
    return await metric(client, f'wovepaper_db_reads_total{{target="{cluster.label}"}}')


async def until_usable(client: httpx.AsyncClient, cluster: Replicated, usable: bool, timeout_s: float) -> float | None:
    async def state() -> bool:
        return await metric(client, f'wovepaper_db_replica_usable{{replica="{cluster.label}"}}') == (1 if usable else 0)

    return await until(state, timeout_s, every_s=0.05)


async def follows_drill(cluster: Replicated, api: ServerProcess, *, rounds: int, delay_s: float) -> DrillResult:
    """Drill 1: a reader follows and unfollows researchers `rounds` times, reading `viewer { following }` right after
    each, while the replica replays every commit `delay_s` late; another reader's reads go on meanwhile."""
    await cluster.apply_delay(delay_s)
    conn = await asyncpg.connect(cluster.primary_dsn)
    try:
        researchers = [r["id"] for r in await conn.fetch("SELECT id FROM researchers ORDER BY id LIMIT 7")]
    finally:
        await conn.close()
    writer = {"authorization": f"Bearer {hs256(f'follower-{uuid.uuid4().hex[:8]}')}"}
    other = {"authorization": f"Bearer {hs256('bystander')}"}
    misses: list[tuple[int, set[int], set[int]]] = []
    facts: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:
            replica_before = await replica_reads(client, cluster)
            following: set[int] = set()
            for n in range(rounds):
                rid = researchers[n % len(researchers)]
                follow = rid not in following
                body = {"query": FOLLOW if follow else UNFOLLOW, "variables": {"id": str(rid)}}
                done = (await client.post("/graphql", json=body, headers=writer)).json()
                assert "errors" not in done, done
                following ^= {rid}
                read = (await client.post("/graphql", json={"query": FOLLOWING}, headers=writer)).json()
                assert "errors" not in read, read
                seen = {int(r["databaseId"]) for r in read["data"]["viewer"]["following"]["nodes"]}
                if seen != following:
                    misses.append((n, following.copy(), seen))
                bystander = await client.post("/graphql", json={"query": FOLLOWING}, headers=other)
                assert bystander.status_code == 200 and "errors" not in bystander.json()
            facts["misses"] = len(misses)
            facts["rounds"] = rounds
            facts["replica_reads"] = await replica_reads(client, cluster) - replica_before
            facts["read_your_writes_fallbacks"] = await metric(
                client, 'wovepaper_db_replica_fallbacks_total{reason="read_your_writes"}'
            )
    finally:
        await cluster.apply_delay(0)
    return DrillResult({}, misses, facts)


@dataclass
class PurgeReceiver:
    """The CDN purge hook on loopback (httpx.MockTransport): for each purge, whether the replica already had the
    paper's latest title when it arrived."""

    cluster: Replicated
    title: str = ""
    received: list[tuple[list[str], bool]] = field(default_factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        tags = list(httpx.Response(200, content=request.content).json()["tags"])
        on_replica = await self.cluster.on_replica("SELECT title FROM papers WHERE arxiv_id = $1", CHEMCROW)
        self.received.append((tags, on_replica == self.title))
        return httpx.Response(204)


async def ingest_drill(
    cluster: Replicated, api: ServerProcess, *, redis_url: str, namespace: str, delay_s: float
) -> DrillResult:
    """Drill 2: the harvest rewrites a paper whose page is cached, while the replica replays `delay_s` late. The page
    is read at once and on until the replica has the new title, then once more; the CDN purge hook records whether
    the replica had the change when the purge arrived."""
    await cluster.apply_delay(delay_s)
    clock = FakeClock()
    conn = await asyncpg.connect(cluster.primary_dsn)
    cache = CacheStore(create_redis(redis_url, timeout_s=0.5), namespace=namespace, ttl_s=600)
    receiver = PurgeReceiver(cluster)
    purge = PurgeAfterReplicas(
        HttpPurge("http://cdn.test/purge", client=httpx.AsyncClient(transport=httpx.MockTransport(receiver))),
        [cluster.replica_dsn],
        max_lag_s=10,
    )
    attach_purge(cache, purge)
    body = {"query": operation_text("PaperPage"), "variables": {"id": CHEMCROW}, "operationName": "PaperPage"}
    answers: list[tuple[str, str, bool]] = []  # x-cache, title, whether the replica had the new title before
    facts: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:

            async def page() -> tuple[str, str]:
                response = await client.post("/graphql", json=body)
                assert response.status_code == 200, response.text
                paper = response.json()["data"]["paper"]
                return response.headers["x-cache"], str(paper["title"]) if paper is not None else ""

            receiver.title = "ChemCrow: Augmenting large-language models with chemistry tools"
            await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock), cache=cache)
            await cluster.caught_up()

            async def cached() -> bool:
                return (await page())[0] == "hit"

            # Stored once the API has seen the replica replay the harvest (its next health round).
            assert await until(cached, 10) is not None
            old = (await page())[1]
            new = "ChemCrow, revised"
            receiver.title = new
            revised = arxiv_raw(
                CHEMCROW,
                new,
                "Andres M. Bran, Sam Cox, Oliver Schilter, Carlo Baldassari, Andrew D. White, Philippe Schwaller",
                datetime(2023, 4, 11, 12, 0, tzinfo=UTC),
            ).replace(b'version="v1"', b'version="v2"')
            changed_at = time.monotonic()
            await harvest_arxiv(conn, FakeOAI(first=list_records_page([revised], "")).client(clock), cache=cache)
            while True:
                replica_has = await cluster.on_replica("SELECT title FROM papers WHERE arxiv_id = $1", CHEMCROW) == new
                hit, title = await page()
                answers.append((hit, title, replica_has))
                if replica_has:
                    break
                await asyncio.sleep(0.05)
            facts["replica_had_it_after_s"] = round(time.monotonic() - changed_at, 2)
            for _ in range(3):
                hit, title = await page()
                answers.append((hit, title, True))
            facts["old_answers_served"] = sum(t == old for _, t, _ in answers)
            facts["stale_answers_cached"] = sum(t == old and h == "hit" for h, t, _ in answers)
            facts["new_after_the_lag"] = all(t == new for _, t, had in answers if had)
            facts["lagging_stores_skipped"] = await metric(
                client, 'wovepaper_cache_events_total{cache="response",event="lagging_store_skipped"}'
            )
        await purge.aclose()
        facts["purges"] = [(tags[:3], had) for tags, had in receiver.received]
        facts["purged_before_replica_had_it"] = sum(
            not had for tags, had in receiver.received if f"paper:{CHEMCROW}" in tags
        )
    finally:
        await conn.close()
        await cache.aclose()
        await cluster.apply_delay(0)
    bad = [a for a in answers if a[1] == old and a[0] == "hit"]
    return DrillResult({}, bad, facts)


async def replica_killed_drill(
    cluster: Replicated, api: ServerProcess, *, phase_s: float, concurrency: int
) -> DrillResult:
    """Drill 3: the replica killed (`pg_ctl stop -m immediate`) under a steady load of the site's operations, then
    started again; every answer must be the right data."""
    calls = await site_calls(cluster.primary_dsn)
    facts: dict[str, Any] = {}
    async with (
        httpx.AsyncClient(base_url=api.url, timeout=20) as client,
        Load(api.url, calls, concurrency=concurrency) as load,
    ):
        assert await until_usable(client, cluster, True, 30) is not None
        await load.run_phase("replica up", phase_s)
        facts["replica_reads_before"] = await replica_reads(client, cluster)
        load.phase = "replica killed"
        killed = time.monotonic()
        await asyncio.to_thread(cluster.replica.kill)
        out = await until_usable(client, cluster, False, 30)
        facts["out_of_rotation_after_s"] = None if out is None else round(time.monotonic() - killed, 2)
        await load.run_phase("replica killed", phase_s)
        load.phase = "replica restarted"
        started = time.monotonic()
        await asyncio.to_thread(cluster.replica.start)
        back = await until_usable(client, cluster, True, 30)
        facts["back_in_rotation_after_s"] = None if back is None else round(time.monotonic() - started, 2)
        before = await replica_reads(client, cluster)
        await load.run_phase("replica restarted", phase_s)
        facts["replica_reads_after_restart"] = await replica_reads(client, cluster) - before
        for reason in ("read_your_writes", "lagging", "unavailable"):
            name = f'wovepaper_db_replica_fallbacks_total{{reason="{reason}"}}'
            facts[f"fallbacks_{reason}"] = await metric(client, name)
    failed = [o for o in load.outcomes if o.outcome != "ok"]
    facts["failed_requests"] = len(failed)
    return DrillResult(load.summary(), failed, facts)


async def paused_replay_drill(cluster: Replicated, api: ServerProcess, *, max_lag_s: float) -> DrillResult:
    """Drill 4: the replica's replay paused while the primary goes on writing (a researcher renamed every 0.2 s) and
    an anonymous reader reads the name (a document no cache keeps); how old each answer is, from when the version
    after the one it shows committed."""
    conn = await asyncpg.connect(cluster.primary_dsn)
    rid = await conn.fetchval("SELECT max(id) FROM researchers")
    committed: dict[int, float] = {}
    answers: list[tuple[float, int]] = []
    stop = asyncio.Event()
    query = {"query": "query N($id: String!) { researcher(id: $id) { name } }", "variables": {"id": str(rid)}}

    async def rename() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            await conn.execute("UPDATE researchers SET name = $1 WHERE id = $2", f"Drill Four {n}", rid)
            committed[n] = time.monotonic()
            await asyncio.sleep(0.2)

    async def read(client: httpx.AsyncClient) -> None:
        while not stop.is_set():
            sent = time.monotonic()
            data = (await client.post("/graphql", json=query)).json()["data"]["researcher"]["name"]
            answers.append((sent, int(data.rsplit(" ", 1)[1]) if data.startswith("Drill Four ") else 0))
            await asyncio.sleep(0.03)

    facts: dict[str, Any] = {}
    try:
        async with httpx.AsyncClient(base_url=api.url, timeout=20) as client:
            tasks = [asyncio.create_task(rename()), asyncio.create_task(read(client))]
            await asyncio.sleep(1.0)
            before = await replica_reads(client, cluster)
            paused = time.monotonic()
            await cluster.on_replica("SELECT pg_wal_replay_pause()::text")
            out = await until_usable(client, cluster, False, max_lag_s + 10)
            facts["out_of_rotation_after_s"] = None if out is None else round(time.monotonic() - paused, 2)
            facts["replica_reads_while_paused"] = await replica_reads(client, cluster) - before
            await asyncio.sleep(1.0)
            await cluster.on_replica("SELECT pg_wal_replay_resume()::text")
            back = await until_usable(client, cluster, True, 30)
            facts["back_after_resume_s"] = back
            await asyncio.sleep(0.5)
            stop.set()
            await asyncio.gather(*tasks)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await cluster.on_replica("SELECT pg_wal_replay_resume()::text")
        await conn.close()
    ages = []
    for sent, seen in answers:
        superseded = committed.get(seen + 1)
        ages.append(max(0.0, sent - superseded) if superseded is not None and superseded < sent else 0.0)
    facts["answers"] = len(answers)
    facts["oldest_answer_s"] = round(max(ages), 2)
    facts["answers_older_than_one_second"] = sum(a > 1 for a in ages)
    bad = [a for a in ages if a > max_lag_s]
    return DrillResult({}, bad, facts)


async def primary_restarted_drill(
    cluster: Replicated, api: ServerProcess, *, phase_s: float, concurrency: int
) -> DrillResult:
    """Drill 5: the primary restarted (`pg_ctl restart -m fast`) under load: answers are data or a coded 503, and
    everything comes back by itself, reads on the replica and a writer's read-back included."""
    calls = await site_calls(cluster.primary_dsn)
    facts: dict[str, Any] = {}
    async with (
        httpx.AsyncClient(base_url=api.url, timeout=20) as client,
        Load(api.url, calls, concurrency=concurrency) as load,
    ):
        await load.run_phase("primary up", phase_s)
        load.phase = "primary restart"
        started = time.monotonic()
        await asyncio.to_thread(cluster.primary.restart)

        async def ready() -> bool:
            r = await client.get("/readyz")
            return r.status_code == 200 and r.json()["checks"].get("replicas", "").startswith("ok")

        recovered = await until(ready, 30)
        facts["ready_after_restart_s"] = None if recovered is None else round(time.monotonic() - started, 2)
        await load.run_phase("after restart", phase_s)
        writer = {"authorization": f"Bearer {hs256(f'after-restart-{uuid.uuid4().hex[:8]}')}"}
        conn = await asyncpg.connect(cluster.primary_dsn)
        try:
            # One the load does not read: its follower count changes.
            rid = str(await conn.fetchval("SELECT max(id) FROM researchers"))
        finally:
            await conn.close()
        followed = await client.post("/graphql", json={"query": FOLLOW, "variables": {"id": rid}}, headers=writer)
        read = await client.post("/graphql", json={"query": FOLLOWING}, headers=writer)
        nodes = read.json()["data"]["viewer"]["following"]["nodes"]
        facts["follow_after_restart"] = "errors" not in followed.json() and [int(n["databaseId"]) for n in nodes] == [
            int(rid)
        ]
        facts["replica_usable_at_end"] = await until_usable(client, cluster, True, 30) is not None
    return DrillResult(load.summary(), load.bad(), facts)
