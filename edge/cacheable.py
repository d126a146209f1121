"""Which documents' responses may be shared: one query operation, named, selecting no viewer-specific field;
and what an entry of one needs to know (its lookups by id, whether any write may change it, where it shows a
researcher or an institution only by what names it)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLInterfaceType,
    GraphQLNamedType,
    GraphQLObjectType,
    GraphQLSchema,
    InlineFragmentNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    VariableDefinitionNode,
    VariableNode,
    get_named_type,
    parse,
    visit,
)
from graphql.language import Visitor

# Root fields whose result depends only on the entities it contains; any other root field (lists,
# paths, search) may change with any write, so its responses are dropped on every invalidation.
ENTITY_ROOT_FIELDS = frozenset({"paper", "researcher", "institution", "node", "nodes", "__typename"})
LOOKUP_FIELDS = frozenset({"paper", "researcher", "institution"})
# Fields whose value depends on who asks: an operation selecting one is never cached.
VIEWER_FIELDS = frozenset(
    {
        "viewer",
        "me",
        "isFollowed",
        "isFollowing",
        "following",
        "follows",
        "viewerIsFollowing",
        "viewerOwns",
        "followingInstitutions",
        "feedUrl",
        "rotateFeedToken",
    }
)
# Where an answer shows a researcher or an institution as part of another entity's data (a paper's authors, a
# researcher's affiliations), in an order that entity decides: there a selection of NAMING_FIELDS alone shows only
# what names it, and a change of its figures, papers or links changes nothing shown. Not a list ordered by figures
# (an institution's top researchers): where it stands there is a figure.
NAMED_IN: Final = frozenset(
    {("Authorship", "researcher"), ("Authorship", "institutions"), ("Affiliation", "institution")}
)
# What names a researcher or an institution: the columns behind them are those whose change drops its `name:` tag
# (db/records.py Touched).
NAMING_FIELDS: Final = {
    "Researcher": frozenset({"__typename", "id", "databaseId", "slug", "name"}),
    "Institution": frozenset({"__typename", "id", "databaseId", "slug", "rorId", "name", "country"}),
}
# Response keys down to each place an operation names entities only: `NAMED` at such a place, else a deeper level.
NamedPaths: TypeAlias = Mapping[str, "NamedPaths | bool"]
NAMED: Final = True
_WithFields = GraphQLObjectType | GraphQLInterfaceType


@dataclass(frozen=True, slots=True)
class Lookup:
    """A root `paper` / `researcher` / `institution` field and the variable holding the id it looks up."""

    response_key: str
    kind: str
    variable: str


@dataclass(frozen=True, slots=True)
class CacheableOperation:
    name: str
    document: str
    document_hash: str
    is_list: bool  # its result may change with any write (lists, paths), not only its entities'
    variable_definitions: tuple[VariableDefinitionNode, ...]
    lookups: tuple[Lookup, ...]
    named: NamedPaths = field(default_factory=dict)


def document_hash(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


class _FieldNames(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_field(self, node: FieldNode, *_: object) -> None:
        self.names.add(node.name.value)


def cacheable_operation(document: str, schema: GraphQLSchema | None = None) -> CacheableOperation | None:
    """The cache entry's description for one document, or None when its responses may not be shared. Without the
    `schema`, every entity it shows counts as shown in full."""
    doc = parse(document)
    operations = [d for d in doc.definitions if isinstance(d, OperationDefinitionNode)]
    if len(operations) != 1:
        return None
    op = operations[0]
    if op.operation is not OperationType.QUERY or op.name is None:
        return None
    names = _FieldNames()
    visit(doc, names)
    if names.names & VIEWER_FIELDS:
        return None
    roots = [s for s in op.selection_set.selections if isinstance(s, FieldNode)]
    is_list = len(roots) != len(op.selection_set.selections) or any(
        s.name.value not in ENTITY_ROOT_FIELDS for s in roots
    )
    lookups = []
    for root in roots:
        for arg in root.arguments or ():
            if root.name.value in LOOKUP_FIELDS and arg.name.value == "id" and isinstance(arg.value, VariableNode):
                key = root.alias.value if root.alias else root.name.value
                lookups.append(Lookup(key, root.name.value, arg.value.name.value))
    named: dict[str, NamedPaths | bool] = {}
    if schema is not None and schema.query_type is not None:
        fragments = {d.name.value: d for d in doc.definitions if isinstance(d, FragmentDefinitionNode)}
        _Shapes(schema, fragments).named_paths([(op.selection_set, schema.query_type)], named)
    return CacheableOperation(
        op.name.value,
        document,
        document_hash(document),
        is_list,
        tuple(op.variable_definitions or ()),
        tuple(lookups),
        named,
    )


def cacheable_operations(documents: Iterable[str], schema: GraphQLSchema | None = None) -> list[CacheableOperation]:
    return [op for op in (cacheable_operation(d, schema) for d in documents) if op is not None]


_Selected: TypeAlias = dict[str, list[tuple[FieldNode, GraphQLNamedType]]]


@dataclass(frozen=True, slots=True)
class _Shapes:
    """An operation's selections as the response merges them, typed by the schema."""

    schema: GraphQLSchema
    fragments: Mapping[str, FragmentDefinitionNode]

    def named_paths(
        self, selections: Sequence[tuple[SelectionSetNode, GraphQLNamedType]], into: dict[str, NamedPaths | bool]
    ) -> None:
        """Fills `into` with the response keys under these selection sets that lead to places naming entities
        only (NAMED_IN, NAMING_FIELDS): a key is such a place when every field the response merges under it is."""
        by_key: _Selected = {}
        for selection_set, parent in selections:
            self.collect(selection_set, parent, by_key, frozenset())
        for key, fields in by_key.items():
            below: list[tuple[SelectionSetNode, GraphQLNamedType]] = []
            named = True
            for node, parent in fields:
                defined = parent.fields.get(node.name.value) if isinstance(parent, _WithFields) else None
                if defined is None or node.selection_set is None:
                    named = False
                    continue
                of_type = get_named_type(defined.type)
                below.append((node.selection_set, of_type))
                named = named and (parent.name, node.name.value) in NAMED_IN and self.names_only(node, of_type)
            if named and below:
                into[key] = NAMED
            elif below:
                deeper: dict[str, NamedPaths | bool] = {}
                self.named_paths(below, deeper)
                if deeper:
                    into[key] = deeper

    def names_only(self, node: FieldNode, of_type: GraphQLNamedType) -> bool:
        allowed = NAMING_FIELDS.get(of_type.name)
        if allowed is None or node.selection_set is None:
            return False
        shown: _Selected = {}
        self.collect(node.selection_set, of_type, shown, frozenset())
        return all(f.name.value in allowed and f.selection_set is None for fs in shown.values() for f, _ in fs)

    def collect(
        self, selection_set: SelectionSetNode, parent: GraphQLNamedType, into: _Selected, seen: frozenset[str]
    ) -> None:
        """The fields of a selection set by response key, through fragments, each with the type it is selected on.
        `@skip` and `@include` are not evaluated: a field that may be shown counts as shown."""
        for selection in selection_set.selections:
            if isinstance(selection, FieldNode):
                key = selection.alias.value if selection.alias else selection.name.value
                into.setdefault(key, []).append((selection, parent))
            elif isinstance(selection, InlineFragmentNode):
                on = self.condition(selection.type_condition.name.value if selection.type_condition else None, parent)
                self.collect(selection.selection_set, on, into, seen)
            elif isinstance(selection, FragmentSpreadNode) and selection.name.value not in seen:
                fragment = self.fragments.get(selection.name.value)
                if fragment is not None:
                    on = self.condition(fragment.type_condition.name.value, parent)
                    self.collect(fragment.selection_set, on, into, seen | {selection.name.value})

    def condition(self, type_name: str | None, parent: GraphQLNamedType) -> GraphQLNamedType:
        found = self.schema.get_type(type_name) if type_name is not None else None
        return found if found is not None else parent
