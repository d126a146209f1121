"""The schema extensions every request runs through, as factories (no state shared between requests)."""

from __future__ import annotations

from collections.abc import Callable

from strawberry.extensions import (
    MaxAliasesLimiter,
    MaxTokensLimiter,
    ParserCache,
    QueryDepthLimiter,
    SchemaExtension,
    ValidationCache,
)

from schema.errors import MaskUnexpectedErrors
from settings import Settings

CACHE_SIZE = 1024


def default_extensions(settings: Settings) -> list[Callable[[], SchemaExtension]]:
    """Limits first (they reject a document before it costs anything), then the caches, then masking.

    None of these implement `resolve`, so no field gets a middleware wrapper.
    """
    return [
        lambda: MaxTokensLimiter(settings.max_tokens),
        lambda: ParserCache(maxsize=CACHE_SIZE),
        lambda: QueryDepthLimiter(max_depth=settings.max_depth),
        lambda: MaxAliasesLimiter(settings.max_aliases),
        lambda: ValidationCache(maxsize=CACHE_SIZE),
        MaskUnexpectedErrors,
    ]
