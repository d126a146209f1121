"""The schema extensions every request runs through, as factories (no state shared between requests).

`DocumentGuard` does, in order: parse (cached for small documents), the operation to run (a document of several
operations needs `operationName`), the document's limits (depth, aliases, directives, repeated fields: one linear
pass, before any other validation rule can take quadratic time), validation (cached), undeclared variables, nodes
and cost (before any SQL), then the client's rate limit, which it charges with the cost; `rateLimit(dryRun: true)`
stops there. An operation that passed all of it is marked admitted in the request's state (`ADMITTED`), for the
steps before GraphQL that act only on documents that run (edge/persisted.py registers them), and routed to its
server (schema/routing.py), with replicas configured.

The errors it answers name the client's input and repeat at most MAX_MESSAGE_CHARS of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from graphql import (
    ASTValidationRule,
    BooleanValueNode,
    FieldNode,
    GraphQLError,
    OperationDefinitionNode,
    VariableNode,
    specified_rules,
)
from graphql.language import DocumentNode, FloatValueNode, IntValueNode
from graphql.validation import NoSchemaIntrospectionCustomRule
from strawberry.extensions import SchemaExtension
from strawberry.schema.exceptions import CannotGetOperationTypeError
from strawberry.schema.schema import validate_document
from strawberry.types import ExecutionResult

from bounded import BoundedCache
from request_types.rate import Decision
from resolvers.context import Context
from schema import routing
from schema.cost import Measure, measure, select_operation
from schema.errors import MaskUnexpectedErrors
from settings import Settings
from telemetry.metrics import count_rejection

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
# Characters of an error message about the client's input: graphql-core repeats the input whole (a 5,000-digit
# literal, a 900 KB variable).
MAX_MESSAGE_CHARS = 300


def bounded(error: GraphQLError) -> GraphQLError:
    """`error` with its message cut to MAX_MESSAGE_CHARS."""
    message = error.message
    if len(message) > MAX_MESSAGE_CHARS:
        error.message = f"{message[:MAX_MESSAGE_CHARS]}... ({len(message)} characters)"
    return error


def invalid_literal(error: GraphQLError) -> GraphQLError:
    """A validation error whose rule failed on a literal it could not read (a number literal of more digits than
    Python converts, 4,300): the document's fault, answered as any invalid value rather than masked as a bug."""
    node = error.nodes[0] if error.nodes else None
    if isinstance(node, IntValueNode | FloatValueNode):
        message = f"A number literal of {len(node.value)} characters is larger than any type here can hold."
    else:
        message = "A literal in the document cannot be read as a value of its type."
    return GraphQLError(message, nodes=error.nodes)


class OperationNameRequired(CannotGetOperationTypeError):
    """A document of several operations without `operationName` (GraphQL's GetOperation): a request error, which
    the view answers as a 400 BAD_REQUEST."""

    def __init__(self, operations: int) -> None:
        super().__init__(None)
        self.operations = operations

    def as_http_error_reason(self) -> str:
        return f"The document has {self.operations} operations: name the one to run in `operationName`."


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
    """Per schema, shared by its requests: what was learnt of the documents that ran (parsed and valid, and the
    measures of their operations by the sizes their variables give), kept only once a request has been charged, so
    a document or variables refused for their limits, cost or budget leave nothing (bounded/)."""

    documents: BoundedCache[str, DocumentNode]
    # The variables each operation's measure reads (in name order), and its measures by their values' sizes.
    reads: BoundedCache[tuple[str, str | None], tuple[str, ...]]
    measured: BoundedCache[tuple[str, str | None, tuple[object, ...]], Measure]

    @classmethod
    def create(cls) -> Caches:
        return cls(BoundedCache(DOCUMENTS_BYTES), BoundedCache(MEASURES_BYTES), BoundedCache(MEASURES_BYTES))

    def document(self, query: str | None) -> DocumentNode | None:
        """The parse of a document that ran before (it is valid): the same object each time."""
        return self.documents.get(query) if query is not None else None

    def remembered(self, ec: Any) -> Measure | None:
        """The measure of a document that ran before with variables of the same sizes (their values as the measure
        sees them: a number, a list's length, or neither), so that what a client sends adds nothing to its key."""
        query, operation_name = ec.query, ec.operation_name
        if query is not None:
            names = self.reads.get((query, operation_name))
            if names is not None:
                return self.measured.get((query, operation_name, sizes(names, ec.variables)))
        return None

    def measure(self, ec: Any, document: DocumentNode) -> Measure:
        """The document's measure: remembered (`remembered`), or worked out."""
        found = self.remembered(ec)
        if found is not None:
            return found
        return measure(ec.schema._schema, document, operation_name=ec.operation_name, variables=ec.variables or {})

    def keep(self, ec: Any, document: DocumentNode, m: Measure) -> None:
        """Remembers a document that ran, and its measure, once its request has been charged."""
        query, operation_name = ec.query, ec.operation_name
        if query is None or len(query) > MAX_DOCUMENT_CHARACTERS:
            return
        self.documents.put(query, document, len(query) * DOCUMENT_BYTES_PER_CHARACTER)
        names = tuple(sorted(m.variables))
        named = len(query) + len(operation_name or "")
        self.reads.put((query, operation_name), names, named + sum(len(n) + 60 for n in names))
        self.measured.put((query, operation_name, sizes(names, ec.variables)), m, named + MEASURE_BYTES)


# Documents kept parsed (and known valid), up to MAX_DOCUMENT_CHARACTERS each: the site's are 0.2 to 1.8 KB. An
# AST and the plans the executor hangs off it take about this many bytes per character of the document.
DOCUMENTS_BYTES = 16 * 1024 * 1024
MAX_DOCUMENT_CHARACTERS = 8 * 1024
DOCUMENT_BYTES_PER_CHARACTER = 100
# Measures kept (each cache of the two), and what one takes besides its key's text.
MEASURES_BYTES = 2 * 1024 * 1024
MEASURE_BYTES = 400


def sizes(names: tuple[str, ...], variables: dict[str, Any] | None) -> tuple[object, ...]:
    """What the measure reads of these variables (schema/cost.py): a number, a list's length, or nothing."""
    values = variables or {}
    return tuple(_size(values.get(name)) for name in names)


def _size(value: object) -> object:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, list):
        return ("items", len(value))
    return None


class DocumentGuard(SchemaExtension):
    def __init__(
        self, limits: Limits, rules: tuple[type[ASTValidationRule], ...], caches: Caches, *, routes: bool = False
    ) -> None:
        self.limits = limits
        self.rules = rules
        self.caches = caches
        self.measure: Measure | None = None
        # The document as parsed (a dry run cuts it down before it runs), and whether it ran before.
        self.document: DocumentNode | None = None
        self.known = False
        # Whether its measure was remembered too (nothing to keep once it runs).
        self.remembered = False
        # With replicas configured: an operation it lets through is routed (schema/routing.py) before it executes.
        self.routes = routes

    def on_parse(self) -> Iterator[None]:
        ec = self.execution_context
        if ec.graphql_document is None:
            ec.graphql_document = self.caches.document(ec.query)
            self.known = ec.graphql_document is not None
        ec.parse_options["max_tokens"] = self.limits.max_tokens
        yield
        if ec.pre_execution_errors:
            for error in ec.pre_execution_errors:
                too_many = "Document contains more than" in error.message
                coded(bounded(error), "TOO_MANY_TOKENS" if too_many else "GRAPHQL_PARSE_FAILED")
            return
        document = ec.graphql_document
        if document is None:
            return
        # Strawberry would run the first operation; GraphQL asks for a name. (The name the request gave is kept
        # apart by Strawberry: `operation_name` answers the first operation's when the request named none.)
        if ec._provided_operation_name is None:  # noqa: SLF001
            operations = sum(isinstance(d, OperationDefinitionNode) for d in document.definitions)
            if operations > 1:
                raise OperationNameRequired(operations)

    def on_validate(self) -> Iterator[None]:
        ec = self.execution_context
        document = self.document = ec.graphql_document
        assert document is not None
        schema = ec.schema._schema
        remembered = self.caches.remembered(ec)
        # A document and measure found are kept already (their reads moved them up): `on_execute` adds nothing.
        self.remembered = remembered is not None and self.known
        m = remembered if remembered is not None else self.caches.measure(ec, document)
        self.measure = m
        errors = self.limits.structure_errors(m)
        if not errors and not self.known:
            errors = [
                coded(bounded(e if _readable(e) else invalid_literal(e)), "GRAPHQL_VALIDATION_FAILED")
                for e in validate_document(schema, document, self.rules)
            ]
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
            charge = context.rate_charge if isinstance(context, Context) else None
            dry_run = is_dry_run(ec.graphql_document, ec.operation_name, ec.variables)
            allowed = True
            if charge is not None:
                # Once per request: an operation run again (after a lost connection) is not charged twice.
                decision = charge.decision or await charge.charge(0 if dry_run else m.cost)
                allowed = decision.allowed
                if not allowed:
                    count_rejection("RATE_LIMITED")
                    ec.result = ExecutionResult(data=None, errors=[rate_limited(decision)])
                    response = context.response if isinstance(context, Context) else None
                    if response is not None:
                        response.status_code = 429
                        response.headers["retry-after"] = str(decision.retry_after)
            if allowed and self.document is not None and not self.remembered:
                self.caches.keep(ec, self.document, m)
            if dry_run and ec.result is None and ec.graphql_document is not None:
                ec.graphql_document = only_rate_limit(ec.graphql_document, ec.operation_name)
        if ec.result is None and context is not None:
            _admit(context)
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
                    coded(bounded(error), "BAD_USER_INPUT")


def _readable(error: GraphQLError) -> bool:
    """A validation error of graphql-core's own making, as opposed to one wrapping an exception a rule met."""
    return error.original_error is None or isinstance(error.original_error, GraphQLError)


def _admit(context: Any) -> None:
    """Marks the request's operation admitted: it parsed, validated, fit the limits and its cost was charged."""
    if isinstance(context, Context) and context.state is not None:
        context.state.admitted = True


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
    return [coded(bounded(GraphQLError(f"Variables not declared by the operation: {names}.")), "BAD_USER_INPUT")]


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
