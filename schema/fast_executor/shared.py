"""Field collections and their plans, shared by every request of a document.

graphql-core collects a field's sub-selection (fragments spread, fields merged by response name) once per request,
and the executor plans the collected fields once per request too; on a page of one object (a paper's page) that is
a tenth of the request's CPU. Parsed documents are cached, so the same nodes come back with every request of a
document: what they collect to is remembered by those nodes' identities, as long as no variable can change it (a
document without directives and fragment arguments). What is remembered hangs off the operation node by a weak
reference, so it lives exactly as long as the parsed document does (the parse cache's bound is its bound).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from weakref import finalize, ref

from graphql import DirectiveNode, FragmentSpreadNode, Node, OperationDefinitionNode, visit
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList
from graphql.language import Visitor


@dataclass(slots=True)
class Shared:
    """One operation's collections, by (type, field nodes' ids), and the plans of their grouped field sets, by the
    set's id (None until made). The entries hold their nodes and sets, so an id is not reused while it is here."""

    collected: dict[tuple[Any, ...], tuple[tuple[Any, ...], CollectedFields]] = field(default_factory=dict)
    plans: dict[int, tuple[object, Any]] = field(default_factory=dict)

    def collected_for(self, return_type: Any, fdl: FieldDetailsList) -> tuple[tuple[Any, ...], CollectedFields | None]:
        """The field nodes of `fdl`, and what another request collected them to (None: not yet)."""
        nodes = tuple(fd.node for fd in fdl)
        hit = self.collected.get((return_type, *map(id, nodes)))
        return (nodes, hit[1]) if hit is not None else (nodes, None)

    def remember(self, return_type: Any, nodes: tuple[Any, ...], collection: CollectedFields) -> None:
        self.collected[(return_type, *map(id, nodes))] = (nodes, collection)
        grouped = collection.grouped_field_set
        self.plans[id(grouped)] = (grouped, None)


# By the operation node's id (nodes compare and hash by content, so not by the node itself): a weak reference to
# it and its Shared, or None when variables can change its collections. The entry goes when the node does.
_BY_OPERATION: dict[int, tuple[ref[OperationDefinitionNode], Shared | None]] = {}


class _Variable(Visitor):
    """Finds what lets variables change a collection: a directive (`@include`, `@skip`, `@defer`...) or a
    fragment spread with arguments."""

    found = False

    def enter_directive(self, node: DirectiveNode, *_: object) -> Any:
        self.found = True
        return self.BREAK

    def enter_fragment_spread(self, node: FragmentSpreadNode, *_: object) -> Any:
        if getattr(node, "arguments", None):
            self.found = True
            return self.BREAK
        return None


def _finds(node: Node) -> bool:
    visitor = _Variable()
    visit(node, visitor)
    return visitor.found


def for_operation(operation: OperationDefinitionNode, fragments: dict[str, Any]) -> Shared | None:
    """The operation's shared collections; None when variables can change them (its own directives do not count)."""
    key = id(operation)
    entry = _BY_OPERATION.get(key)
    if entry is not None and entry[0]() is operation:
        return entry[1]
    static = not _finds(operation.selection_set) and not any(
        _finds(getattr(f, "definition", f)) for f in fragments.values()
    )
    shared = Shared() if static else None
    _BY_OPERATION[key] = (ref(operation), shared)
    finalize(operation, _BY_OPERATION.pop, key, None)
    return shared
