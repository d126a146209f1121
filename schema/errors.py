"""Which errors callers see as they are, and the masking of everything else."""

from __future__ import annotations

import logging
from enum import Enum, EnumMeta
from typing import Final

import asyncpg
import strawberry
from graphql.error import GraphQLError
from strawberry.extensions import MaskErrors

from db.pool import PoolExhausted, is_lost_connection, is_recovery_conflict
from error_codes import ERROR_CODES
from resolvers.errors import BadUserInput, NotFound, PublicError

logger = logging.getLogger("wovepaper.graphql")

__all__ = ["BadUserInput", "ErrorCode", "MaskUnexpectedErrors", "NotFound", "PublicError", "is_unexpected"]

# In the SDL for clients to switch on (no field returns it): every `extensions.code` an answer can carry.
# Enum's functional form through its metaclass, which typeshed types as returning the class (mypy wants the
# members of `Enum(...)` written out; they come from data).
_ERROR_CODES = EnumMeta.__call__(
    Enum, "ErrorCode", {code: strawberry.enum_value(code, description=text) for code, text in ERROR_CODES.items()}
)
ErrorCode = strawberry.enum(
    _ERROR_CODES,
    description="Every `extensions.code` an error of this API can carry, and what it means. An error without a "
    "code is none of ours (a proxy's). Masked errors (INTERNAL_SERVER_ERROR) also carry `requestId`.",
)

# Codes that mean "not your request's fault, try again shortly": answered with HTTP 503 and Retry-After.
RETRYABLE_CODES: Final = frozenset({"SERVICE_UNAVAILABLE", "OVERLOADED"})


def is_unexpected(error: GraphQLError) -> bool:
    """Validation and syntax errors (no original error), input coercion errors (a GraphQLError, e.g. a
    malformed Date variable) and our PublicErrors stay readable; anything else is a bug to mask."""
    original = error.original_error
    return original is not None and not isinstance(original, PublicError | GraphQLError)


class MaskUnexpectedErrors(MaskErrors):
    """ "Unexpected error." plus the request id; the traceback goes to the log under the same id."""

    def __init__(self) -> None:
        super().__init__(should_mask_error=is_unexpected)

    def _process_result(self, result: object) -> None:
        # Strawberry's asks a runtime Protocol whether the result has `errors` (inspect.getattr_static over its
        # classes, on every request); asking for the attribute is the same question.
        errors = getattr(result, "errors", None)
        if errors:
            result.errors = self._process_errors(errors)  # type: ignore[attr-defined]

    def anonymise_error(self, error: GraphQLError) -> GraphQLError:
        context = self.execution_context.context
        request_id = getattr(context, "request_id", None)
        original = error.original_error
        if isinstance(original, asyncpg.QueryCanceledError):
            # statement_timeout: a known limit, not a bug; the caller can narrow the query.
            logger.warning("statement timeout request_id=%s path=%s", request_id, error.path)
            message, code = "A database statement took too long; narrow the query and retry.", "TIMEOUT"
        elif isinstance(original, PoolExhausted):
            logger.warning("database pool exhausted request_id=%s path=%s", request_id, error.path)
            message, code = "The service is overloaded; retry shortly.", "OVERLOADED"
        elif original is not None and (is_lost_connection(original) or is_recovery_conflict(original)):
            # A restart, failover or terminated backend: the pool reconnects by itself. A replica's recovery conflict
            # too: a query is run again, on the primary (schema.Schema.execute, resolvers.context.Context.renew).
            logger.warning(
                "database connection lost request_id=%s path=%s: %s: %s",
                request_id,
                error.path,
                type(original).__name__,
                original,
            )
            message, code = "The database is unavailable; retry shortly.", "SERVICE_UNAVAILABLE"
        else:
            logger.error(
                "unexpected error request_id=%s path=%s",
                request_id,
                error.path,
                exc_info=(type(original), original, original.__traceback__) if original else None,
            )
            message, code = self.error_message, "INTERNAL_SERVER_ERROR"
        return GraphQLError(
            message=message,
            nodes=error.nodes,
            source=error.source,
            positions=error.positions,
            path=error.path,
            original_error=None,
            extensions={"code": code, "requestId": request_id},
        )
