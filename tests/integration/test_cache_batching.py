"""One request that fans out over hundreds of aggregates sends a bounded number of Redis calls, batched, and
never trips the breaker on its own (it used to exhaust redis-py's pool: MaxConnectionsError, breaker open)."""

from __future__ import annotations

import localservers
from db.cache.breaker import BreakerState
from db.cache.store import CacheStore
from tests.integration.inprocess import served

FAN_OUT = """
query FanOut {
  a: researchers(first: 100) { nodes { id network(depth: 1, limit: 2) { nodes { depth weight } } } }
  b: researchers(first: 100, page: 2) { nodes { id network(depth: 1, limit: 2) { nodes { depth weight } } } }
}
"""


async def test_a_fan_out_request_batches_its_redis_calls(demo_database_url, cache_namespace, tmp_path) -> None:
    redis = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    try:
        async with served(
            demo_database_url,
            redis.url,
            cache_namespace=f"{cache_namespace}-fan",
            redis_max_connections=4,
            operation_timeout_s=60,
            statement_timeout_ms=30_000,
        ) as (client, state):
            store: CacheStore = state["cache"]
            for attempt in ("cold", "warm"):
                calls = store.metrics.calls
                response = await client.post("/graphql", json={"query": FAN_OUT})
                body = response.json()
                assert response.status_code == 200 and "errors" not in body, body
                networks = len(body["data"]["a"]["nodes"]) + len(body["data"]["b"]["nodes"])
                assert networks == 200
                sent = store.metrics.calls - calls
                # Reads of all 200 go out in one MGET; stores in pipelines as computations finish, and with
                # at most three connections a request they finish a few at a time: one call per network or
                # more (a read and a store each, 400, before batching) would exhaust the Redis pool.
                bound = networks / 2 if attempt == "cold" else 5
                assert sent < bound, (attempt, sent)
            assert store.metrics.errors == 0 and store.metrics.saturated == 0
            assert store.breaker.state is BreakerState.CLOSED and store.breaker.opens == 0
            assert store.peak_in_flight <= store.max_in_flight
            assert store.metrics.hits >= networks  # the second request was answered from the cache
    finally:
        redis.stop()
