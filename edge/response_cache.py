"""Whole responses of the site's operations, in Redis and at the CDN.

Redis: anonymous requests (no `Authorization`, `Cookie` or `X-Api-Key`) whose document is exactly one of
the site's cacheable operations are answered without running GraphQL. The key is the operation, its
document hash, the schema version and the values of its declared variables as GraphQL coerces them
(defaults filled in, ids in one spelling: `entity_keys.py`); a request GraphQL would refuse (undeclared
or malformed variables) is passed through and never stored. A response is stored only without errors,
with the cost it was charged and its tags: every paper, researcher and institution in it, the lists tag
for list operations, and for a lookup that found nothing the id it asked for, so the write that creates
that entity drops it. A response computed while any invalidation ran is not stored, nor one read from a replica
that had not replayed the latest invalidation of one of its tags (db/cache/positions.py).

Memory: each worker answers the entries it read or stored lately from its own memory before asking Redis
(edge/near.py), kept true across workers by the tags every invalidation publishes; the key of a request
is remembered by a digest of its variables as sent, so a repeated request is not coerced again, and by the
request's bytes (method, content type, query string, body), so the edge answers the same request again from memory
before it is parsed (`answer_remembered`): the same bytes pass the same steps to the same key. Both are bounded in
bytes and filled only once the request's answer was charged: a refused request (429, a variable GraphQL refuses)
leaves nothing, and an id longer than any id form is never keyed. An entry answers requests
for either media type (edge/media.py): the body is the same, the Content-Type (and a public answer's ETag) is the
request's, so `Accept` is in no key.

CDN: anonymous GET responses of persisted documents carry `Cache-Control: public`, a strong `ETag` (304
on `If-None-Match`) and the same tags in `Surrogate-Key` / `Cache-Tag`, so a CDN can hold them and purge
exactly what an ingest changed, and `Vary: Accept`. Requests with a key or a token get `Cache-Control: private,
no-store`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

import orjson
from graphql import (
    GraphQLSchema,
)
from graphql.execution.values import get_variable_values
from starlette.types import ASGIApp, Receive, Scope, Send

from bounded import BoundedCache
from db.cache import keys
from db.cache.positions import replayed_invalidations
from db.cache.store import CacheStore, Unavailable
from edge.answers import Answer, Header
from edge.cache_tags import CdnPolicy as CdnPolicy  # where the application finds it
from edge.cache_tags import graphql_response_etag, response_tags
from edge.cacheable import CacheableOperation
from edge.capture import Capture, with_headers
from edge.conditional import not_modified
from edge.entity_keys import MAX_LENGTH, entity_key
from edge.errors import EdgeError, send_error
from edge.identity import CREDENTIALS
from edge.media import GRAPHQL_RESPONSE, JSON
from edge.near import Held, NearResponses, strong_etag
from edge.ratelimit import RateCharge
from edge.request import header, headers_of, response_type
from request_types.graphql_request import GraphQLRequest
from request_types.identity import Identity
from request_types.state import RequestState, found_state, request_state
from telemetry.metrics import count_rejection

log = logging.getLogger(__name__)

# Requests carrying any of these may see viewer-specific data: never cached, never served from cache.
CREDENTIAL_HEADERS = CREDENTIALS | {b"cookie"}
PRIVATE = b"private, no-store"
JSON_CONTENT: Final = (b"content-type", JSON)
GRAPHQL_RESPONSE_CONTENT: Final = (b"content-type", GRAPHQL_RESPONSE)
X_CACHE_HIT: Final = (b"x-cache", b"hit")
X_CACHE_MISS: Final = (b"x-cache", b"miss")
# Entry keys remembered by the variables they were computed from (least recently used forgotten first).
KEY_MEMO_BYTES = 4 * 1024 * 1024
# A remembered key is charged its variables this many times (their text, and the values coerced from it) ...
KEY_MEMO_VARIABLE_FACTOR = 3
# ... and this much besides (the response key, the entry, the memo's own key).
KEY_MEMO_OVERHEAD = 400
# Bytes of requests whose entry key is remembered (forgotten all at once when full: a plain dict keeps the answer
# from memory cheap), what each costs beyond them, and the largest request remembered (the site's are about 2 KB).
REMEMBERED_BYTES = 8 * 1024 * 1024
REMEMBERED_OVERHEAD = 256
REMEMBERED_REQUEST_BYTES = 16 * 1024

# A request as the steps before the cache read it: method, Content-Type, query string, body.
RequestBytes = tuple[str, bytes, bytes, bytes]


def canonical_variables(variables: object) -> bytes:
    """Sorted keys, no whitespace: equal variables give equal bytes, whatever the client's order."""
    return orjson.dumps(variables if variables is not None else {}, option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True, slots=True)
class _Key:
    response_key: str
    operation: CacheableOperation
    coerced: Mapping[str, object]


@dataclass(frozen=True, slots=True)
class _Remembered:
    response_key: str
    operation: str
    public: bool


class _Memo(NamedTuple):
    """A key computed for a request, to remember once the request is charged: the memo's key and its size."""

    key: tuple[str, str | None, str, bytes]
    size: int


class Recalled(NamedTuple):
    """A request's entry, held in memory, and how the request was remembered."""

    remembered: _Remembered
    held: Held


def request_bytes(scope: Scope, body: bytes) -> RequestBytes:
    return (scope["method"], header(scope, b"content-type") or b"", scope.get("query_string", b""), body)


def shareable(scope: Scope, identity: object) -> bool:
    """An anonymous request without credentials: one whose answer is the same for every reader."""
    return isinstance(identity, Identity) and identity.anonymous and CREDENTIAL_HEADERS.isdisjoint(headers_of(scope))


class ResponseCache:
    """ASGI step in front of GraphQL; the store comes from the lifespan state (`cache`)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        operations: Iterable[CacheableOperation],
        schema: GraphQLSchema,
        schema_version: str,
        ttl_s: int,
        cdn: CdnPolicy,
    ) -> None:
        self.app = app
        self.by_document = {op.document: op for op in operations}
        self.schema = schema
        self.schema_version = schema_version
        self.ttl_s = ttl_s
        self.cdn = cdn
        self._keys: BoundedCache[tuple[str, str | None, str, bytes], _Key] = BoundedCache(KEY_MEMO_BYTES)
        self._remembered: dict[RequestBytes, _Remembered] = {}
        self._remembered_bytes = 0

    async def answer_remembered(self, scope: Scope, body: bytes, send: Send, answer: Answer) -> bool:
        """Answers a request whose bytes this cache has seen from an anonymous reader, when its entry is held in
        memory, before the request is parsed (through `answer`, or `send` for a refusal); False (nothing sent)
        otherwise. `body`: the request's body, read."""
        recalled = self.recall(scope, body)
        if recalled is None:
            return False
        await self.answer_charged(scope, recalled, send, answer)
        return True

    async def answer_charged(self, scope: Scope, recalled: Recalled, send: Send, answer: Answer) -> None:
        """Charges a recalled entry's cost to the client's points, then answers it (through `answer`), or refuses
        it (429 through `send`). What a write drops meanwhile is still answered: the request came first."""
        charge = request_state(scope).rate_charge
        if charge is None or await self._charged(send, charge, recalled.held.cost, scope):
            await answer(*self.answer_recalled(scope, recalled, response_type(scope)))

    def recall(self, scope: Scope, body: bytes) -> Recalled | None:
        """The entry of a request whose bytes were seen from an anonymous reader, when memory holds it."""
        near = scope["state"].get("near")
        state = request_state(scope)
        if not isinstance(near, NearResponses) or not shareable(scope, state.identity):
            return None
        request = state.request_bytes = request_bytes(scope, body)
        remembered = self._remembered.get(request)
        held = near.get(remembered.response_key) if remembered is not None else None
        if remembered is None or held is None:
            return None
        state.operation = remembered.operation
        return Recalled(remembered, held)

    def answer_recalled(self, scope: Scope, recalled: Recalled, media: bytes) -> tuple[int, list[Header], bytes]:
        """The answer of an entry recalled from memory, once its cost is charged, in `media` (the request's
        `response_type`): counted as a hit."""
        self._count_held(scope["state"]["cache"])
        public = recalled.remembered.public
        inm = header(scope, b"if-none-match") if public else None
        held = recalled.held
        return self._response(held.body, held.tags, media, public=public, inm=inm, etag=held.etag)

    def _keep(self, state: RequestState, key: _Key, memo: _Memo | None, public: bool) -> None:
        """Remembers a request whose answer was charged: its key by its variables (`memo`, when it was computed for
        it) and by its bytes. Never before the charge: a refused request leaves nothing here."""
        if memo is not None:
            self._keys.put(memo.key, key, memo.size)
        request = state.request_bytes
        if request is None or request in self._remembered:
            return
        size = len(request[1]) + len(request[2]) + len(request[3]) + REMEMBERED_OVERHEAD
        if size > REMEMBERED_REQUEST_BYTES:
            return
        if self._remembered_bytes + size > REMEMBERED_BYTES:
            self._remembered.clear()
            self._remembered_bytes = 0
        self._remembered[request] = _Remembered(key.response_key, key.operation.name, public)
        self._remembered_bytes += size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = found_state(scope)
        request = state.graphql if state is not None else None
        identity = state.identity if state is not None else None
        if scope["type"] != "http" or state is None or request is None or identity is None:
            await self.app(scope, receive, send)
            return
        if not shareable(scope, identity):
            await self.app(scope, receive, with_headers(send, [(b"cache-control", PRIVATE)]))
            return
        public = request.method == "GET" and request.persisted is not None
        store = scope["state"].get("cache")
        operation = self.by_document.get(request.query or "")
        key, memo = None, None
        if operation is not None and isinstance(store, CacheStore) and store.redis is not None:
            key, memo = self._key(operation, request, store.namespace)
        if key is None and not public:
            await self.app(scope, receive, send)
            return
        charge = state.rate_charge
        inm = header(scope, b"if-none-match")
        media = response_type(scope)
        near = scope["state"].get("near")
        near = near if isinstance(near, NearResponses) else None
        epoch_key, epoch, since = "", None, 0
        if key is not None:
            assert isinstance(store, CacheStore)
            state.operation = key.operation.name
            held = near.get(key.response_key) if near is not None else None
            if held is not None:
                if await self._charged(send, charge, held.cost, scope):
                    self._keep(state, key, memo, public)
                    self._count_held(store)
                    await self._send(
                        send, held.body, held.tags, media, public=public, hit=True, inm=inm, etag=held.etag
                    )
                return
            since = near.mark() if near is not None else 0
            epoch_key = keys.response_epoch(store.namespace, key.response_key)
            got = await store.fetch_guarded(key.response_key, epoch_key)
            cached, epoch = (None, None) if isinstance(got, Unavailable) else got
            entry = got if isinstance(got, Unavailable) else await _listed_entry(store, key.response_key, cached)
            if isinstance(entry, Unavailable):
                key = None
            elif entry is not None:
                if await self._charged(send, charge, entry.cost, scope):
                    store.metrics.response_hits += 1
                    if near is not None:
                        near.keep(key.response_key, entry.body, cost=entry.cost, tags=entry.tags, since=since)
                    self._keep(state, key, memo, public)
                    await self._send(send, entry.body, entry.tags, media, public=public, hit=True, inm=inm)
                return
            else:
                store.metrics.response_misses += 1
        captured = Capture()
        await self.app(scope, receive, captured)
        if captured.start is None:
            return
        body = captured.body()
        result = _json(body) if captured.status == 200 else None
        data = result.get("data") if isinstance(result, dict) and not result.get("errors") else None
        uncached = [X_CACHE_MISS] if key is not None else []
        if public:
            uncached.append((b"cache-control", b"no-store"))
        if not isinstance(data, dict):
            await captured.replay(with_headers(send, uncached))
            return
        tags = response_tags(data, operation, key.coerced if key is not None else None)
        if tags is None:
            await captured.replay(with_headers(send, uncached))
            return
        await self._send(send, body, tags, media, public=public, hit=False, inm=inm)
        if key is not None and isinstance(store, CacheStore):
            tag_keys = keys.tag_keys(store.namespace, tags, of_key=key.response_key)
            replayed = state.replayed
            if replayed is not None and not await replayed_invalidations(store, tag_keys, replayed):
                # Read from a replica that may not have replayed a write that dropped one of its tags: an answer
                # older than that write, served within the lag, never kept for the TTL.
                store.metrics.response_lagging_skipped += 1
                return
            charged = charge.decision.cost if charge is not None and charge.decision else 1
            payload = _Entry(charged, tags, body).dump()
            if await store.store_guarded(
                key.response_key,
                payload,
                guard_key=epoch_key,
                guard_value=epoch,
                tag_keys=tag_keys,
                ttl_s=self.ttl_s,
                by_tags=True,
            ):
                store.metrics.response_stores += 1
                if near is not None:
                    near.keep(key.response_key, body, cost=charged, tags=tags, since=since)
                self._keep(state, key, memo, public)

    @staticmethod
    def _count_held(store: object) -> None:
        assert isinstance(store, CacheStore)
        store.metrics.response_hits += 1
        store.metrics.response_near_hits += 1

    async def _charged(self, send: Send, charge: object, cost: int, scope: Scope) -> bool:
        """Charges a cached answer's cost; False (after answering 429) when the client's points refuse it."""
        if not isinstance(charge, RateCharge) or not charge.enabled:
            return True
        decision = await charge.charge(cost)
        if decision.allowed:
            return True
        count_rejection("RATE_LIMITED")
        message, figures = decision.refusal()
        retry = {"retry-after": str(decision.retry_after)}
        refusal = EdgeError(429, "RATE_LIMITED", message, headers=retry, **figures)
        await send_error(send, refusal, response_type(scope))
        return False

    def _key(self, operation: CacheableOperation, request: GraphQLRequest, ns: str) -> tuple[_Key | None, _Memo | None]:
        """The entry's key, remembered by the request's variables as sent (coercing them again on every hit would
        cost more than the rest of the hit), and, when it was computed now, how to remember it once the request is
        charged (`_keep`). The memo is keyed by a digest of the variables: its keys take the same room whatever a
        client sends."""
        variables = canonical_variables(request.variables)
        digest = hashlib.blake2b(variables, digest_size=16).digest()
        memo = (operation.document_hash, request.operation_name, ns, digest)
        known = self._keys.get(memo)
        if known is not None:
            return known, None
        key = self._coerced_key(operation, request, ns)
        if key is None:
            return None, None
        size = KEY_MEMO_VARIABLE_FACTOR * len(variables) + len(request.operation_name or "") + KEY_MEMO_OVERHEAD
        return key, _Memo(memo, size)

    def _coerced_key(self, operation: CacheableOperation, request: GraphQLRequest, ns: str) -> _Key | None:
        if request.operation_name not in (None, operation.name):
            return None
        variables = request.variables or {}
        declared = {d.variable.name.value for d in operation.variable_definitions}
        if not set(variables) <= declared:
            return None  # GraphQL refuses undeclared variables
        coerced = get_variable_values(self.schema, operation.variable_definitions, variables, max_errors=1)
        if isinstance(coerced, list):
            return None  # GraphQL answers the coercion errors
        values = dict(coerced.coerced)
        for lookup in operation.lookups:
            raw = values.get(lookup.variable)
            if isinstance(raw, str):
                if len(raw) > MAX_LENGTH:
                    return None  # longer than any id form: GraphQL answers BAD_USER_INPUT
                values[lookup.variable] = entity_key(lookup.kind, raw) or raw
        response_key = keys.response(
            ns,
            schema_version=self.schema_version,
            operation=operation.name,
            document_hash=operation.document_hash,
            variables=canonical_variables(values),
        )
        return _Key(response_key, operation, coerced.coerced)

    async def _send(
        self,
        send: Send,
        body: bytes,
        tags: Sequence[str],
        media: bytes,
        *,
        public: bool,
        hit: bool,
        inm: bytes | None,
        etag: bytes | None = None,
    ) -> None:
        status, headers, body = self._response(body, tags, media, public=public, hit=hit, inm=inm, etag=etag)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _response(
        self,
        body: bytes,
        tags: Sequence[str],
        media: bytes,
        *,
        public: bool,
        inm: bytes | None,
        hit: bool = True,
        etag: bytes | None = None,
    ) -> tuple[int, list[Header], bytes]:
        """Status, headers and body of a cached operation's answer (a 304 when `If-None-Match` names it), in the
        request's media type: the same body under either, so one entry answers both."""
        json = media is JSON
        headers = [JSON_CONTENT if json else GRAPHQL_RESPONSE_CONTENT, X_CACHE_HIT if hit else X_CACHE_MISS]
        if public:
            etag = etag or strong_etag(body)
            if not json:
                # A strong tag names one representation (RFC 9110 8.8.3): the other type's is another.
                etag = graphql_response_etag(etag)
            headers += self.cdn.headers(tags, etag)
            if inm is not None and not_modified(inm, etag):
                # No Content-Length: a 304's may only be the whole answer's (RFC 9110 8.6).
                return 304, headers, b""
        headers.append((b"content-length", str(len(body)).encode()))
        return 200, headers, body


@dataclass(frozen=True, slots=True)
class _Entry:
    """What Redis holds: the cost charged and the tags, one line of JSON, then the body."""

    cost: int
    tags: list[str]
    body: bytes

    def dump(self) -> bytes:
        return orjson.dumps({"cost": self.cost, "tags": self.tags}) + b"\n" + self.body

    @classmethod
    def load(cls, raw: bytes) -> _Entry | None:
        head, sep, body = raw.partition(b"\n")
        meta = _json(head) if sep else None
        if not isinstance(meta, dict) or not isinstance(meta.get("cost"), int):
            return None
        return cls(meta["cost"], [str(t) for t in meta.get("tags", [])], body)


async def _listed_entry(store: CacheStore, key: str, cached: bytes | None) -> _Entry | None | Unavailable:
    """The entry Redis held under `key`, while every tag set it joined still lists it (db/cache/store.py, `listed`):
    one that some set no longer lists would outlive the invalidation of that set's entity."""
    entry = _Entry.load(cached) if cached is not None else None
    if entry is None:
        return None
    listed = await store.listed(key, lambda: keys.tag_keys(store.namespace, entry.tags, of_key=key))
    if listed is False:
        store.metrics.response_unlisted_skipped += 1
        return None
    return listed if isinstance(listed, Unavailable) else entry


def _json(raw: bytes) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
