"""Whole-response cache for the site's anonymous operations, in front of the GraphQL endpoint.

Only POSTs whose document is one of the frontend contract's operations (same name, same document
hash) from a request without credentials are considered. The key is operation + document hash +
canonical variables + schema version. A hit is answered from Redis without running GraphQL at all.
A successful response is stored with a TTL and added to the tag set of every paper, researcher and
institution it contains (by their global ids), and list operations also to the lists tag; the
ingest's invalidation drops those sets. A response computed while any invalidation ran is not stored.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from db.cache import keys
from db.cache.store import CacheStore, EntityRef, Unavailable
from db.paging import TokenError, decode_global_id

log = logging.getLogger(__name__)

# Requests carrying any of these may see viewer-specific data: never cached, never served from cache.
CREDENTIAL_HEADERS = frozenset({b"authorization", b"cookie", b"x-api-key"})
GLOBAL_ID_KINDS = {"Paper": "paper", "Researcher": "researcher", "Institution": "institution"}
MAX_TAGS = 2000


@dataclass(frozen=True, slots=True)
class CacheableOperation:
    name: str
    document_hash: str  # sha256 hex of the document text, stripped
    is_list: bool  # its result may change with any write (lists, paths), not only its entities'


def document_hash(document: str) -> str:
    return hashlib.sha256(document.strip().encode()).hexdigest()


def canonical_variables(variables: object) -> bytes:
    """Sorted keys, no whitespace: equal variables give equal bytes, whatever the client's order."""
    return orjson.dumps(variables if variables is not None else {}, option=orjson.OPT_SORT_KEYS)


def entity_refs(data: object) -> set[EntityRef]:
    """Every paper, researcher and institution in a response, found by its global `id`."""
    found: set[EntityRef] = set()
    for value in _ids(data):
        try:
            type_name, db_id = decode_global_id(value)
        except (TokenError, ValueError):
            continue
        kind = GLOBAL_ID_KINDS.get(type_name)
        if kind is not None:
            found.add(EntityRef(kind, db_id))
    return found


def _ids(data: object) -> Iterator[str]:
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if k == "id" and isinstance(v, str):
                    yield v
                elif isinstance(v, dict | list):
                    stack.append(v)
        elif isinstance(item, list):
            stack.extend(x for x in item if isinstance(x, dict | list))


class ResponseCache:
    """ASGI wrapper around the GraphQL endpoint; the store comes from the lifespan state (`cache`)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        operations: Iterable[CacheableOperation],
        schema_version: str,
        ttl_s: int,
    ) -> None:
        self.app = app
        self.by_hash = {op.document_hash: op for op in operations}
        self.schema_version = schema_version
        self.ttl_s = ttl_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        store = scope.get("state", {}).get("cache")
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or not isinstance(store, CacheStore)
            or store.redis is None
            or not self.by_hash
            or any(name in CREDENTIAL_HEADERS for name, _ in scope["headers"])
        ):
            await self.app(scope, receive, send)
            return
        body, more = await _read_body(receive)
        replay = _replay(body, receive, more)
        key = None if more else self._key(body, store)
        if key is None:
            await self.app(scope, replay, send)
            return
        response_key, operation = key
        epoch_key = keys.response_epoch(store.namespace)
        got = await store.fetch_guarded(response_key, epoch_key)
        if isinstance(got, Unavailable):
            await self.app(scope, replay, send)
            return
        cached, epoch = got
        if cached is not None:
            store.metrics.response_hits += 1
            await _send_json(send, cached, hit=True)
            return
        store.metrics.response_misses += 1
        captured = _Capture(send)
        await self.app(scope, replay, captured)
        payload = captured.body()
        if captured.status != 200 or payload is None:
            return
        try:
            result = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(result, dict) or result.get("errors") or result.get("data") is None:
            return
        refs = entity_refs(result["data"])
        if len(refs) > MAX_TAGS:
            return  # too broad to invalidate precisely; not worth caching
        tag_keys = [keys.entity_tag(store.namespace, r.kind, r.id) for r in sorted(refs, key=lambda r: (r.kind, r.id))]
        if operation.is_list:
            tag_keys.append(keys.lists_tag(store.namespace))
        if await store.store_guarded(
            response_key, payload, guard_key=epoch_key, guard_value=epoch, tag_keys=tag_keys, ttl_s=self.ttl_s
        ):
            store.metrics.response_stores += 1

    def _key(self, body: bytes, store: CacheStore) -> tuple[str, CacheableOperation] | None:
        try:
            request = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(request, dict):
            return None
        query = request.get("query")
        if not isinstance(query, str):
            return None
        operation = self.by_hash.get(document_hash(query))
        if operation is None or request.get("operationName") not in (None, operation.name):
            return None
        variables = request.get("variables")
        if variables is not None and not isinstance(variables, dict):
            return None
        response_key = keys.response(
            store.namespace,
            schema_version=self.schema_version,
            operation=operation.name,
            document_hash=operation.document_hash,
            variables=canonical_variables(variables),
        )
        return response_key, operation


# Bodies of cacheable operations are small; a larger one is passed through unread beyond this.
_MAX_READ = 64 * 1024


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The body, and whether more of it is still unread (too large to consider)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), False
        if size > _MAX_READ:
            return b"".join(chunks), True


def _replay(body: bytes, receive: Receive, more: bool) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": more}
        return await receive()

    return replay


async def _send_json(send: Send, body: bytes, *, hit: bool) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-cache", b"hit" if hit else b"miss"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Capture:
    """Forwards the response as it is sent and keeps a copy of its body."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.status = 0
        self._chunks: list[bytes] = []
        self._complete = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            message = {**message, "headers": [*message.get("headers", []), (b"x-cache", b"miss")]}
        elif message["type"] == "http.response.body":
            self._chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self._complete = True
        await self._send(message)

    def body(self) -> bytes | None:
        return b"".join(self._chunks) if self._complete else None
