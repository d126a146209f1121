"""One request cannot take the whole PostgreSQL pool; a pool too busy answers OVERLOADED (503) instead of an
endless wait, and /readyz does not call a busy database down."""

from __future__ import annotations

import asyncio

import pytest

from db.pool import PoolExhausted, connection_budget, create_pool
from tests.integration.agg_data import handmade_database
from tests.integration.inprocess import served

FAN_OUT = """
query FanOut {
  a: researchers(first: 5) { nodes { id network(depth: 1, limit: 2) { nodes { depth } } } }
  b: researchers(first: 5) { nodes { id coauthors(first: 2) { sharedPapers } } }
}
"""


@pytest.fixture(scope="module")
async def limits_db(make_database) -> tuple[str, dict[str, int]]:
    return await handmade_database(make_database, "limits")


async def test_a_request_holds_at_most_its_share_of_connections(limits_db) -> None:
    async with served(limits_db[0], pool_max_size=6, pool_max_per_request=2) as (client, state):
        pool = state["pool"]
        peak = 0
        done = asyncio.Event()

        async def watch() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, pool.in_use)
                await asyncio.sleep(0)

        watcher = asyncio.create_task(watch())
        try:
            response = await client.post("/graphql", json={"query": FAN_OUT})
        finally:
            done.set()
            await watcher
        body = response.json()
        assert response.status_code == 200 and "errors" not in body, body
        assert len(body["data"]["a"]["nodes"]) == 5
        assert 1 <= peak <= 2


async def test_nested_acquires_of_one_task_do_not_wait_for_themselves(limits_db) -> None:
    pool = await create_pool(limits_db[0], min_size=1, max_size=4, acquire_timeout_s=5)
    try:
        with connection_budget(1):
            async with pool.acquire() as outer, pool.acquire() as inner:
                assert await outer.fetchval("SELECT 1") == await inner.fetchval("SELECT 1") == 1
    finally:
        await pool.close()


async def test_the_budget_queues_a_requests_own_reads(limits_db) -> None:
    pool = await create_pool(limits_db[0], min_size=1, max_size=6, acquire_timeout_s=5)
    held = 0
    peak = 0
    gate = asyncio.Event()

    async def one() -> None:
        nonlocal held, peak
        async with pool.acquire() as conn:
            held += 1
            peak = max(peak, held)
            await gate.wait()
            await conn.fetchval("SELECT 1")
            held -= 1

    try:
        with connection_budget(2):
            tasks = [asyncio.create_task(one()) for _ in range(5)]
            for _ in range(50):
                await asyncio.sleep(0.01)
            assert held == 2  # the other three wait for the request's own connections
            gate.set()
            await asyncio.gather(*tasks)
        assert peak == 2
    finally:
        await pool.close()


async def test_no_free_connection_answers_overloaded_and_readyz_stays_up(limits_db) -> None:
    async with served(limits_db[0], pool_min_size=1, pool_max_size=1, pool_acquire_timeout_s=0.2) as (client, state):
        pool = state["pool"]
        taken = await pool.acquire()  # someone else holds the only connection
        try:
            response = await client.post("/graphql", json={"query": "{ researchers(first: 1) { nodes { id } } }"})
            assert response.status_code == 503
            assert response.headers["retry-after"] == "1"
            errors = response.json()["errors"]
            assert {e["extensions"]["code"] for e in errors} == {"OVERLOADED"}
            assert all(e["extensions"]["requestId"] == response.headers["x-request-id"] for e in errors)
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.json()  # busy is not down
            assert ready.json()["checks"]["postgres"] == "ok"
        finally:
            await pool.release(taken)
        again = await client.post("/graphql", json={"query": "{ researchers(first: 1) { nodes { id } } }"})
        assert again.status_code == 200 and "errors" not in again.json()


async def test_acquire_times_out_rather_than_waiting_forever(limits_db) -> None:
    pool = await create_pool(limits_db[0], min_size=1, max_size=1, acquire_timeout_s=0.1)
    try:
        async with pool.acquire():
            with pytest.raises(PoolExhausted):
                async with pool.acquire():
                    pass
        assert pool.waiting == 0 and pool.in_use == 0
    finally:
        await pool.close()


async def test_the_pool_gauges_follow_a_burst_without_a_write_per_statement(limits_db, monkeypatch) -> None:
    """A page's statements acquire and release a connection each: the gauges are set at most every
    REPORT_EVERY_S during a burst, and the last figures always land."""
    from db import pool as pool_module
    from telemetry.metrics import POOL_CONNECTIONS

    pool = await create_pool(limits_db[0], min_size=1, max_size=4, acquire_timeout_s=5)
    reports = 0
    report = pool_module.ServingPool.report

    def counted(self: pool_module.ServingPool) -> None:
        nonlocal reports
        reports += 1
        report(self)

    monkeypatch.setattr(pool_module.ServingPool, "report", counted)
    try:
        conn = await pool.acquire()
        for _ in range(200):
            async with pool.acquire() as other:
                await other.fetchval("SELECT 1")
        assert reports <= 3
        await asyncio.sleep(pool_module.REPORT_EVERY_S * 2)
        assert POOL_CONNECTIONS.labels("in_use")._value.get() == 1  # the connection still held
        await pool.release(conn)
        await asyncio.sleep(pool_module.REPORT_EVERY_S * 2)
        assert POOL_CONNECTIONS.labels("in_use")._value.get() == 0
    finally:
        await pool.close()
