"""Whether Redis bounds its memory by eviction: `memory_policy_warning(redis)`, logged by `wovepaper serve` when it
starts, for any command that checks a deployment (a `check` command) to call as well.

Everything the API and the ingest keep in Redis expires (caches, rate-limit states, persisted documents), but a
flood of distinct requests can fill it faster than keys expire. Only Redis's `maxmemory` bounds that, and only a
policy that evicts keeps Redis writable once it is reached: under `noeviction` (Redis's default) writes fail with
OOM errors, and every cache, budget and registration falls back as if Redis were down.
"""

from __future__ import annotations

from typing import Final

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from db.cache.client import RedisClient

# What docs/operating.md recommends ("Redis memory"): every key the project writes has a time to live, but a Redis
# shared with keys that do not would fill with them under a `volatile-*` policy.
RECOMMENDED_POLICY: Final = "allkeys-lru"
# Policies that evict keys once `maxmemory` is reached (everything but `noeviction`).
EVICTING: Final = frozenset(
    {
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    }
)
ADVICE: Final = f'set `maxmemory` and `maxmemory-policy {RECOMMENDED_POLICY}` (docs/operating.md, "Redis memory")'


async def memory_policy_warning(redis: RedisClient) -> str | None:
    """One line for an operator when Redis's memory is not bounded by eviction, None when it is. A server that
    refuses CONFIG (a managed Redis, an ACL without `+config`) or does not answer is not an error: the line says
    that it could not be checked. Takes as long as the client's timeouts allow."""
    try:
        if isinstance(redis, RedisCluster):
            config = await redis.config_get("maxmemory*", target_nodes=RedisCluster.PRIMARIES)
        else:
            config = await redis.config_get("maxmemory*")
    except RedisError as exc:
        why = f"{type(exc).__name__}: {str(exc)[:120]}"
        return f"Redis's memory policy could not be checked ({why}); make sure to {ADVICE}."
    # A Cluster answers per node (the node's name to its settings); each primary must bound its memory.
    answers = list(config.values()) if config and all(isinstance(v, dict) for v in config.values()) else [config]
    found = [_problems(answer) for answer in answers]
    if any(problems is None for problems in found):
        return f"Redis did not report its memory settings; make sure to {ADVICE}."
    problems = sorted({p for node in found for p in node or ()})
    if not problems:
        return None
    return f"Redis has {' and '.join(problems)}; {ADVICE}."


def _problems(config: object) -> list[str] | None:
    """What is wrong with one server's memory settings; None when it did not report them."""
    # Names and values are text or bytes, as the client decodes replies or not.
    settings = {_text(name): _text(value) for name, value in dict(config).items()}  # type: ignore[call-overload]
    maxmemory, policy = settings.get("maxmemory"), settings.get("maxmemory-policy")
    if maxmemory is None or policy is None:
        return None
    problems = []
    if maxmemory in ("0", ""):
        problems.append("no `maxmemory`: it grows until the host runs out of memory")
    if policy not in EVICTING:
        problems.append(f"`maxmemory-policy {policy}`: once full it refuses writes instead of evicting")
    return problems


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return value if isinstance(value, str) else None
