"""API keys (`X-Api-Key`): making one, and checking one at the cost of no SQL per request.

A key is `wpk_<8 hex>_<43 url-safe characters>`; its first 12 characters are its prefix, which names it
in `wovepaper keys list` and `revoke`; only its sha256 is stored. Each process remembers a key's
answer for CHECK_TTL_S (a revocation reaches every worker within that), then asks PostgreSQL again,
which records the key's last use; concurrent requests with one key share that one look-up.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import asyncpg
from starlette.types import Scope

from db.pool import PoolExhausted
from db.queries.api_keys import ApiKeyRow, use_api_key
from edge.errors import EdgeError
from edge.identity import ApiKey
from edge.request import header

CHECK_TTL_S: Final = 10.0
MAX_REMEMBERED: Final = 10_000
KEY_FORMAT = re.compile(r"^wpk_[0-9a-f]{8}_[A-Za-z0-9_-]{43}$")
PREFIX_LENGTH: Final = 12


@dataclass(frozen=True, slots=True)
class NewKey:
    key: str
    prefix: str
    key_hash: bytes


def new_key() -> NewKey:
    key = f"wpk_{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"
    return NewKey(key, key[:PREFIX_LENGTH], key_hash(key))


def key_hash(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def _overloaded() -> EdgeError:
    return EdgeError(503, "OVERLOADED", "The service is overloaded; retry shortly.", headers={"retry-after": "1"})


def _refused() -> EdgeError:
    return EdgeError(401, "UNAUTHENTICATED", "Unknown or revoked API key.")


class ApiKeyAuthenticator:
    """The `key_authenticator` of edge/identity.py; reads the pool from the lifespan state."""

    def __init__(self, *, ttl_s: float = CHECK_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._known: OrderedDict[bytes, tuple[float, ApiKeyRow | None]] = OrderedDict()
        self._inflight: dict[bytes, asyncio.Future[ApiKeyRow | None]] = {}

    async def __call__(self, scope: Scope, key: str) -> ApiKey:
        key = key.strip()
        if not KEY_FORMAT.match(key):
            raise _refused()
        row = await self._row(scope, key_hash(key))
        if row is None:
            raise _refused()
        raw_origin = header(scope, b"origin")
        origin = raw_origin.decode("latin-1") if raw_origin is not None else None
        if row.allowed_origins and origin is not None and origin.rstrip("/") not in row.allowed_origins:
            raise EdgeError(403, "FORBIDDEN_ORIGIN", f"This API key may not be used from {origin[:100]}.")
        # 0 points per hour: the key has no budget of its own and takes WOVEPAPER_KEY_POINTS_PER_HOUR.
        return ApiKey(row.id, row.name, row.prefix or "", row.points_per_hour or 0)

    async def _row(self, scope: Scope, digest: bytes) -> ApiKeyRow | None:
        now = self.clock()
        known = self._known.get(digest)
        if known is not None and known[0] > now:
            return known[1]
        flight = self._inflight.get(digest)
        if flight is not None:
            return await asyncio.shield(flight)
        flight = asyncio.get_running_loop().create_future()
        self._inflight[digest] = flight
        try:
            pool: asyncpg.Pool = scope["state"]["pool"]
            async with pool.acquire() as conn:
                row = await use_api_key(conn, key_hash=digest)
        except PoolExhausted:
            flight.set_exception(_overloaded())
            flight.exception()
            raise _overloaded() from None
        except BaseException as exc:
            flight.set_exception(exc)
            flight.exception()  # retrieved: a failure nobody else awaited is not logged twice
            raise
        finally:
            del self._inflight[digest]
        flight.set_result(row)
        self._known[digest] = (now + self.ttl_s, row)
        self._known.move_to_end(digest)
        while len(self._known) > MAX_REMEMBERED:
            self._known.popitem(last=False)
        return row
