"""API keys (`X-Api-Key`): making one, and checking one at the cost of no SQL per request.

A key is `wpk_<8 hex>_<43 url-safe characters>`; its first 12 characters are its prefix, which names it
in `wovepaper keys list` and `revoke`; only its sha256 is stored. Each process remembers a key's
answer for CHECK_TTL_S (a revocation reaches every worker within that), then asks PostgreSQL again (by the unique
index on the sha256), which records the key's last use; concurrent requests with one key share that one look-up.
Unknown keys are remembered apart from the keys in use, each store bounded in bytes, so a flood of made-up keys
never pushes out a partner's.

A failed authentication (a malformed, unknown or revoked key) costs the client address FAILED_KEY_POINTS of its
budget of failed authentications (edge/ratelimit.py; apart from its anonymous budget). A look-up is paid for before
it runs and given back when the key is good, so an address whose budget is spent is refused (429) without one.
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
from edge.gcra import rate_limited
from edge.ratelimit import RateCharge
from edge.request import header
from request_types.identity import ApiKey
from request_types.state import found_state

CHECK_TTL_S: Final = 10.0
# Bytes each process spends remembering keys: the answers for keys in use, and apart from them unknown keys. What one
# entry takes (measured with tracemalloc: 164 bytes for an unknown key, 517 for a known one with short texts),
# rounded up; a known key's texts are counted on top.
KNOWN_BYTES: Final = 4 * 1024 * 1024
UNKNOWN_BYTES = 1024 * 1024
KNOWN_ENTRY_BYTES: Final = 600
UNKNOWN_ENTRY_BYTES: Final = 200
# What a failed authentication costs the client address, out of WOVEPAPER_FAILED_AUTH_PER_HOUR.
FAILED_KEY_POINTS: Final = 1
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


class _Remembered:
    """Answers by key digest until they expire, the least recently used forgotten past `max_bytes`."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: OrderedDict[bytes, tuple[float, ApiKeyRow | None, int]] = OrderedDict()

    def get(self, digest: bytes, now: float) -> tuple[ApiKeyRow | None] | None:
        """(the answer,) while remembered, else None."""
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if entry[0] <= now:
            self._drop(digest)
            return None
        self._entries.move_to_end(digest)
        return (entry[1],)

    def put(self, digest: bytes, row: ApiKeyRow | None, expires: float, size: int) -> None:
        if digest in self._entries:
            self._drop(digest)
        self._entries[digest] = (expires, row, size)
        self.bytes += size
        while self.bytes > self.max_bytes and self._entries:
            self._drop(next(iter(self._entries)))

    def _drop(self, digest: bytes) -> None:
        self.bytes -= self._entries.pop(digest)[2]


def _size(row: ApiKeyRow) -> int:
    return KNOWN_ENTRY_BYTES + len(row.name) + len(row.prefix or "") + sum(len(o) + 64 for o in row.allowed_origins)


class ApiKeyAuthenticator:
    """The `key_authenticator` of edge/identity.py; reads the pool from the lifespan state."""

    def __init__(self, *, ttl_s: float = CHECK_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self._known = _Remembered(KNOWN_BYTES)
        self._unknown = _Remembered(UNKNOWN_BYTES)
        self._inflight: dict[bytes, asyncio.Future[ApiKeyRow | None]] = {}

    async def __call__(self, scope: Scope, key: str) -> ApiKey:
        key = key.strip()
        if not KEY_FORMAT.match(key):
            await _charge_failure(scope)
            raise _refused()
        digest = key_hash(key)
        now = self.clock()
        if self._unknown.get(digest, now) is not None:
            await _charge_failure(scope)
            raise _refused()
        known = self._known.get(digest, now)
        row = known[0] if known is not None else await self._paid_look_up(scope, digest)
        if row is None:
            raise _refused()
        raw_origin = header(scope, b"origin")
        origin = raw_origin.decode("latin-1") if raw_origin is not None else None
        if row.allowed_origins and origin is not None and origin.rstrip("/") not in row.allowed_origins:
            raise EdgeError(403, "FORBIDDEN_ORIGIN", f"This API key may not be used from {origin[:100]}.")
        # 0 points per hour: the key has no budget of its own and takes WOVEPAPER_KEY_POINTS_PER_HOUR.
        return ApiKey(row.id, row.name, row.prefix or "", row.points_per_hour or 0)

    def remembered_bytes(self) -> int:
        """What the remembered answers take, by the measure that bounds them."""
        return self._known.bytes + self._unknown.bytes

    async def _paid_look_up(self, scope: Scope, digest: bytes) -> ApiKeyRow | None:
        """The key's row, the look-up paid for by the client address first (refused, 429, when its budget is spent)
        and given back when the key is good."""
        charge = await _charge_failure(scope)
        row = await self._row(scope, digest)
        if row is not None and charge is not None:
            charge.give_back(FAILED_KEY_POINTS)
        return row

    async def _row(self, scope: Scope, digest: bytes) -> ApiKeyRow | None:
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
        expires = self.clock() + self.ttl_s
        if row is None:
            self._unknown.put(digest, None, expires, UNKNOWN_ENTRY_BYTES)
        else:
            self._known.put(digest, row, expires, _size(row))
        return row


async def _charge_failure(scope: Scope) -> RateCharge | None:
    """Charges a failed authentication (or a look-up, until it succeeds) to the client address's points for them;
    raises the 429 when they refuse it. The charge, when there is one to make."""
    state = found_state(scope)
    charge = state.address_charge if state is not None else None
    if not isinstance(charge, RateCharge):
        return None
    decision = await charge.charge(FAILED_KEY_POINTS)
    if not decision.allowed:
        raise rate_limited(decision)
    return charge
