"""API keys, budgets and their headers, 429, dry runs, and limiting while Redis is down."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

import localservers
from app import create_app
from cli import app as cli_app
from db.cache.client import create_redis
from db.cache.store import CacheStore
from db.queries.api_keys import USE_API_KEY
from edge import ratelimit
from edge.api_keys import FAILED_KEY_POINTS, ApiKeyAuthenticator
from edge.ratelimit import RateLimiter
from telemetry.logs import JsonFormatter
from tests.integration.graph_support import StatementCounter, seeded_database, serving, settings_for

_ns = itertools.count()
TYPENAME = {"query": "{ __typename }"}


@pytest.fixture(scope="module")
async def seeded(make_database: Any) -> Any:
    return await seeded_database(make_database, "edge-keys")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@contextlib.asynccontextmanager
async def api(
    seeded: Any, redis_url: str | None, namespace: str, *, keys: ApiKeyAuthenticator | None = None, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, StatementCounter]]:
    counter = StatementCounter()
    application = create_app(
        settings_for(seeded.dsn, REDIS_URL=redis_url, cache_namespace=f"{namespace}-k{next(_ns)}", **settings),
        query_logger=counter,
        key_authenticator=keys,
    )
    async with serving(application) as client:
        yield client, counter


async def cli(dsn: str, *args: str) -> str:
    """`wovepaper ...` in a thread (the command runs its own event loop), against `dsn`."""

    def run() -> str:
        result = CliRunner().invoke(cli_app, list(args), env={"DATABASE_URL": dsn})
        assert result.exit_code == 0, result.output
        return result.stdout

    return await asyncio.to_thread(run)


async def test_keys_created_listed_checked_without_sql_and_revoked(seeded: Any, redis_url: str, cache_namespace: str):
    key = (await cli(seeded.dsn, "keys", "create", "--name", "partner-a", "--points-per-hour", "50")).strip()
    assert key.startswith("wpk_")
    prefix = key[:12]
    conn = await asyncpg.connect(seeded.dsn)
    try:
        stored = await conn.fetchrow("SELECT key_hash, prefix FROM api_keys WHERE prefix = $1", prefix)
    finally:
        await conn.close()
    assert stored["prefix"] == prefix and key.encode() not in bytes(stored["key_hash"])
    listing = await cli(seeded.dsn, "keys", "list")
    row = next(line for line in listing.splitlines() if prefix in line)
    assert "partner-a" in row and "never" in row and "\t50\t" in row

    clock = Clock()
    async with api(seeded, redis_url, cache_namespace, keys=ApiKeyAuthenticator(clock=clock)) as (client, counter):
        counter.reset()
        for _ in range(5):
            r = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key})
            assert r.status_code == 200 and r.json() == {"data": {"__typename": "Query"}}
            assert r.headers["x-ratelimit-limit"] == "50"
            assert r.headers["cache-control"] == "private, no-store"
        # One look-up for five requests: the key's answer is remembered.
        assert sum("api_keys" in s for s in counter.statements) == 1
        assert "never" not in next(
            line for line in (await cli(seeded.dsn, "keys", "list")).splitlines() if prefix in line
        )

        for bad in ("wpk_00000000_" + "A" * 43, "not-a-key"):
            refused = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": bad})
            assert refused.status_code == 401
            assert refused.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"

        assert "revoked" in await cli(seeded.dsn, "keys", "revoke", prefix)
        clock.now += 11  # past the 10 s a worker remembers a key
        revoked = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key})
        assert revoked.status_code == 401
        assert revoked.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"


def key_look_ups(counter: StatementCounter) -> int:
    return sum("api_keys" in s for s in counter.statements)


async def test_unknown_keys_are_remembered_charged_to_the_address_and_logged(
    seeded: Any, redis_url: str, cache_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Made-up keys cost their sender: each failed authentication spends the address's budget of them (a look-up is
    paid for before it runs), an unknown key is remembered (no statement for it again), and once that budget is
    spent the address is refused without a look-up, while its anonymous browsing goes on. The request lines name
    the address."""
    made_up = [f"wpk_{i:08x}_" + "A" * 43 for i in range(4)]
    options = {"failed_auth_per_hour": 3 * FAILED_KEY_POINTS, "trusted_proxies": "127.0.0.1/32"}
    async with api(seeded, redis_url, cache_namespace, **options) as (client, counter):
        counter.reset()
        with caplog.at_level(logging.INFO, logger="wovepaper.request"):
            for key in (made_up[0], made_up[0], made_up[1]):
                refused = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key})
                assert refused.status_code == 401
                assert refused.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
            assert key_look_ups(counter) == 2  # the repeated key was remembered
            spent = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": made_up[2]})
            assert spent.status_code == 429 and int(spent.headers["retry-after"]) >= 1
            assert spent.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
            assert key_look_ups(counter) == 2  # refused before any look-up
            anonymous = await client.post("/graphql", json=TYPENAME)
            assert anonymous.status_code == 200  # failed authentications have a budget of their own
            elsewhere = {"x-api-key": made_up[3], "x-forwarded-for": "203.0.113.7"}
            assert (await client.post("/graphql", json=TYPENAME, headers=elsewhere)).status_code == 401
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records if r.name == "wovepaper.request"]
    failed = [(line["status"], line["client"], line["error_codes"]) for line in lines if line["status"] == 401]
    assert failed == [(401, "127.0.0.1", ["UNAUTHENTICATED"])] * 3 + [(401, "203.0.113.7", ["UNAUTHENTICATED"])]


async def test_a_good_key_costs_its_address_nothing_and_a_flood_of_unknown_keys_keeps_it_remembered(
    seeded: Any, redis_url: str, cache_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from edge import api_keys

    key = (await cli(seeded.dsn, "keys", "create", "--name", "partner-flood")).strip()
    # Room for about 20 unknown keys: a flood of made-up ones forgets the oldest of them, never the keys in use.
    monkeypatch.setattr(api_keys, "UNKNOWN_BYTES", 20 * api_keys.UNKNOWN_ENTRY_BYTES)
    authenticator = ApiKeyAuthenticator()
    options = {"keys": authenticator, "anon_points_per_hour": 100_000}
    async with api(seeded, redis_url, cache_namespace, **options) as (client, counter):
        assert (await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key})).status_code == 200
        anonymous = await client.post("/graphql", json=TYPENAME)
        assert anonymous.headers["x-ratelimit-used"] == "1"  # the key's look-up never touches the anonymous budget
        for i in range(100):
            made_up = {"x-api-key": f"wpk_{i:08x}_" + "B" * 43}
            assert (await client.post("/graphql", json=TYPENAME, headers=made_up)).status_code == 401
        counter.reset()
        assert (await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key})).status_code == 200
        assert key_look_ups(counter) == 0
        assert authenticator.remembered_bytes() <= api_keys.KNOWN_BYTES + api_keys.UNKNOWN_BYTES


async def test_an_address_whose_anonymous_budget_is_spent_keeps_its_keys(
    seeded: Any, redis_url: str, cache_namespace: str
) -> None:
    """A shared office address whose browsing spent the anonymous budget: a partner's key from it still works, its
    look-up (every 10 s per worker) paid for out of the address's budget of failed authentications, not that one."""
    key = (await cli(seeded.dsn, "keys", "create", "--name", "partner-office")).strip()
    async with api(seeded, redis_url, cache_namespace, anon_points_per_hour=1) as (client, _):
        assert (await client.post("/graphql", json=TYPENAME)).status_code == 200
        assert (await client.post("/graphql", json=TYPENAME)).status_code == 429
        keyed = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key})
        assert keyed.status_code == 200, keyed.text


async def test_a_key_is_looked_up_by_its_index(seeded: Any) -> None:
    conn = await asyncpg.connect(seeded.dsn)
    try:
        plan = await conn.fetchval("EXPLAIN (FORMAT JSON) " + USE_API_KEY, b"\x00" * 32)
    finally:
        await conn.close()
    assert "api_keys_key_hash_key" in str(plan) and "Seq Scan" not in str(plan)


async def test_key_origins(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    key = (await cli(seeded.dsn, "keys", "create", "--name", "site", "--origins", "https://site.example")).strip()
    async with api(seeded, redis_url, cache_namespace) as (client, _):
        ok = await client.post("/graphql", json=TYPENAME, headers={"x-api-key": key, "origin": "https://site.example"})
        assert ok.status_code == 200
        # A key without its own budget has the server's.
        assert ok.headers["x-ratelimit-limit"] == "5000"
        other = await client.post(
            "/graphql", json=TYPENAME, headers={"x-api-key": key, "origin": "https://evil.example"}
        )
        assert other.status_code == 403 and other.json()["errors"][0]["extensions"]["code"] == "FORBIDDEN_ORIGIN"


PAGE = "{ papers(first: 2) { nodes { id } } }"


async def test_budgets_headers_and_429(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    async with api(seeded, redis_url, cache_namespace, anon_points_per_hour=3, trusted_proxies="127.0.0.1/32") as (
        client,
        counter,
    ):
        for remaining in (2, 1, 0):
            r = await client.post("/graphql", json={"query": PAGE})
            assert "errors" not in r.json()
            h = r.headers
            assert (h["x-ratelimit-limit"], h["x-ratelimit-remaining"], h["x-ratelimit-used"]) == (
                "3",
                str(remaining),
                str(3 - remaining),
            )
            assert h["x-ratelimit-resource"] == "graphql" and int(h["x-ratelimit-reset"]) > 0
        counter.reset()
        refused = await client.post("/graphql", json={"query": PAGE})
        assert refused.status_code == 429
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.json()["errors"][0]["extensions"]["code"] == "RATE_LIMITED"
        assert refused.json().get("data") is None
        assert counter.statements == []  # nothing executed
        # Another client address (behind the trusted proxy) has its own budget.
        elsewhere = await client.post("/graphql", json={"query": PAGE}, headers={"x-forwarded-for": "203.0.113.9"})
        assert elsewhere.status_code == 200 and elsewhere.headers["x-ratelimit-remaining"] == "2"


async def test_rate_limit_field_and_dry_run(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    async with api(seeded, redis_url, cache_namespace) as (client, counter):
        body = (
            await client.post(
                "/graphql",
                json={
                    "query": "{ rateLimit { limit cost nodeCount remaining used resetAt } "
                    "papers(first: 50) { nodes { id } } }"
                },
            )
        ).json()
        rl = body["data"]["rateLimit"]
        assert (rl["limit"], rl["cost"], rl["nodeCount"]) == (1000, 1, 50)
        assert rl["remaining"] == 999 and rl["used"] == 1 and rl["resetAt"]
        wide = "researchers(first: 100) { nodes { papers(first: 100) { nodes { id } } } }"
        counter.reset()
        dry = await client.post(
            "/graphql", json={"query": f"{{ rateLimit(dryRun: true) {{ cost nodeCount remaining }} {wide} }}"}
        )
        assert dry.json() == {"data": {"rateLimit": {"cost": 2, "nodeCount": 100 + 100 * 100, "remaining": 999}}}
        assert counter.statements == []  # priced, not executed
        assert dry.headers["x-ratelimit-remaining"] == "999"  # and free


async def test_rate_limits_off_still_price(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    async with api(seeded, redis_url, cache_namespace, anon_points_per_hour=1, rate_limits="off") as (client, _):
        for _ in range(3):
            r = await client.post(
                "/graphql", json={"query": "{ rateLimit { cost nodeCount } papers(first: 3) { nodes { id } } }"}
            )
            assert r.status_code == 200 and r.json()["data"]["rateLimit"] == {"cost": 1, "nodeCount": 3}
            assert "x-ratelimit-limit" not in r.headers


async def test_limiting_goes_on_per_process_while_redis_is_down(seeded: Any, cache_namespace: str, tmp_path) -> None:
    server = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    try:
        async with api(seeded, server.url, cache_namespace, anon_points_per_hour=4) as (client, _):
            first = await client.post("/graphql", json=TYPENAME)
            assert first.headers["x-ratelimit-remaining"] == "3"
            server.stop()
            answered = [await client.post("/graphql", json=TYPENAME) for _ in range(6)]
            statuses = [r.status_code for r in answered]
            # Never "no limit", never "refuse everyone": the process counts on its own.
            assert statuses[:4] == [200] * 4 and statuses[4:] == [429, 429], statuses
    finally:
        if server.process.poll() is None:
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


async def test_concurrent_charges_share_round_trips_and_workers_share_the_budget_exactly(
    redis_url: str, cache_namespace: str
) -> None:
    namespace = f"{cache_namespace}-k{next(_ns)}"
    stores = [CacheStore(create_redis(redis_url, timeout_s=1.0), namespace=namespace, ttl_s=60) for _ in range(2)]
    # Two workers' limiters, one client charging 1 point 30 times at once through each, 45 points an hour.
    workers = [RateLimiter(store) for store in stores]
    try:
        decisions = await asyncio.gather(*(w.charge("ip:198.51.100.4", 1, 45) for w in workers for _ in range(30)))
        assert sum(d.allowed for d in decisions) == 45
        refused = [d for d in decisions if not d.allowed]
        assert all(d.remaining == 0 and d.retry_after >= 1 for d in refused)
        # What Redis says afterwards agrees: nothing left, whichever worker asks.
        assert (await workers[0].charge("ip:198.51.100.4", 0, 45)).remaining == 0
        # Charges made together go to Redis together (each worker's first one alone, the rest in one call).
        assert all(store.metrics.calls <= 3 for store in stores), [s.metrics.calls for s in stores]
    finally:
        for limiter, store in zip(workers, stores, strict=True):
            await limiter.aclose()
            await store.aclose()


@contextlib.asynccontextmanager
async def limiters(redis_url: str, namespace: str, n: int) -> AsyncIterator[list[RateLimiter]]:
    """`n` workers' limiters sharing `namespace`, each with its own store."""
    stores = [CacheStore(create_redis(redis_url, timeout_s=1.0), namespace=namespace, ttl_s=60) for _ in range(n)]
    workers = [RateLimiter(store) for store in stores]
    try:
        yield workers
    finally:
        for limiter, store in zip(workers, stores, strict=True):
            await limiter.aclose()
            await store.aclose()


# Budgets below are small enough (an hour's points over a few hundred) that none refills while a test runs.


async def test_a_busy_client_spends_leased_points_without_a_round_trip_each_and_sees_exact_figures(
    redis_url: str, cache_namespace: str
) -> None:
    async with limiters(redis_url, f"{cache_namespace}-k{next(_ns)}", 2) as (worker, other):
        assert worker.store is not None
        # 700 points an hour: a charge of 1 point leases 7 more (a hundredth of the budget).
        decisions = [await worker.charge("key:site", 1, 700) for _ in range(36)]
        # The figures each charge shows are those of charging Redis every time.
        assert [(d.allowed, d.used, d.remaining) for d in decisions] == [(True, i, 700 - i) for i in range(1, 37)]
        # Round trips: the first charge (a client not charged lately gets no lease), the one that takes the lease;
        # then, each time half of it is spent, a request for more, which here (nothing waits between charges) leaves
        # with the charge that finds the lease empty.
        assert worker.store.metrics.calls == 8, worker.store.metrics.calls
        # Redis holds the lease's unspent points (at most 7) besides those spent: another worker sees no more than it
        # may spend.
        assert 700 - 36 - 7 <= (await other.charge("key:site", 0, 700)).remaining < 700 - 36
        await worker.aclose()  # what a stopping worker does: the unspent points go back
        assert (await other.charge("key:site", 0, 700)).remaining == 700 - 36


async def test_a_lease_is_topped_up_before_it_runs_out(redis_url: str, cache_namespace: str) -> None:
    """A client that keeps coming never waits for Redis after its first charge, and sees exact figures."""
    async with limiters(redis_url, f"{cache_namespace}-k{next(_ns)}", 1) as (worker,):
        assert (await worker.charge("key:busy", 1, 700)).used == 1
        assert (await worker.charge("key:busy", 1, 700)).used == 2  # a client back within a lease's life gets one
        for used in range(3, 40):
            decision = worker.charge_now("key:busy", 1, 700)  # None if it would have to wait for Redis
            assert decision is not None and (decision.used, decision.remaining) == (used, 700 - used)
            await asyncio.sleep(0.01)  # time for a top-up's round trip
        assert worker.store is not None and worker.store.metrics.calls < 39 // 3
    async with limiters(redis_url, f"{cache_namespace}-k{next(_ns) - 1}", 1) as (fresh,):
        assert (await fresh.charge("key:busy", 0, 700)).used == 39  # the lease went back when the worker stopped


async def test_a_client_not_charged_lately_gets_no_lease(redis_url: str, cache_namespace: str) -> None:
    """Most anonymous readers ask a page or two: a lease would expire unused and hold their points back meanwhile."""
    async with limiters(redis_url, f"{cache_namespace}-k{next(_ns)}", 2) as (worker, other):
        for i in range(20):
            assert (await worker.charge(f"ip:198.51.100.{i}", 1, 1000)).used == 1
            # Redis holds what was spent and no more: no lease was taken.
            assert (await other.charge(f"ip:198.51.100.{i}", 0, 1000)).used == 1


async def test_points_a_lease_did_not_spend_go_back_after_a_while(
    redis_url: str, cache_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ratelimit, "LEASE_S", 0.1)
    async with limiters(redis_url, f"{cache_namespace}-k{next(_ns)}", 2) as (worker, other):
        await worker.charge("ip:192.0.2.7", 0, 1000)  # seen lately: the next charge leases
        first = await worker.charge("ip:192.0.2.7", 2, 1000)
        assert (first.remaining, (await other.charge("ip:192.0.2.7", 0, 1000)).remaining) == (998, 998 - 10)
        await asyncio.sleep(0.5)
        assert (await other.charge("ip:192.0.2.7", 0, 1000)).remaining == 998
        # An expired lease is not spent: the next charge goes to Redis and shows what Redis holds.
        assert (await worker.charge("ip:192.0.2.7", 2, 1000)).remaining == 996
        # Round trips: the two first charges, the points given back, the last charge (no lease: not seen lately).
        assert worker.store is not None and worker.store.metrics.calls == 4


async def test_a_lease_taken_for_a_request_that_gave_up_goes_back(redis_url: str, cache_namespace: str) -> None:
    async with limiters(redis_url, f"{cache_namespace}-k{next(_ns)}", 2) as (worker, other):
        await worker.charge("ip:192.0.2.9", 0, 1000)  # seen lately: the next charge leases
        charge = asyncio.ensure_future(worker.charge("ip:192.0.2.9", 2, 1000))
        await asyncio.sleep(0)  # queued and sent
        charge.cancel()  # the client hung up while the lease was on its way
        with pytest.raises(asyncio.CancelledError):
            await charge
        await asyncio.sleep(0.1)
        # Its own 2 points stay spent, as without a lease; the 10 leased for it came back.
        assert (await other.charge("ip:192.0.2.9", 0, 1000)).remaining == 998


async def test_with_leases_workers_never_spend_more_than_the_budget(redis_url: str, cache_namespace: str) -> None:
    namespace = f"{cache_namespace}-k{next(_ns)}"
    decisions: list[Any] = []
    async with limiters(redis_url, namespace, 2) as workers:
        # 600 points an hour: leases of 6 points while a tenth of the budget would be left, none after.
        for _ in range(25):
            decisions += await asyncio.gather(*(w.charge("ip:198.51.100.8", 3, 600) for w in workers for _ in range(5)))
    allowed = sum(d.allowed for d in decisions)
    assert 3 * allowed <= 600
    assert 3 * allowed >= 600 - 2 * 6 - 3  # held back: at most one lease per worker
    # The workers stopped and gave their leases back: Redis holds exactly what was spent.
    async with limiters(redis_url, namespace, 1) as (fresh,):
        assert (await fresh.charge("ip:198.51.100.8", 0, 600)).used == 3 * allowed


async def test_budgets_hold_behind_a_path_prefix(seeded: Any, redis_url: str, cache_namespace: str) -> None:
    # Served as `uvicorn --root-path /api` behind a proxy that keeps the prefix: the paths carry it.
    application = create_app(
        settings_for(
            seeded.dsn, REDIS_URL=redis_url, cache_namespace=f"{cache_namespace}-k{next(_ns)}", anon_points_per_hour=1
        ),
        query_logger=StatementCounter(),
    )
    async with application.router.lifespan_context(application) as state:

        async def with_state(scope: Any, receive: Any, send: Any) -> None:
            await application({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=with_state, root_path="/api")
        async with httpx.AsyncClient(transport=transport, base_url="http://wovepaper.test") as client:
            first = await client.post("/api/graphql", json=TYPENAME)
            assert first.status_code == 200 and first.headers["x-ratelimit-remaining"] == "0"
            refused = await client.post("/api/graphql", json=TYPENAME)
            assert refused.status_code == 429
