"""Which documents' responses may be shared: one query operation, named, selecting no viewer-specific field;
and what an entry of one needs to know (its lookups by id, whether any write may change it)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from graphql import (
    FieldNode,
    OperationDefinitionNode,
    OperationType,
    VariableDefinitionNode,
    VariableNode,
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


def document_hash(document: str) -> str:
    return hashlib.sha256(document.encode()).hexdigest()


class _FieldNames(Visitor):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def enter_field(self, node: FieldNode, *_: object) -> None:
        self.names.add(node.name.value)


def cacheable_operation(document: str) -> CacheableOperation | None:
    """The cache entry's description for one document, or None when its responses may not be shared."""
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
    for field in roots:
        for arg in field.arguments or ():
            if field.name.value in LOOKUP_FIELDS and arg.name.value == "id" and isinstance(arg.value, VariableNode):
                key = field.alias.value if field.alias else field.name.value
                lookups.append(Lookup(key, field.name.value, arg.value.name.value))
    return CacheableOperation(
        op.name.value, document, document_hash(document), is_list, tuple(op.variable_definitions or ()), tuple(lookups)
    )


def cacheable_operations(documents: Iterable[str]) -> list[CacheableOperation]:
    return [op for op in map(cacheable_operation, documents) if op is not None]
