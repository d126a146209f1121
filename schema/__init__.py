"""The public GraphQL schema: `build_schema()`.

Query is merged from one query class per module (QUERY_TYPES); a module that adds root fields defines
its own `@strawberry.type class XQuery` and appends it there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import strawberry
from graphql.error import GraphQLError
from strawberry.extensions import SchemaExtension
from strawberry.tools import merge_types
from strawberry.types import ExecutionContext

from schema.arguments import check_arguments_everywhere
from schema.changes import ChangesQuery
from schema.errors import ErrorCode, is_unexpected
from schema.extensions import default_extensions
from schema.fast_executor import FastExecutor
from schema.institution import Institution, InstitutionQuery
from schema.node import NodeQuery
from schema.paper import Paper, PaperQuery
from schema.path import PathQuery
from schema.researcher import Researcher, ResearcherQuery
from schema.search import SearchQuery
from schema.viewer import ViewerQuery
from settings import Settings, get_settings

QUERY_TYPES: list[type] = [
    NodeQuery,
    PaperQuery,
    ResearcherQuery,
    InstitutionQuery,
    PathQuery,
    SearchQuery,
    ViewerQuery,
    ChangesQuery,
]
# Mutation is merged the same way from MUTATION_TYPES; the schema has no Mutation type while it is empty.
MUTATION_TYPES: list[type] = []
NODE_TYPES: list[type] = [Paper, Researcher, Institution]


class Schema(strawberry.Schema):
    def process_errors(self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None) -> None:
        # Expected errors (bad input, not found, validation) are the caller's business, not the log's;
        # unexpected ones are logged with their request id where they are masked.
        return None


def build_schema(
    settings: Settings | None = None,
    *,
    extra_query_types: Sequence[type] = (),
    extensions: Sequence[Callable[[], SchemaExtension] | type[SchemaExtension]] | None = None,
    execution_context_class: type[Any] | None = None,
) -> Schema:
    settings = settings or get_settings()
    check_arguments_everywhere([*QUERY_TYPES, *extra_query_types, *MUTATION_TYPES, *NODE_TYPES])
    query = merge_types("Query", (*QUERY_TYPES, *extra_query_types))
    mutation = merge_types("Mutation", tuple(MUTATION_TYPES)) if MUTATION_TYPES else None
    return Schema(
        query=query,
        mutation=mutation,
        types=[*NODE_TYPES, ErrorCode],
        extensions=list(extensions) if extensions is not None else default_extensions(settings),
        execution_context_class=execution_context_class or FastExecutor,
    )


__all__ = ["MUTATION_TYPES", "QUERY_TYPES", "Schema", "build_schema", "is_unexpected"]
