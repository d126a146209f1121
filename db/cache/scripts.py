"""Lua scripts run by their hash, many in one pipeline, on one server or a Cluster alike.

Each call's keys share one hash tag (db/cache/keys.py), so on a Cluster each goes whole to the node that holds
them (following MOVED and ASK while a slot moves) and a pipeline of them is split by node. A server that does not
know a script (restarted, a replica just promoted, SCRIPT FLUSH) is sent it once and the calls that missed it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError

RedisClient = Redis | RedisCluster
Call = tuple[Sequence[str], Sequence[bytes | str | int | float]]


@dataclass(frozen=True, slots=True)
class Script:
    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())

    async def run(self, redis: RedisClient, keys: Sequence[str], args: Sequence[bytes | str | int | float]) -> object:
        return (await self.run_many(redis, [(keys, args)]))[0]

    async def run_many(self, redis: RedisClient, calls: Sequence[Call], *, replicated_ms: int = 0) -> list[object]:
        """Each call's result, in order; raises the first error a call ended with. `replicated_ms`: then wait (WAIT,
        on each server written to, at most that long) until a replica has the writes, so that a failover right after
        does not undo them; a primary without a replica answers after that long, and that is all."""
        if not calls:
            return []
        results: list[object] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in range(2):
            pipe = redis.pipeline(transaction=False)
            for i in todo:
                keys, args = calls[i]
                pipe.evalsha(self.sha, len(keys), *keys, *args)
            if replicated_ms:
                await _wait_for_replicas(redis, pipe, [calls[i][0][0] for i in todo], replicated_ms)
            got: list[object] = (await pipe.execute(raise_on_error=False))[: len(todo)]
            missed = []
            for i, result in zip(todo, got, strict=True):
                if isinstance(result, NoScriptError) and not attempt:
                    missed.append(i)
                else:
                    results[i] = result
            if not missed:
                break
            # On a Cluster, SCRIPT LOAD goes to every primary.
            await redis.script_load(self.source)
            todo = missed
        for result in results:
            if isinstance(result, Exception):
                raise result
        return results


async def _wait_for_replicas(redis: RedisClient, pipe: Any, first_keys: Sequence[str], timeout_ms: int) -> None:
    """WAIT 1 on the connection each server's writes of `pipe` go over: one pipeline is one connection per server."""
    if isinstance(redis, RedisCluster):
        await redis.initialize()  # the layout, to know which servers the writes go to (once per client)
        nodes = {}
        for key in first_keys:
            node = redis.get_node_from_key(key)
            if node is not None:
                nodes[node.name] = node
        for node in nodes.values():
            pipe.execute_command("WAIT", 1, timeout_ms, target_nodes=node)
    else:
        pipe.execute_command("WAIT", 1, timeout_ms)
