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
        "GRAPHQL_PARSE_FAILED": "The document is not GraphQL (a syntax error, or more tokens than allowed).",
        "GRAPHQL_VALIDATION_FAILED": "The document does not fit the schema or its limits (unknown field, a variable "
        "of the wrong type, too deep, too many aliases or directives).",
        "QUERY_TOO_COMPLEX": "The operation would cost more than one request may (nested lists multiply); ask for "
        "less or page.",
        "PAYLOAD_TOO_LARGE": "The request body is larger than the server accepts (HTTP 413).",
        "PERSISTED_QUERY_NOT_FOUND": "The persisted query hash is unknown: send the document with it once.",
        "PERSISTED_QUERY_REQUIRED": "This client may only send persisted (registered) operations.",
        # Who asks, and how often.
        "UNAUTHENTICATED": "A credential (API key, bearer token) was sent but could not be verified (HTTP 401).",
        "AUTH_UNAVAILABLE": "A bearer token cannot be checked now (the signing keys cannot be loaded): retry later "
        "(HTTP 503).",
        "RATE_LIMITED": "Too many requests or points for this key or address: wait for `Retry-After` (HTTP 429).",
        "LIMIT_EXCEEDED": "A quota of the signed-in reader is spent (follows, conversations, questions).",
        # The server's side.
        "TIMEOUT": "The operation or one of its statements took longer than allowed; narrow it and retry.",
        "OVERLOADED": "The server is too busy to take the request now: retry after `Retry-After` (HTTP 503).",
        "SERVICE_UNAVAILABLE": "A service the answer needs (the database) is unreachable: retry later (HTTP 503).",
        "SEMANTIC_UNAVAILABLE": "Semantic and hybrid search are off on this server (no embedding model or no "
        "pgvector); KEYWORD search works.",
        "CHAT_UNAVAILABLE": "Questions to the language model cannot be answered now (not configured, or the model "
        "does not answer).",
        "INTERNAL_SERVER_ERROR": "A bug: the message is masked and carries `requestId` for the server's log.",
    }
)
