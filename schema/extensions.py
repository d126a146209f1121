"""The schema extensions every request runs through, as factories (no state shared between requests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import GraphQLError, ValidationRule
from graphql.language import DirectiveNode
from strawberry.extensions import (
    AddValidationRules,
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
MAX_DIRECTIVES = 50


class MaxDirectivesRule(ValidationRule):
    """At most MAX_DIRECTIVES directive uses per document (directive overloading)."""

    def __init__(self, context: Any) -> None:
        super().__init__(context)
        self.count = 0

    def enter_directive(self, node: DirectiveNode, *_: Any) -> None:
        self.count += 1
        if self.count == MAX_DIRECTIVES + 1:
            self.report_error(GraphQLError(f"More than {MAX_DIRECTIVES} directives in the document.", node))


def default_extensions(settings: Settings) -> list[Callable[[], SchemaExtension]]:
    """Limits first (they reject a document before it costs anything), then the caches, then masking.

    The limit rules are built once: QueryDepthLimiter and MaxAliasesLimiter make a new rule class per
    instance, and ValidationCache keys on the rule classes, so per-request rules would never hit the
    cache (measured: about 38 ms of validation per ResearcherPage request). None of these implement
    `resolve`, so no field gets a middleware wrapper.
    """
    rules = [
        *QueryDepthLimiter(max_depth=settings.max_depth).validation_rules,
        *MaxAliasesLimiter(settings.max_aliases).validation_rules,
        MaxDirectivesRule,
    ]
    return [
        lambda: MaxTokensLimiter(settings.max_tokens),
        lambda: ParserCache(maxsize=CACHE_SIZE),
        lambda: AddValidationRules(rules),
        lambda: ValidationCache(maxsize=CACHE_SIZE),
        MaskUnexpectedErrors,
    ]
