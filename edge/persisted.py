"""Persisted documents: the site's trusted documents by id, and Apollo's automatic persisted queries.

The site's operations are in a manifest (sha256 -> document) generated from frontend_contract and
committed with it. `documentId=<sha256>` (GET or POST) runs one. Other documents use the APQ protocol:
a request with `extensions.persistedQuery.sha256Hash` and no `query` runs the registered document or
answers PERSISTED_QUERY_NOT_FOUND; the client then sends the document with its hash, which registers it
in Redis for REGISTRATION_TTL_S. Registrations are bounded (document size, and how many per window),
so a client cannot fill Redis. GET runs persisted documents only.

`WOVEPAPER_TRUSTED_DOCUMENTS`: `off` serves none of this, `site` (default) all of it and any document,
`only` runs nothing but the manifest's documents, except for requests with an API key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final, Literal

from starlette.types import ASGIApp, Receive, Scope, Send

from db.cache import keys
from db.cache.client import RedisClient
from db.cache.scripts import Script
from db.cache.store import CacheStore, Unavailable
from edge.errors import EdgeError, send_error
from edge.identity import Identity
from edge.request import GraphQLRequest, response_type

TrustedDocuments = Literal["off", "site", "only"]

REGISTRATION_TTL_S: Final = 24 * 3600
MAX_REGISTERED_BYTES: Final = 16 * 1024
# Registrations per REGISTRATION_TTL_S window and namespace: at most this many times MAX_REGISTERED_BYTES
# live in Redis (twice, across a window boundary).
MAX_REGISTRATIONS: Final = 2000
_SHA256 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")

# KEYS[1] the window's counter; ARGV ttl. The count after this registration. The document is another key (another
# hash tag, so documents spread over a Cluster): it is written after its count.
_COUNT = Script("""
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
""")


def sha256_hex(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


def build_manifest(directory: Path) -> dict[str, str]:
    """`sha256:<hex>` of each operation file's exact text -> the text (graphql-codegen's manifest format)."""
    return {f"sha256:{sha256_hex(text)}": text for text in (p.read_text() for p in sorted(directory.glob("*.graphql")))}


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
        state = scope.get("state") or {}
        request = state.get("graphql_request")
        if scope["type"] != "http" or not isinstance(request, GraphQLRequest):
            await self.app(scope, receive, send)
            return
        try:
            resolved = await self.resolve(request, state)
        except EdgeError as exc:
            await send_error(send, exc, response_type(scope))
            return
        state["graphql_request"] = resolved
        await self.app(scope, receive, send)

    async def resolve(self, request: GraphQLRequest, state: Mapping[str, object]) -> GraphQLRequest:
        identity = state.get("identity")
        keyed = isinstance(identity, Identity) and identity.api_key is not None
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
            return await self._automatic(request, persisted_query, state.get("cache"), keyed=keyed)
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
        self, request: GraphQLRequest, persisted_query: object, cache: object, *, keyed: bool
    ) -> GraphQLRequest:
        digest = _hash(persisted_query.get("sha256Hash") if isinstance(persisted_query, dict) else None)
        if digest is None or not isinstance(persisted_query, dict) or persisted_query.get("version", 1) != 1:
            raise EdgeError(400, "BAD_REQUEST", "`extensions.persistedQuery` needs `version: 1` and a `sha256Hash`.")
        if digest in self.manifest:
            return request.with_document(self.manifest[digest], "site")
        store = cache if isinstance(cache, CacheStore) else None
        if self.mode == "only" and not keyed:
            raise EdgeError(400, "PERSISTED_QUERY_REQUIRED", "This server runs the site's persisted documents only.")
        if request.query is None:
            document = await _registered(store, digest)
            if document is None:
                raise not_found()
            return request.with_document(document, "apq")
        if sha256_hex(request.query) != digest:
            raise EdgeError(400, "PERSISTED_QUERY_HASH_MISMATCH", "The document's sha256 is not `sha256Hash`.")
        if len(request.query.encode()) <= MAX_REGISTERED_BYTES:
            await _register(store, digest, request.query)
        return request.with_document(request.query, "apq")


async def _registered(store: CacheStore | None, digest: str) -> str | None:
    if store is None:
        return None
    key = keys.persisted_query(store.namespace, digest)
    got = await store.call(lambda r: r.get(key))
    if isinstance(got, Unavailable) or got is None:
        return None
    return bytes(got).decode() if isinstance(got, bytes) else str(got)


async def _register(store: CacheStore | None, digest: str, document: str) -> None:
    if store is None or store.redis is None:
        return
    doc_key = keys.persisted_query(store.namespace, digest)
    count_key = keys.persisted_query_count(store.namespace)

    async def run(r: RedisClient) -> object:
        if await r.expire(doc_key, REGISTRATION_TTL_S):
            return True  # registered already: kept another window, not counted again
        count = await _COUNT.run(r, [count_key], [REGISTRATION_TTL_S])
        if not isinstance(count, int) or count > MAX_REGISTRATIONS:
            return False
        return await r.set(doc_key, document, ex=REGISTRATION_TTL_S)

    await store.call(run)
