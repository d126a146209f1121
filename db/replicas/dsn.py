"""A replica's DSN as WOVEPAPER_DATABASE_REPLICA_URLS gives it: checked, and named without its password."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

SCHEMES = ("postgresql", "postgres")
DEFAULT_PORT = 5432


class BadDsn(ValueError):
    """A DSN that does not parse; the message never repeats it (it may hold a password)."""


@dataclass(frozen=True, slots=True)
class ReplicaDsn:
    dsn: str
    # host:port/dbname (every host of a multi-host DSN): the `replica` label of the metrics and the name in logs.
    label: str


def parse_replica_dsn(dsn: str) -> ReplicaDsn:
    """The DSN with its label; BadDsn when it is not a PostgreSQL URL naming a host."""
    try:
        parts = urlsplit(dsn)
    except ValueError as exc:
        raise BadDsn(f"not a URL ({exc})") from None
    if parts.scheme not in SCHEMES:
        raise BadDsn("must start with postgresql://")
    query = parse_qs(parts.query)
    authority = parts.netloc.rpartition("@")[2]
    hosts = [h for h in authority.split(",") if h] or [h for v in query.get("host", []) for h in v.split(",") if h]
    if not hosts:
        raise BadDsn("names no host")
    named: list[str] = []
    for host in hosts:
        name, port = _host_port(unquote(host))
        if "port" in query and ":" not in host.rpartition("]")[2]:
            port = _port(query["port"][0])
        named.append(f"{name}:{port}")
    user = unquote(parts.netloc.rpartition("@")[0].partition(":")[0]) if "@" in parts.netloc else ""
    database = unquote(parts.path.lstrip("/")) or (query.get("dbname") or [""])[0] or user or "postgres"
    return ReplicaDsn(dsn, f"{','.join(named)}/{database}")


def _host_port(host: str) -> tuple[str, int]:
    if host.startswith("["):  # [::1]:5433
        name, _, rest = host[1:].partition("]")
        return name, _port(rest.removeprefix(":")) if rest else DEFAULT_PORT
    name, colon, port = host.partition(":")
    if not name:
        raise BadDsn("names no host")
    return name, _port(port) if colon else DEFAULT_PORT


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise BadDsn(f"port {text[:10]!r} is not a port number")
    return int(text)
