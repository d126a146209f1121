"""Every `extensions.code` the API can answer, with what it means: the one list the SDL's ErrorCode enum, the
contract README and the TypeScript client are built or checked from (tests/unit/test_error_codes.py finds every
code the code base raises and fails when one is missing here)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

ERROR_CODES: Mapping[str, str] = MappingProxyType(
    {
        # The caller's request.
        "BAD_USER_INPUT": "An argument is malformed or out of range (an id form, a cursor, `first`, a date range, "
        "text PostgreSQL cannot store); the message says which and what is accepted. Fix the request.",
        "NOT_FOUND": "What the request names does not exist where an answer must (look-ups answer null instead).",
        "BAD_REQUEST": "The HTTP request is no GraphQL request (a malformed JSON body or query string, a malformed "
        "`extensions.persistedQuery`); HTTP 400.",
        "UNSUPPORTED_MEDIA_TYPE": "A POST body that is not `application/json` (HTTP 415).",
        "METHOD_NOT_ALLOWED": "The HTTP method cannot run this request (a mutation by GET, a PUT); `Allow` names "
        "those that can (HTTP 405).",
        "GRAPHQL_PARSE_FAILED": "The document is not GraphQL (a syntax error).",
        "TOO_MANY_TOKENS": "The document has more tokens than one request may (WOVEPAPER_MAX_TOKENS).",
        "GRAPHQL_VALIDATION_FAILED": "The document does not fit the schema (an unknown field, a variable of the wrong "
        "type, a missing argument).",
        "QUERY_TOO_DEEP": "The document nests deeper than allowed (WOVEPAPER_MAX_DEPTH).",
        "TOO_MANY_ALIASES": "The document uses more aliases than allowed (WOVEPAPER_MAX_ALIASES).",
        "TOO_MANY_DIRECTIVES": "The document uses more directives than allowed.",
        "TOO_MANY_FIELDS": "The document selects more fields, or more of one name, than allowed once fragments are "
        "expanded.",
        "TOO_MANY_FRAGMENTS": "A selection spreads more fragments than allowed.",
        "QUERY_TOO_COMPLEX": "The operation would cost more than one request may (nested lists multiply); ask for "
        "less or page.",
        "PAYLOAD_TOO_LARGE": "The request body is larger than the server accepts (HTTP 413).",
        "REQUEST_HEAD_TOO_LARGE": "The request line and headers are larger than the server reads "
        "(WOVEPAPER_MAX_HEADER_BYTES): HTTP 431, or 414 when most of it is the URL; send variables in a POST body.",
        "REQUEST_TIMEOUT": "The request's head or body stopped arriving before it was complete (HTTP 408; the "
        "connection is closed): send it again.",
        "PERSISTED_QUERY_NOT_FOUND": "The persisted query hash is unknown: send the document with it once.",
        "PERSISTED_QUERY_REQUIRED": "This client may only send persisted (registered) operations.",
        "PERSISTED_QUERY_NOT_SUPPORTED": "This server serves no persisted documents: send the document itself.",
        "PERSISTED_QUERY_HASH_MISMATCH": "The document sent with a persisted query hash does not hash to it.",
        "IDEMPOTENCY_KEY_IN_USE": "A question with this idempotency key is still being answered: retry after "
        "`retryAfterS` for its answer (HTTP 409 on /chat).",
        "IDEMPOTENCY_KEY_REUSED": "This idempotency key was used for another question: use a new key for a new "
        "question (HTTP 422 on /chat).",
        # Who asks, and how often.
        "UNAUTHENTICATED": "A credential (API key, bearer token) was sent but could not be verified (HTTP 401).",
        "FORBIDDEN_ORIGIN": "The API key may not be used from this browser origin (HTTP 403).",
        "AUTH_UNAVAILABLE": "A bearer token cannot be checked now (the signing keys cannot be loaded): retry later "
        "(HTTP 503).",
        "RATE_LIMITED": "Too many requests or points for this key or address: wait for `Retry-After` (HTTP 429).",
        "LIMIT_EXCEEDED": "A quota of the signed-in reader is spent (follows, conversations, questions, corrections).",
        # The server's side.
        "TIMEOUT": "The operation or one of its statements took longer than allowed; narrow it and retry.",
        "OVERLOADED": "The server is too busy to take the request now: retry after `Retry-After` (HTTP 503).",
        "SERVICE_UNAVAILABLE": "A service the answer needs (the database) is unreachable: retry later (HTTP 503).",
        "SEMANTIC_UNAVAILABLE": "Semantic and hybrid search are off on this server (no embedding model or no "
        "pgvector); KEYWORD search works.",
        "CHAT_UNAVAILABLE": "Questions to the language model cannot be answered on this server (no model is "
        "configured).",
        "MODEL_UNAVAILABLE": "The language model did not answer (an error, a timeout, its own limit); nothing was "
        "stored and the question was given back: try again in a moment (HTTP 502 on /chat, or an `error` event).",
        "INTERNAL_SERVER_ERROR": "A bug: the message is masked and carries `requestId` for the server's log.",
    }
)
