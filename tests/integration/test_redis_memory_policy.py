"""Redis's memory must be bounded by eviction: the check names what is missing, copes with a Redis that refuses
CONFIG, and `wovepaper serve` logs what it finds once when it starts."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

import localservers
from db.cache.client import create_redis
from db.cache.memory_policy import RECOMMENDED_POLICY, memory_policy_warning
from tests.server_process import server_process, wovepaper_command


@pytest.fixture
def server(tmp_path: Path) -> Iterator[localservers.LocalRedis]:
    """A Redis of the test's own: its settings are changed, which no other test may see."""
    srv = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    yield srv
    srv.stop()


@pytest.fixture
async def client(server: localservers.LocalRedis) -> AsyncIterator[aioredis.Redis]:
    redis = create_redis(server.url, timeout_s=2)
    yield redis
    await redis.aclose()


async def test_an_unbounded_or_non_evicting_redis_is_named_and_an_evicting_one_passes(client: aioredis.Redis) -> None:
    await client.config_set("maxmemory", "0")
    await client.config_set("maxmemory-policy", "noeviction")
    both = await memory_policy_warning(client)
    assert both is not None and "no `maxmemory`" in both and "noeviction" in both and RECOMMENDED_POLICY in both
    await client.config_set("maxmemory", "64mb")
    policy = await memory_policy_warning(client)
    assert policy is not None and "noeviction" in policy and "no `maxmemory`" not in policy
    await client.config_set("maxmemory-policy", "volatile-lru")
    assert await memory_policy_warning(client) is None
    await client.config_set("maxmemory", "0")
    size = await memory_policy_warning(client)
    assert size is not None and "no `maxmemory`" in size and "refuses writes" not in size
    await client.config_set("maxmemory", "64mb")
    await client.config_set("maxmemory-policy", RECOMMENDED_POLICY)
    assert await memory_policy_warning(client) is None


async def test_a_redis_that_refuses_config_or_does_not_answer_is_reported_not_raised(
    server: localservers.LocalRedis, client: aioredis.Redis
) -> None:
    # A managed Redis's users commonly lack CONFIG: an ACL user allowed everything else.
    await client.execute_command("ACL", "SETUSER", "app", "on", ">secret-password", "~*", "&*", "+@all", "-config")
    host_port = server.url.removeprefix("redis://")
    limited = create_redis(f"redis://app:secret-password@{host_port}", timeout_s=2)
    try:
        assert await limited.ping()
        refused = await memory_policy_warning(limited)
    finally:
        await limited.aclose()
    assert refused is not None and "could not be checked" in refused and RECOMMENDED_POLICY in refused
    server.stop()
    gone = await memory_policy_warning(client)
    assert gone is not None and "could not be checked" in gone


def test_serve_logs_the_warning_once_when_it_starts(
    server: localservers.LocalRedis, database_url: str, cache_namespace: str, tmp_path: Path
) -> None:
    async def unbounded() -> None:
        redis = create_redis(server.url, timeout_s=2)
        try:
            await redis.config_set("maxmemory", "0")
        finally:
            await redis.aclose()

    asyncio.run(unbounded())
    env = {k: v for k, v in os.environ.items() if not k.startswith("WOVEPAPER_")}
    env |= {
        "DATABASE_URL": database_url,
        "REDIS_URL": server.url,
        "WOVEPAPER_CACHE_NAMESPACE": cache_namespace,
        "WOVEPAPER_SEMANTIC_PRELOAD": "false",
        "WOVEPAPER_LOG_FORMAT": "text",
    }
    log = tmp_path / "serve.log"
    with server_process([*wovepaper_command(), "serve", "--workers", "2"], env, log):
        pass
    assert log.read_text().count("no `maxmemory`") == 1, log.read_text()
