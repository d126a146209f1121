"""The public GraphQL schema: `build_schema()`.

Query is merged from one query class per module (QUERY_TYPES); a module that adds root fields defines
its own `@strawberry.type class XQuery` and appends it there.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import strawberry
from graphql import OperationType as CoreOperationType
from graphql.error import GraphQLError
from graphql.language import OperationDefinitionNode, parse
from strawberry.extensions import SchemaExtension
from strawberry.schema.config import StrawberryConfig
from strawberry.schema.schema import StrawberryGraphQLCoreExecutionContext
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext, ExecutionResult
from strawberry.types.graphql import OperationType

from db.pool import connection_budget
from resolvers.context import Context
from schema import argument_conversion
from schema.arguments import check_arguments_everywhere
from schema.changes import ChangesQuery
from schema.chat import ChatMutation
from schema.corrections import CorrectionMutation
from schema.errors import RETRYABLE_CODES, ErrorCode, is_unexpected
from schema.extension_hooks import ExtensionsRunner
from schema.extensions import default_extensions
from schema.fast_executor import FastExecutor
from schema.follows import FollowMutation
from schema.institution import Institution, InstitutionQuery
from schema.node import NodeQuery
from schema.paper import Paper, PaperQuery
from schema.path import PathQuery
from schema.rate_limit import RateLimitQuery
from schema.researcher import Researcher, ResearcherQuery
from schema.search import SearchQuery
from schema.viewer import ViewerQuery
from settings import Settings, get_settings
from telemetry.metrics import DB_RETRIES, count_rejection

QUERY_TYPES: list[type] = [
    NodeQuery,
    PaperQuery,
    ResearcherQuery,
    InstitutionQuery,
    PathQuery,
    SearchQuery,
    ViewerQuery,
    ChangesQuery,
    RateLimitQuery,
]
# Mutation is merged the same way from MUTATION_TYPES; the schema has no Mutation type while it is empty.
MUTATION_TYPES: list[type] = [FollowMutation, ChatMutation, CorrectionMutation]
NODE_TYPES: list[type] = [Paper, Researcher, Institution]


class Schema(strawberry.Schema):
    async def execute(
        self,
        query: str | None,
        variable_values: dict[str, Any] | None = None,
        context_value: Any | None = None,
        root_value: Any | None = None,
        operation_name: str | None = None,
        allowed_operation_types: Iterable[OperationType] | None = None,
        operation_extensions: dict[str, Any] | None = None,
    ) -> ExecutionResult:
        """Strawberry's execute, within the request's connection budget; a read that lost its database
        connection (a restart, a failover, a terminated backend) runs once more on fresh connections."""
        context = context_value if isinstance(context_value, Context) else None
        per_request = context.settings.pool_max_per_request if context is not None else None
        state = context.state if context is not None else None
        args = (query, variable_values, context_value, root_value, operation_name, allowed_operation_types)
        with connection_budget(per_request or 1_000_000) as budget:
            if state is not None:
                # The request's figures, for its log line and metrics (telemetry/requests.py).
                state.stats = budget.stats
            result = await super().execute(*args, operation_extensions=operation_extensions)
            if "SERVICE_UNAVAILABLE" in _codes(result) and _is_query(query, operation_name):
                if context is not None:
                    context.renew()
                DB_RETRIES.inc()
                # A restart takes a few hundred milliseconds: retrying at once would meet it still going on.
                await asyncio.sleep(LOST_CONNECTION_RETRY_DELAY_S)
                result = await super().execute(*args, operation_extensions=operation_extensions)
        codes = _codes(result)
        retryable = codes & RETRYABLE_CODES
        if retryable:
            for code in sorted(retryable):
                count_rejection(code)
            response = context.response if context is not None else None
            if response is not None:
                response.status_code = 503
                response.headers["Retry-After"] = str(RETRY_AFTER_S)
        if state is not None:
            state.operation = operation_name or _first_operation_name(query)
            state.error_codes = sorted(codes)
        return result

    def create_extensions_runner(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension]
    ) -> ExtensionsRunner:
        return ExtensionsRunner(execution_context=execution_context, extensions=extensions)

    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        # Expected errors (bad input, not found, validation) are the caller's business, not the log's;
        # unexpected ones are logged with their request id where they are masked.
        return None


LOST_CONNECTION_RETRY_DELAY_S = 0.25
# What a 503 asks the client to wait: about what a restarted PostgreSQL takes to accept connections again.
RETRY_AFTER_S = 1


# The first operation's name, past what GraphQL ignores before it: white space, commas and comments (the site's
# documents open with a comment naming their page). Possessive: a client's `###...` cannot make it backtrack.
_OPERATION_NAME = re.compile(r"^(?:[\s,\ufeff]|#[^\n\r]*+)*+(?:query|mutation|subscription)\s+([_A-Za-z][_0-9A-Za-z]*)")


def _codes(result: ExecutionResult) -> set[str]:
    return {str((e.extensions or {}).get("code", "GRAPHQL_VALIDATION_FAILED")) for e in result.errors or ()}


def _first_operation_name(query: str | None) -> str | None:
    match = _OPERATION_NAME.match(query or "")
    return match.group(1) if match else None


def _is_query(query: str | None, operation_name: str | None) -> bool:
    """Whether the operation run is a query (safe to run again); parsed again only on this rare path."""
    if not query:
        return False
    try:
        document = parse(query)
    except GraphQLError:
        return False
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    chosen = [o for o in operations if operation_name is None or (o.name and o.name.value == operation_name)]
    return len(chosen) == 1 and chosen[0].operation is CoreOperationType.QUERY


def executor_class(settings: Settings) -> type[Any]:
    """The FastExecutor, or Strawberry's own execution when WOVEPAPER_FAST_EXECUTOR is off."""
    return FastExecutor if settings.fast_executor else StrawberryGraphQLCoreExecutionContext


def build_schema(
    settings: Settings | None = None,
    *,
    extra_query_types: Sequence[type] = (),
    extensions: Sequence[Callable[[], SchemaExtension] | type[SchemaExtension]] | None = None,
    execution_context_class: type[Any] | None = None,
) -> Schema:
    settings = settings or get_settings()
    argument_conversion.install()
    check_arguments_everywhere([*QUERY_TYPES, *extra_query_types, *MUTATION_TYPES, *NODE_TYPES])
    query = merge_types("Query", (*QUERY_TYPES, *extra_query_types))
    mutation = merge_types("Mutation", tuple(MUTATION_TYPES)) if MUTATION_TYPES else None
    return Schema(
        query=query,
        mutation=mutation,
        types=[*NODE_TYPES, ErrorCode],
        extensions=list(extensions) if extensions is not None else default_extensions(settings),
        execution_context_class=execution_context_class or executor_class(settings),
        # Without introspection, "Did you mean ...?" would still spell the schema out field by field.
        config=StrawberryConfig(disable_field_suggestions=not settings.introspection),
    )


__all__ = ["MUTATION_TYPES", "QUERY_TYPES", "Schema", "build_schema", "executor_class", "is_unexpected"]
