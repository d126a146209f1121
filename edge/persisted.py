"""Persisted documents: the site's trusted documents by id, and Apollo's automatic persisted queries.

The site's operations are in a manifest (sha256 -> document) generated from frontend_contract and
committed with it. `documentId=<sha256>` (GET or POST) runs one. Other documents use the APQ protocol:
a request with `extensions.persistedQuery.sha256Hash` and no `query` runs the registered document or
answers PERSISTED_QUERY_NOT_FOUND; the client then sends the document with its hash, which registers it
in Redis once GraphQL has admitted it (it parsed, validated, fit the limits and its cost was charged; a refused
document registers nothing), before the answer is sent. The registry is bounded: documents up to
MAX_REGISTERED_BYTES, at most MAX_REGISTERED of them, the one used least lately forgotten first, each for
REGISTRATION_TTL_S after its last use. GET runs persisted documents only.

`WOVEPAPER_TRUSTED_DOCUMENTS`: `off` serves none of this, `site` (default) all of it and any document,
`only` runs nothing but the manifest's documents, except for requests with an API key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal, NamedTuple

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from db.cache import keys
from db.cache.client import RedisClient
from db.cache.scripts import Script
from db.cache.store import CacheStore, Unavailable
from edge.errors import EdgeError, send_error
from edge.request import response_type
from request_types.graphql_request import GraphQLRequest
from request_types.state import RequestState, found_state

TrustedDocuments = Literal["off", "site", "only"]

REGISTRATION_TTL_S: Final = 24 * 3600
MAX_REGISTERED_BYTES: Final = 16 * 1024
# Documents registered per namespace: at most this many times MAX_REGISTERED_BYTES live in Redis (32 MB).
MAX_REGISTERED = 2000
_SHA256 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")

# The registry is two kinds of key, so that documents spread over a Cluster's slots: each document under its own hash
# tag, and one index of the registered digests by last use (Redis's clock, ms) that bounds how many there are.
# KEYS[1] the index; ARGV digest, ttl, most documents. Marks the digest used; answers the digests past the most, used
# least lately, taken out of the index: their documents are deleted after it, each key on its own.
_INDEX = Script("""
local t = redis.call('TIME')
redis.call('ZADD', KEYS[1], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])
if over <= 0 then return {} end
local gone = redis.call('ZPOPMIN', KEYS[1], over)
local out = {}
for i = 1, #gone, 2 do out[#out + 1] = gone[i] end
return out
""")
# KEYS[1] the document; ARGV ttl, how long a use may go unmarked in the index. The document (its time to live started
# again) and whether the index should mark this use: once per TOUCH_S, so that look-ups do not all write to the
# index's one slot.
_LOOK_UP = Script("""
local document = redis.call('GET', KEYS[1])
if not document then return {false, 0} end
local left = redis.call('TTL', KEYS[1])
if left > tonumber(ARGV[1]) - tonumber(ARGV[2]) then return {document, 0} end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return {document, 1}
""")
# How long a document's use may go unmarked in the registry's index (and its time to live not started again).
TOUCH_S: Final = 3600


def sha256_hex(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


def operation_documents(directory: Path) -> dict[str, str]:
    """Each operation's document, by its file's name: the file's text, then the text of each fragment it spreads
    (the `fragments` folder beside `directory`, one fragment a file, named after it; a fragment's own spreads too),
    each once, in the order first spread."""
    fragments = directory.parent / "fragments"
    documents: dict[str, str] = {}
    for path in sorted(directory.glob("*.graphql")):
        parts, seen = [path.read_text()], set[str]()
        for part in parts:  # grows as fragments are found
            for name in _SPREAD.findall(_COMMENT.sub("", part)):
                if name not in seen:
                    seen.add(name)
                    parts.append((fragments / f"{name}.graphql").read_text())
        documents[path.stem] = "\n".join(parts)
    return documents


# A named fragment's spread (`... on Type` is inline), and comments, which may say anything.
_SPREAD = re.compile(r"\.\.\.\s*(?!on\b)([_A-Za-z][_0-9A-Za-z]*)")
_COMMENT = re.compile(r"#[^\n]*")


def build_manifest(directory: Path) -> dict[str, str]:
    """`sha256:<hex>` of each operation's document (operation_documents) -> the document (graphql-codegen's
    manifest format)."""
    return {f"sha256:{sha256_hex(text)}": text for text in operation_documents(directory).values()}


def _hash(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    m = _SHA256.match(value.strip().lower())
    return m.group(1) if m else None


def not_found() -> EdgeError:
    # Status 200, as Apollo's clients expect: the answer to "send the document with its hash". Under
    # `application/graphql-response+json` an answer without `data` is never a 2xx: 404 there (Apollo Client reads the
    # error from the body whatever the status).
    return EdgeError(200, "PERSISTED_QUERY_NOT_FOUND", "PersistedQueryNotFound", status_without_data=404)


class PersistedDocuments:
    def __init__(self, app: ASGIApp, *, manifest: Mapping[str, str], mode: TrustedDocuments) -> None:
        self.app = app
        self.manifest = dict(manifest)
        self.site_documents = set(self.manifest.values())
        self.mode = mode

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        state = found_state(scope)
        request = state.graphql if state is not None else None
        if scope["type"] != "http" or state is None or request is None:
            await self.app(scope, receive, send)
            return
        cache = scope["state"].get("cache")
        store = cache if isinstance(cache, CacheStore) else None
        try:
            resolved = await self.resolve(request, state, store)
        except EdgeError as exc:
            await send_error(send, exc, response_type(scope))
            return
        state.graphql = resolved
        registration, state.registration = state.registration, None
        if isinstance(registration, _Registration):
            send = _registering(send, state, registration)
        await self.app(scope, receive, send)

    async def resolve(self, request: GraphQLRequest, state: RequestState, store: CacheStore | None) -> GraphQLRequest:
        identity = state.identity
        keyed = identity is not None and identity.api_key is not None
        persisted_query = (request.extensions or {}).get("persistedQuery")
        wants_persisted = request.document_id is not None or persisted_query is not None
        if wants_persisted and self.mode == "off":
            raise EdgeError(400, "PERSISTED_QUERY_NOT_SUPPORTED", "Persisted documents are not served here.")
        if request.document_id is not None:
            digest = _hash(request.document_id)
            document = self.manifest.get(digest) if digest else None
            if document is None:
                raise EdgeError(400, "PERSISTED_QUERY_NOT_FOUND", "No persisted document has this `documentId`.")
            return request.with_document(document, "site")
        if persisted_query is not None:
            return await self._automatic(request, persisted_query, state, store, keyed=keyed)
        assert request.query is not None
        if request.query in self.site_documents:
            return request.with_document(request.query, "site")
        if request.method == "GET":
            raise EdgeError(
                400, "BAD_REQUEST", "GET runs persisted documents only (`documentId` or a persisted query hash)."
            )
        if self.mode == "only" and not keyed:
            raise EdgeError(
                400, "PERSISTED_QUERY_REQUIRED", "This server runs persisted documents only (or with an API key)."
            )
        return request

    async def _automatic(
        self,
        request: GraphQLRequest,
        persisted_query: object,
        state: RequestState,
        store: CacheStore | None,
        *,
        keyed: bool,
    ) -> GraphQLRequest:
        digest = _hash(persisted_query.get("sha256Hash") if isinstance(persisted_query, dict) else None)
        if digest is None or not isinstance(persisted_query, dict) or persisted_query.get("version", 1) != 1:
            raise EdgeError(400, "BAD_REQUEST", "`extensions.persistedQuery` needs `version: 1` and a `sha256Hash`.")
        if digest in self.manifest:
            return request.with_document(self.manifest[digest], "site")
        if self.mode == "only" and not keyed:
            raise EdgeError(400, "PERSISTED_QUERY_REQUIRED", "This server runs the site's persisted documents only.")
        if request.query is None:
            document = await _registered(store, digest)
            if document is None:
                raise not_found()
            return request.with_document(document, "apq")
        if sha256_hex(request.query) != digest:
            raise EdgeError(400, "PERSISTED_QUERY_HASH_MISMATCH", "The document's sha256 is not `sha256Hash`.")
        if store is not None and store.redis is not None and len(request.query.encode()) <= MAX_REGISTERED_BYTES:
            # Registered once GraphQL has admitted it (`_registering`), not before.
            state.registration = _Registration(store, digest, request.query)
        return request.with_document(request.query, "apq")


class _Registration(NamedTuple):
    """The registration a request asks for, in its state from `resolve` until `__call__` takes it."""

    store: CacheStore
    digest: str
    document: str


def _registering(send: Send, state: RequestState, registration: _Registration) -> Send:
    """`send`, registering the document before the answer starts when GraphQL admitted it: the client's next request
    by hash alone finds it, whichever worker answers."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and state.admitted:
            await _register(*registration)
        await send(message)

    return sending


async def _registered(store: CacheStore | None, digest: str) -> str | None:
    if store is None or store.redis is None:
        return None
    doc_key = keys.persisted_query(store.namespace, digest)
    index_key = keys.persisted_query_index(store.namespace)

    async def run(r: RedisClient) -> object:
        got = await _LOOK_UP.run(r, [doc_key], [REGISTRATION_TTL_S, TOUCH_S])
        if not isinstance(got, list) or not got or got[0] is None:
            return None
        if got[1]:
            await r.zadd(index_key, {digest: await _now_ms(r)}, xx=True)
        return got[0]

    got = await store.call(run)
    if isinstance(got, Unavailable) or got is None:
        return None
    return bytes(got).decode() if isinstance(got, bytes) else str(got)


async def _now_ms(r: RedisClient) -> int:
    """Redis's clock, as the index's scores are."""
    seconds, micros = await r.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def _register(store: CacheStore, digest: str, document: str) -> None:
    if store.redis is None:
        return
    doc_key = keys.persisted_query(store.namespace, digest)
    index_key = keys.persisted_query_index(store.namespace)

    async def run(r: RedisClient) -> object:
        await r.set(doc_key, document, ex=REGISTRATION_TTL_S)
        gone = await _INDEX.run(r, [index_key], [digest, REGISTRATION_TTL_S, MAX_REGISTERED])
        for old in gone if isinstance(gone, list) else ():
            await r.delete(keys.persisted_query(store.namespace, old.decode() if isinstance(old, bytes) else str(old)))
        return True

    await store.call(run)
