"""Where Redis is, as settings/ reads it from the environment and db/cache/client.py connects to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Topology = Literal["single", "sentinel", "cluster"]


@dataclass(frozen=True, slots=True)
class RedisTarget:
    """Where Redis is. `url`: the server (single), any node (cluster), or with sentinels what is not an address:
    `rediss://` for TLS, the user and password, the database (its host is not used)."""

    url: str | None = None
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str | None = None
    sentinel_password: str | None = None
    cluster: bool = False

    @property
    def topology(self) -> Topology:
        if self.cluster:
            return "cluster"
        return "sentinel" if self.sentinels else "single"


def parse_sentinels(spec: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (an IPv6 host in brackets); ValueError naming what is wrong."""
    found = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host.removeprefix("[").removesuffix("]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port")
        found.append((host, int(port)))
    if not found:
        raise ValueError("no sentinel given")
    return tuple(found)
