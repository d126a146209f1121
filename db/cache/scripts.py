"""Lua scripts run by their hash, many in one pipeline, on one server or a Cluster alike.

Each call's keys share one hash tag (db/cache/keys.py), so on a Cluster each goes whole to the node that holds
them (following MOVED and ASK while a slot moves) and a pipeline of them is split by node. A server that does not
know a script (restarted, a replica just promoted, SCRIPT FLUSH) is sent it once and the calls that missed it again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field

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

    async def run_many(self, redis: RedisClient, calls: Sequence[Call]) -> list[object]:
        """Each call's result, in order; raises the first error a call ended with."""
        if not calls:
            return []
        results: list[object] = [None] * len(calls)
        todo = list(range(len(calls)))
        for attempt in range(2):
            pipe = redis.pipeline(transaction=False)
            for i in todo:
                keys, args = calls[i]
                pipe.evalsha(self.sha, len(keys), *keys, *args)
            got: list[object] = await pipe.execute(raise_on_error=False)
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
