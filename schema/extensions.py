"""The schema extensions every request runs through, as factories (no state shared between requests).

`DocumentGuard` does, in order: parse (cached for small documents), the document's limits (depth,
aliases, directives, repeated fields: one linear pass, before any other validation rule can take
quadratic time), validation (cached), undeclared variables, nodes and cost (before any SQL), then
the client's rate limit, which it charges with the cost; `rateLimit(dryRun: true)` stops there. An
operation it lets through is then routed to its server (schema/routing.py), with replicas configured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from graphql import (
    ASTValidationRule,
    BooleanValueNode,
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    VariableNode,
    specified_rules,
)
from graphql.language import DocumentNode
from graphql.validation import NoSchemaIntrospectionCustomRule
from strawberry.extensions import SchemaExtension
from strawberry.schema.schema import validate_document
from strawberry.types import ExecutionResult

from edge.ratelimit import Decision
from schema import routing
from schema.cost import Measure, measure, select_operation
from schema.document_cache import DocumentCache
from schema.errors import MaskUnexpectedErrors
from settings import Settings
from telemetry.metrics import count_rejection

# Text of the documents kept parsed and validated, per process (their ASTs take about 50 times this).
CACHE_TEXT_BYTES = 1_000_000
# Selections sharing one response name in one selection set: graphql-core compares every pair of them.
MAX_SAME_NAME = 20
# Fragment spreads in one selection set: graphql-core compares every pair of them too (180 took 350 ms).
MAX_SPREADS = 50
MAX_DIRECTIVES = 50
# Refusals counted in wovepaper_requests_rejected_total (the document limits' codes).
COUNTED_REFUSALS = frozenset(
    {
        "QUERY_TOO_COMPLEX",
        "QUERY_TOO_DEEP",
        "TOO_MANY_ALIASES",
        "TOO_MANY_DIRECTIVES",
        "TOO_MANY_FIELDS",
        "TOO_MANY_FRAGMENTS",
    }
)
# Field selections once every fragment spread is expanded (the contract's largest operation has about 110).
MAX_FIELDS = 2000


def coded(error: GraphQLError, code: str, **figures: object) -> GraphQLError:
    error.extensions = {**(error.extensions or {}), "code": code, **figures}
    return error


@dataclass(frozen=True, slots=True)
class Limits:
    max_tokens: int
    max_depth: int
    max_aliases: int
    max_nodes: int
    max_cost: int
    introspection: bool

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            max_tokens=settings.max_tokens,
            max_depth=settings.max_depth,
            max_aliases=settings.max_aliases,
            max_nodes=settings.max_nodes,
            max_cost=settings.max_cost,
            introspection=settings.introspection,
        )

    def structure_errors(self, m: Measure) -> list[GraphQLError]:
        """The limits a document breaks whatever its variables' values."""
        errors = []
        if m.depth > self.max_depth:
            message = f"The operation is {m.depth} levels deep; at most {self.max_depth} are allowed."
            errors.append(coded(GraphQLError(message), "QUERY_TOO_DEEP", depth=m.depth, maxDepth=self.max_depth))
        if m.aliases > self.max_aliases:
            message = f"{m.aliases} aliases found; at most {self.max_aliases} are allowed."
            errors.append(
                coded(GraphQLError(message), "TOO_MANY_ALIASES", aliases=m.aliases, maxAliases=self.max_aliases)
            )
        if m.directives > MAX_DIRECTIVES:
            message = f"{m.directives} directives found; at most {MAX_DIRECTIVES} are allowed."
            errors.append(coded(GraphQLError(message), "TOO_MANY_DIRECTIVES", directives=m.directives))
        if m.fields > MAX_FIELDS:
            message = (
                f"The document expands to {m.fields} field selections through its fragments; "
                f"at most {MAX_FIELDS} are allowed."
            )
            errors.append(coded(GraphQLError(message), "TOO_MANY_FIELDS", fields=m.fields, maxFields=MAX_FIELDS))
        if m.spreads > MAX_SPREADS:
            message = f"{m.spreads} fragment spreads in one selection; at most {MAX_SPREADS} are allowed."
            errors.append(coded(GraphQLError(message), "TOO_MANY_FRAGMENTS", spreads=m.spreads))
        if m.same_name > MAX_SAME_NAME:
            message = f"A field is selected {m.same_name} times in one selection; at most {MAX_SAME_NAME} are allowed."
            errors.append(coded(GraphQLError(message), "TOO_MANY_FIELDS", repeated=m.same_name))
        return errors

    def cost_errors(self, m: Measure) -> list[GraphQLError]:
        if m.node_count <= self.max_nodes and m.cost <= self.max_cost:
            return []
        message = (
            f"The query may return {m.node_count} nodes and costs {m.cost} points; at most {self.max_nodes} "
            f"nodes and {self.max_cost} points are allowed. Ask for smaller pages (`first`) or fewer nested lists."
        )
        return [
            coded(
                GraphQLError(message),
                "QUERY_TOO_COMPLEX",
                cost=m.cost,
                nodeCount=m.node_count,
                maxCost=self.max_cost,
                maxNodes=self.max_nodes,
            )
        ]


@dataclass(frozen=True, slots=True)
class QueryCost:
    """What the resolvers see of the measure (`rateLimit`)."""

    cost: int
    node_count: int


@dataclass(frozen=True, slots=True)
class Caches:
    """Per schema, shared by its requests."""

    parsed: DocumentCache[DocumentNode]
    validated: DocumentCache[list[GraphQLError]]
    # Per document: its measure by operation name and the values of the variables it read.
    measured: DocumentCache[dict[bytes, Measure]]

    @classmethod
    def create(cls) -> Caches:
        return cls(DocumentCache(CACHE_TEXT_BYTES), DocumentCache(CACHE_TEXT_BYTES), DocumentCache(CACHE_TEXT_BYTES))

    def measure(self, ec: Any, document: DocumentNode) -> Measure:
        """The document's measure; computed once per document and values of the variables it reads."""
        variables = ec.variables or {}
        query = ec.query
        by_values = self.measured.get(query) if query is not None else None
        names = next(iter(by_values.values())).variables if by_values else frozenset()
        key = _measure_key(ec.operation_name, names, variables)
        found = by_values.get(key) if by_values and key is not None else None
        if found is not None:
            return found
        m = measure(ec.schema._schema, document, operation_name=ec.operation_name, variables=variables)
        key = _measure_key(ec.operation_name, m.variables, variables)
        if query is not None and key is not None:
            if by_values is None:
                self.measured.put(query, {key: m})
            elif len(by_values) < MEASURES_PER_DOCUMENT and next(iter(by_values.values())).variables == m.variables:
                by_values[key] = m
        return m


MEASURES_PER_DOCUMENT = 64


def _measure_key(operation_name: str | None, names: frozenset[str], variables: dict[str, Any]) -> bytes | None:
    try:
        return orjson.dumps([operation_name, *((n, variables.get(n)) for n in sorted(names))])
    except TypeError:
        return None


class DocumentGuard(SchemaExtension):
    def __init__(
        self, limits: Limits, rules: tuple[type[ASTValidationRule], ...], caches: Caches, *, routes: bool = False
    ) -> None:
        self.limits = limits
        self.rules = rules
        self.caches = caches
        self.measure: Measure | None = None
        # With replicas configured: an operation it lets through is routed (schema/routing.py) before it executes.
        self.routes = routes

    def on_parse(self) -> Iterator[None]:
        ec = self.execution_context
        query = ec.query
        if query is not None and ec.graphql_document is None:
            ec.graphql_document = self.caches.parsed.get(query)
        ec.parse_options["max_tokens"] = self.limits.max_tokens
        yield
        if ec.pre_execution_errors:
            for error in ec.pre_execution_errors:
                too_many = "Document contains more than" in error.message
                coded(error, "TOO_MANY_TOKENS" if too_many else "GRAPHQL_PARSE_FAILED")
        elif query is not None and ec.graphql_document is not None:
            self.caches.parsed.put(query, ec.graphql_document)

    def on_validate(self) -> Iterator[None]:
        ec = self.execution_context
        document = ec.graphql_document
        assert document is not None
        schema = ec.schema._schema
        m = self.caches.measure(ec, document)
        self.measure = m
        errors = self.limits.structure_errors(m)
        if not errors:
            query = ec.query or ""
            cached = self.caches.validated.get(query) if ec.query is not None else None
            if cached is None:
                found = validate_document(schema, document, self.rules)
                cached = [coded(e, "GRAPHQL_VALIDATION_FAILED") for e in found]
                if ec.query is not None:
                    self.caches.validated.put(query, cached)
            errors = list(cached)
        if not errors:
            errors = undeclared_variables(document, ec.operation_name, ec.variables)
        if not errors:
            errors = self.limits.cost_errors(m)
        # Set before Strawberry's own validation step, which then does nothing.
        ec.pre_execution_errors = errors
        if errors and errors[0].extensions and errors[0].extensions.get("code") in COUNTED_REFUSALS:
            count_rejection(str(errors[0].extensions["code"]))
        yield

    async def on_execute(self) -> AsyncIterator[None]:
        ec = self.execution_context
        context = ec.context
        m = self.measure
        if m is not None and context is not None:
            context.cost = QueryCost(m.cost, m.node_count)
            budget = getattr(context, "budget", None)
            dry_run = is_dry_run(ec.graphql_document, ec.operation_name, ec.variables)
            if budget is not None:
                # Once per request: an operation run again (after a lost connection) is not charged twice.
                decision = budget.decision or await budget.charge(0 if dry_run else m.cost)
                if not decision.allowed:
                    count_rejection("RATE_LIMITED")
                    ec.result = ExecutionResult(data=None, errors=[rate_limited(decision)])
                    response = getattr(context, "response", None)
                    if response is not None:
                        response.status_code = 429
                        response.headers["retry-after"] = str(decision.retry_after)
            if dry_run and ec.result is None and ec.graphql_document is not None:
                ec.graphql_document = only_rate_limit(ec.graphql_document, ec.operation_name)
        writes = self.routes and await routing.route(ec)
        yield
        if writes:
            await routing.wrote(ec)
        result = ec.result
        if result is not None and result.data is None:
            # Variables that do not coerce to their declared types: graphql-core reports them before any field
            # runs, without a code; they are the caller's input.
            for error in result.errors or ():
                if error.path is None and error.message.startswith("Variable '$") and not error.extensions:
                    coded(error, "BAD_USER_INPUT")


def rate_limited(decision: Decision) -> GraphQLError:
    message, figures = decision.refusal()
    return coded(GraphQLError(message), "RATE_LIMITED", **figures)


def undeclared_variables(
    document: DocumentNode, operation_name: str | None, variables: dict[str, Any] | None
) -> list[GraphQLError]:
    if not variables:
        return []
    operation = select_operation(document, operation_name)
    if operation is None:
        return []
    declared = {d.variable.name.value for d in operation.variable_definitions or ()}
    extra = sorted(set(variables) - declared)
    if not extra:
        return []
    names = ", ".join(f"${name}" for name in extra[:5])
    return [coded(GraphQLError(f"Variables not declared by the operation: {names}."), "BAD_USER_INPUT")]


def _rate_limit_fields(operation: OperationDefinitionNode) -> list[FieldNode]:
    return [s for s in operation.selection_set.selections if isinstance(s, FieldNode) and s.name.value == "rateLimit"]


def is_dry_run(document: DocumentNode | None, operation_name: str | None, variables: dict[str, Any] | None) -> bool:
    operation = select_operation(document, operation_name) if document is not None else None
    if operation is None:
        return False
    for field in _rate_limit_fields(operation):
        for arg in field.arguments or ():
            if arg.name.value != "dryRun":
                continue
            value = arg.value
            if isinstance(value, BooleanValueNode) and value.value:
                return True
            if isinstance(value, VariableNode) and (variables or {}).get(value.name.value) is True:
                return True
    return False


def only_rate_limit(document: DocumentNode, operation_name: str | None) -> DocumentNode:
    """The document with the operation cut down to its `rateLimit` fields: a dry run executes nothing else."""
    operation = select_operation(document, operation_name)
    assert operation is not None
    selection_set = operation.selection_set.__class__(selections=tuple(_rate_limit_fields(operation)))
    cut = OperationDefinitionNode(
        operation=operation.operation,
        name=operation.name,
        variable_definitions=operation.variable_definitions,
        directives=operation.directives,
        selection_set=selection_set,
    )
    return DocumentNode(definitions=tuple(cut if d is operation else d for d in document.definitions))


def default_extensions(settings: Settings) -> list[Callable[[], SchemaExtension]]:
    """The guard (which also routes reads to replicas, when configured), then masking. Neither implements `resolve`, so
    no field gets a middleware wrapper.

    The validation rules are built once: the validation cache is keyed by the document only.
    """
    limits = Limits.from_settings(settings)
    rules: tuple[type[ASTValidationRule], ...] = tuple(specified_rules)
    if not limits.introspection:
        rules = (*rules, NoSchemaIntrospectionCustomRule)
    caches = Caches.create()
    routes = bool(settings.replica_dsns)
    return [lambda: DocumentGuard(limits, rules, caches, routes=routes), MaskUnexpectedErrors]
