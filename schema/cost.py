"""What a document asks for, measured before it runs: depth, aliases, directives, breadth, nodes and cost.

One pass over the operation; each fragment is measured once and its figures reused at every spread,
so the time is linear in the document's size however its fragments nest (a chain of fragments that
each spread the next twice measures in microseconds instead of walking 2^n paths).

`nodeCount` follows GitHub's rule: for every connection or list field, its size (`first`, `limit`,
the number of `ids`, or the default) multiplied by the sizes of the lists above it. `cost` in points
is the number of calls the document needs (every connection or list field once per parent item,
aggregates by their weight; lists without a size argument are batched and count no call) divided by
100, rounded up, at least 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLField,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    ListValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    VariableNode,
    get_named_type,
    get_nullable_type,
)
from graphql.language import DocumentNode

# The page size a connection or list has when its size argument is not given (the resolvers' defaults).
DEFAULT_SIZES: Mapping[str, int] = {
    "Query.sitemap": 1000,
    "Query.autocomplete": 8,
    "Researcher.coauthors": 20,
    "Researcher.network": 100,
    "Institution.topResearchers": 10,
    "Paper.similarPapers": 10,
    "PaperSearchConnection.facets": 10,
    "Researcher.corrections": 10,
    "Viewer.corrections": 10,
}
DEFAULT_PAGE = 24
# Lists without a size argument: how many items they hold at most in practice (authors of a paper,
# institutions of an author, categories of a researcher).
LIST_ESTIMATES: Mapping[str, int] = {
    "Paper.authors": 10,
    "Authorship.institutions": 3,
    "Researcher.institutions": 5,
    "Researcher.fields": 20,
    "Institution.fields": 20,
    # A split names up to 100 papers; most corrections one paper, or two to ten profiles.
    "Correction.papers": 10,
    "Correction.researchers": 3,
    "CorrectionLogEntry.papers": 10,
    "CorrectionLogEntry.researchers": 3,
}
DEFAULT_LIST_ESTIMATE = 10
# Calls that cost more than one plain page: each counts as this many (docs/partners/edge.md, "Query cost").
WEIGHTS: Mapping[str, int] = {
    "Researcher.network": 10,  # a graph walk; depth 2 counts 5 times this (below)
    "Researcher.coauthors": 5,
    "Query.search": 10,
    "Paper.similarPapers": 5,
    "Query.autocomplete": 3,
    "Institution.topResearchers": 2,
}
NETWORK_DEPTH_2_FACTOR = 5
# Fields that read one aggregate statement per object: the first of them in a selection counts this much.
STATS_FIELDS: Mapping[str, frozenset[str]] = {
    "Researcher": frozenset(
        {"hIndexInArchive", "metrics", "authorPositions", "fields", "mostCitedPaper", "citationSummary"}
    ),
    "Institution": frozenset({"fields"}),
}
STATS_WEIGHT = 5
SIZE_ARGUMENTS = ("first", "last", "limit")
# Lists inside a sized container take the container's size (a connection's nodes and edges).
CONTAINER_LISTS = frozenset({"nodes", "edges", "entries"})


@dataclass(slots=True)
class Figures:
    """Figures of one selection set, as if its parent were a single object."""

    depth: int = 0  # nested selection levels below it (a leaf field is 0, as Strawberry's depth rule counts)
    aliases: int = 0
    directives: int = 0
    same_name: int = 0  # most selections sharing one response name in any one selection set
    spreads: int = 0  # most fragment spreads in any one selection set (graphql-core compares every pair)
    fields: int = 0  # field selections with every fragment spread expanded (what a naive walk visits)
    nodes: int = 0
    calls: int = 0

    def add(self, other: Figures, times: int = 1) -> None:
        self.depth = max(self.depth, other.depth)
        self.aliases += other.aliases
        self.directives += other.directives
        self.same_name = max(self.same_name, other.same_name)
        self.spreads = max(self.spreads, other.spreads)
        self.fields += other.fields
        self.nodes += other.nodes * times
        self.calls += other.calls * times


FIGURE_CAP = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Measure:
    """The figures of the operation that will run."""

    depth: int
    aliases: int
    directives: int
    same_name: int
    spreads: int
    fields: int
    node_count: int
    calls: int
    # The variables the figures read (page sizes, ids, depth): the same values give the same figures.
    variables: frozenset[str] = frozenset()

    @property
    def cost(self) -> int:
        return max(1, math.ceil(self.calls / 100))


class _Measurer:
    def __init__(self, schema: GraphQLSchema, document: DocumentNode, variables: Mapping[str, Any]) -> None:
        self.schema = schema
        self.variables = variables
        self.fragments = {d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)}
        self.memo: dict[str, Figures] = {}
        # Response names at each fragment's top level (through its own spreads), with their counts.
        self.top_names: dict[str, dict[str, int]] = {}
        self.in_progress: set[str] = set()
        self.read: set[str] = set()

    def fragment(self, name: str) -> Figures:
        done = self.memo.get(name)
        if done is not None:
            return done
        definition = self.fragments.get(name)
        if definition is None or name in self.in_progress:
            return Figures()  # unknown or cyclic: validation reports it; nothing to measure
        self.in_progress.add(name)
        parent = self.schema.get_type(definition.type_condition.name.value)
        names: dict[str, int] = {}
        figures = self.selection_set(definition.selection_set, parent, container_size=None, names=names)
        figures.directives += len(definition.directives or ())
        self.in_progress.discard(name)
        self.memo[name] = figures
        self.top_names[name] = names
        return figures

    def selection_set(
        self,
        selection_set: SelectionSetNode,
        parent: GraphQLNamedType | None,
        *,
        container_size: int | None,
        names: dict[str, int] | None = None,
    ) -> Figures:
        """`names` collects the response names selected at this level, through inline fragments and spreads
        (GraphQL merges them into one set of fields): given, the caller's level continues here."""
        total = Figures()
        own_level = names is None
        names = {} if names is None else names
        spreads = 0
        stats_counted = False
        for selection in selection_set.selections:
            total.directives += len(selection.directives or ())
            if isinstance(selection, FieldNode):
                key = selection.alias.value if selection.alias else selection.name.value
                names[key] = names.get(key, 0) + 1
                if selection.alias is not None:
                    total.aliases += 1
                figures = self.field(selection, parent, container_size)
                figures.fields += 1
                if (
                    not stats_counted
                    and parent is not None
                    and selection.name.value in STATS_FIELDS.get(parent.name, ())
                ):
                    stats_counted = True
                    figures.calls += STATS_WEIGHT
                total.add(figures)
            elif isinstance(selection, InlineFragmentNode):
                condition = selection.type_condition
                inner = self.schema.get_type(condition.name.value) if condition else parent
                inline = self.selection_set(selection.selection_set, inner, container_size=container_size, names=names)
                total.add(inline)
            elif isinstance(selection, FragmentSpreadNode):
                spreads += 1
                total.add(self.fragment(selection.name.value))
                for key, count in self.top_names.get(selection.name.value, {}).items():
                    names[key] = names.get(key, 0) + count
        if names and own_level:
            total.same_name = max(total.same_name, max(names.values()))
        total.spreads = max(total.spreads, spreads)
        return total

    def field(self, node: FieldNode, parent: GraphQLNamedType | None, container_size: int | None) -> Figures:
        name = node.name.value
        definition = _field(parent, name)
        if node.selection_set is None:
            return Figures()
        if definition is None or name.startswith("__"):
            # Unknown (validation reports it) or introspection (bounded by its own rule): structure only.
            inner = self.selection_set(node.selection_set, None, container_size=None)
            inner.depth = 0 if name.startswith("__") else inner.depth + 1
            inner.nodes = inner.calls = 0
            return inner
        assert parent is not None
        qualified = f"{parent.name}.{name}"
        return_type = get_nullable_type(definition.type)
        is_list = isinstance(return_type, GraphQLList)
        size = self.size(node, qualified, definition)
        child_type = get_named_type(definition.type)
        own = Figures()
        if is_list and container_size is not None and name in CONTAINER_LISTS:
            # A connection's nodes/edges: counted (and called) by the connection itself.
            times = container_size
            inner = self.selection_set(node.selection_set, child_type, container_size=None)
        elif size is not None and not is_list:
            # A sized container (a connection, a network, a sitemap page): one call, `size` items below.
            own.nodes, own.calls = size, self.weight(qualified, node)
            times = 1
            inner = self.selection_set(node.selection_set, child_type, container_size=size)
        elif is_list:
            # A list without a size argument (a paper's authors) is loaded in one batch with its siblings:
            # its items count as nodes, not as calls (GitHub counts calls for connections only).
            items = size if size is not None else LIST_ESTIMATES.get(qualified, DEFAULT_LIST_ESTIMATE)
            own.nodes = items
            own.calls = self.weight(qualified, node) if size is not None or qualified in WEIGHTS else 0
            times = items
            inner = self.selection_set(node.selection_set, child_type, container_size=None)
        else:
            times = 1
            inner = self.selection_set(node.selection_set, child_type, container_size=None)
            if qualified in WEIGHTS:
                own.calls += self.weight(qualified, node)
        own.add(inner, times)
        own.depth = inner.depth + 1
        return own

    def weight(self, qualified: str, node: FieldNode) -> int:
        weight = WEIGHTS.get(qualified, 1)
        if qualified == "Researcher.network" and self.int_argument(node, "depth") == 2:
            weight *= NETWORK_DEPTH_2_FACTOR
        return weight

    def size(self, node: FieldNode, qualified: str, definition: GraphQLField) -> int | None:
        """The size argument's value (a literal or a variable), else its default; None when unsized."""
        for arg in SIZE_ARGUMENTS:
            if arg in definition.args:
                value = self.int_argument(node, arg)
                if value is not None:
                    return max(value, 0)
                return DEFAULT_SIZES.get(qualified, DEFAULT_PAGE)
        if "ids" in definition.args:
            return self.list_length(node, "ids")
        return DEFAULT_SIZES.get(qualified)

    def argument(self, node: FieldNode, name: str) -> object:
        for arg in node.arguments or ():
            if arg.name.value == name:
                value = arg.value
                if isinstance(value, VariableNode):
                    self.read.add(value.name.value)
                    return self.variables.get(value.name.value)
                return value
        return None

    def int_argument(self, node: FieldNode, name: str) -> int | None:
        value = self.argument(node, name)
        if isinstance(value, IntValueNode):
            try:
                return int(value.value)
            except ValueError:
                return None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)  # JSON's 100.0: GraphQL takes it as the Int 100
        return None

    def list_length(self, node: FieldNode, name: str) -> int:
        value = self.argument(node, name)
        if isinstance(value, ListValueNode):
            return len(value.values)
        if isinstance(value, list):
            return len(value)
        return 1


def _field(parent: GraphQLNamedType | None, name: str) -> GraphQLField | None:
    if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
        found: GraphQLField | None = parent.fields.get(name)
        return found
    return None


def select_operation(document: DocumentNode, operation_name: str | None) -> OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if operation_name is None:
        return operations[0] if len(operations) == 1 else None
    return next((o for o in operations if o.name is not None and o.name.value == operation_name), None)


def measure(
    schema: GraphQLSchema,
    document: DocumentNode,
    *,
    operation_name: str | None = None,
    variables: Mapping[str, Any] | None = None,
) -> Measure:
    """The figures of the operation `operation_name` selects (all operations when it selects none)."""
    measurer = _Measurer(schema, document, variables or {})
    chosen = select_operation(document, operation_name)
    operations = [chosen] if chosen else [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    total = Figures()
    for operation in operations:
        root = schema.get_root_type(operation.operation)
        figures = measurer.selection_set(operation.selection_set, root, container_size=None)
        figures.directives += len(operation.directives or ())
        total.add(figures)
    # Fragments no operation spreads still count for directives and aliases (they are in the document).
    for name in measurer.fragments:
        if name not in measurer.memo:
            unused = measurer.fragment(name)
            total.aliases += unused.aliases
            total.directives += unused.directives
    # Figures past a GraphQL Int say "far too much" as well as the exact product would, and stay printable
    # (JSON, `RateLimit`'s Int fields) however many lists of 2^31 a document nests.
    cap = FIGURE_CAP
    return Measure(
        depth=min(total.depth, cap),
        aliases=min(total.aliases, cap),
        directives=min(total.directives, cap),
        same_name=min(total.same_name, cap),
        spreads=min(total.spreads, cap),
        fields=min(total.fields, cap),
        node_count=min(total.nodes, cap),
        calls=min(total.calls, cap * 100),
        variables=frozenset(measurer.read),
    )
