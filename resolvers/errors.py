"""Errors callers may see as they are: each carries a stable `extensions.code`.

Anything else raised while executing is masked ("Unexpected error." plus a request id).
"""

from __future__ import annotations


class PublicError(Exception):
    """Subclasses set `code`, one of error_codes.ERROR_CODES."""

    code = "INTERNAL_SERVER_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        # graphql-core copies `extensions` from the original error into the response.
        self.extensions: dict[str, object] = {"code": self.code}


class BadUserInput(PublicError):
    code = "BAD_USER_INPUT"


class NotFound(PublicError):
    code = "NOT_FOUND"


class Unauthenticated(PublicError):
    code = "UNAUTHENTICATED"


class LimitExceeded(PublicError):
    code = "LIMIT_EXCEEDED"
