"""The Redis the API and the ingest talk to, as the deployment runs it: one server (`REDIS_URL`), a primary followed
through failovers by Sentinel (`WOVEPAPER_REDIS_SENTINELS`, `WOVEPAPER_REDIS_SENTINEL_MASTER`), or a Redis Cluster
(`WOVEPAPER_REDIS_CLUSTER`, `REDIS_URL` naming any node). Every client is built here, with redis-py's own clients
for each, so every part of the application fails the same fast way: short timeouts, no client-side retries (a
failed call falls back to PostgreSQL, the breaker decides when to try again), a bounded pool. TLS (`rediss://`)
and passwords come from the URL in all three; Sentinels may have a password of their own.
"""

from __future__ import annotations

import time
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis
from redis.asyncio import BlockingConnectionPool
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelConnectionPool
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.crc import key_slot
from redis.exceptions import RedisClusterException, RedisError
from redis.retry import Retry as SyncRetry
from redis.sentinel import Sentinel as SyncSentinel

from settings.redis_target import RedisTarget

RedisClient = aioredis.Redis | RedisCluster
# What a Redis call may raise besides a timeout: a Cluster client's own failures (no node reachable, a slot no
# primary serves) are not RedisErrors.
REDIS_ERRORS: Final = (RedisError, RedisClusterException, OSError)

# Sentinels are asked for the primary on every new connection: they answer at once or not at all.
SENTINEL_TIMEOUT_S: Final = 0.5


def create_redis(target: RedisTarget | str, *, timeout_s: float, max_connections: int = 16) -> RedisClient:
    """A client that fails fast: short socket timeouts, no retries (the default retries cost seconds), and a
    bounded pool whose callers wait at most `timeout_s` for a connection instead of failing at once (on a Cluster,
    `max_connections` per node, and a caller finding them all busy does not wait). A Cluster client follows MOVED
    and ASK itself, and learns the new layout after a failover or a reshard."""
    if isinstance(target, str):
        target = RedisTarget(url=target)
    common: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s}
    if target.topology == "cluster":
        assert target.url is not None
        return RedisCluster.from_url(
            target.url,
            max_connections=max_connections,
            retry=Retry(NoBackoff(), 0),
            # While a failed primary's replica takes over, the slots it served answer nothing and the rest serve.
            require_full_coverage=False,
            **common,
        )
    if target.topology == "sentinel":
        assert target.sentinel_master is not None
        sentinel = Sentinel(
            list(target.sentinels),
            sentinel_kwargs=_sentinel_kwargs(target, timeout_s),
            **_server_kwargs(target.url),
        )
        client: RedisClient = sentinel.master_for(
            target.sentinel_master,
            redis_class=_SentinelRedis,
            connection_pool_class=_BlockingSentinelPool,
            max_connections=max_connections,
            timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
            retry_on_timeout=False,
            **common,
        )
        return client
    assert target.url is not None
    pool = BlockingConnectionPool.from_url(
        target.url,
        max_connections=max_connections,
        timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
        retry_on_timeout=False,
        **common,
    )
    # from_pool: closing the client closes its pool too.
    return aioredis.Redis.from_pool(pool)


class _BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """Connections to the primary Sentinel names (asked again on each new connection, so a failover is followed),
    whose callers wait at most the pool's timeout for one, as with one server."""


class _SentinelRedis(aioredis.Redis):
    """The primary's client; closing it closes its connections to the Sentinels too."""

    async def aclose(self, close_connection_pool: bool | None = None) -> None:
        pool = self.connection_pool
        await super().aclose(close_connection_pool)
        if isinstance(pool, SentinelConnectionPool):
            await pool.sentinel_manager.aclose()


def is_cluster(client: object) -> bool:
    return isinstance(client, RedisCluster)


def replicated(client: object) -> bool:
    """Whether the client's Redis has replicas that may take over (Sentinel, Cluster): writes that must survive a
    failover wait for one (WAIT)."""
    return isinstance(client, RedisCluster | _SentinelRedis)


def slot(key: str) -> int:
    """The Cluster slot of `key` (by its hash tag, db/cache/keys.py)."""
    return key_slot(key.encode())


async def channel_node(client: RedisCluster, channel: str) -> tuple[str, int]:
    """The primary that serves a shard channel now: asked through the client, so a layout it has not learned yet
    (a failover, a slot moved) is learned first."""
    await client.exists(channel)  # routed by the channel's slot: a MOVED here updates the client's layout
    node = client.get_node_from_key(channel)
    if node is None:
        raise redis.ConnectionError(f"no node serves {channel}")
    return str(node.host), int(node.port)


def subscribe(
    target: RedisTarget, channel: str, *, timeout_s: float, client_name: str, node: tuple[str, int] | None = None
) -> tuple[redis.Redis, PubSub, Any]:
    """A blocking client subscribed to `channel` (run it in a thread), confirmed, with the sentinel manager to close
    with it (or None): on the server, on the primary Sentinel names now, or on a Cluster the shard channel
    (SSUBSCRIBE) on `node`, the primary of its slot. Raises on any failure."""
    common: dict[str, Any] = {
        "socket_timeout": timeout_s,
        "socket_connect_timeout": timeout_s,
        "retry": SyncRetry(NoBackoff(), 0),
        "client_name": client_name,
    }
    manager: Any = None
    if target.topology == "sentinel":
        assert target.sentinel_master is not None
        manager = SyncSentinel(
            list(target.sentinels), sentinel_kwargs=_sentinel_kwargs(target, timeout_s), **_server_kwargs(target.url)
        )
        client: redis.Redis = manager.master_for(target.sentinel_master, **common)
    else:
        assert target.url is not None
        url = _with_address(target.url, node) if node is not None else target.url
        client = redis.Redis.from_url(url, **common)
    pubsub: PubSub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]  # typed in newer redis-py
    sharded = target.topology == "cluster"
    try:
        if sharded:
            pubsub.ssubscribe(channel)
        else:
            pubsub.subscribe(channel)
        deadline = time.monotonic() + timeout_s * 4
        while time.monotonic() < deadline:
            message = pubsub.get_message(timeout=timeout_s)
            if message is not None and message["type"] in ("subscribe", "ssubscribe"):
                return client, pubsub, manager
        raise TimeoutError("no subscription confirmation")
    except BaseException:
        close_quietly(pubsub, client, manager)
        raise


def close_quietly(pubsub: PubSub | None, client: redis.Redis | None, manager: Any) -> None:
    for closing in (pubsub, client, *(getattr(manager, "sentinels", None) or ())):
        if closing is None:
            continue
        try:
            closing.close()
        except REDIS_ERRORS:
            pass


def _server_kwargs(url: str | None) -> dict[str, Any]:
    """What a URL says besides where: TLS, user, password, database, TLS options (Sentinel finds the address)."""
    if not url:
        return {}
    kwargs: dict[str, Any] = redis.connection.parse_url(url)  # type: ignore[no-untyped-call]
    for name in ("host", "port", "path", "connection_class"):
        kwargs.pop(name, None)
    if urlsplit(url).scheme.lower() == "rediss":
        kwargs["ssl"] = True
    return kwargs


def _sentinel_kwargs(target: RedisTarget, timeout_s: float) -> dict[str, Any]:
    """How the Sentinels themselves are spoken to: TLS as the primary, their own password if any."""
    kwargs: dict[str, Any] = {
        "socket_timeout": min(timeout_s, SENTINEL_TIMEOUT_S),
        "socket_connect_timeout": min(timeout_s, SENTINEL_TIMEOUT_S),
    }
    server = _server_kwargs(target.url)
    for name, value in server.items():
        if name == "ssl" or name.startswith("ssl_"):
            kwargs[name] = value
    if target.sentinel_password:
        kwargs["password"] = target.sentinel_password
    return kwargs


def _with_address(url: str, node: tuple[str, int]) -> str:
    """`url` pointing at `node` instead, its scheme, credentials, database and options kept."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    host = f"[{node[0]}]" if ":" in node[0] else node[0]
    netloc = f"{userinfo}@{host}:{node[1]}" if userinfo else f"{host}:{node[1]}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
