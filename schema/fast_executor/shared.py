"""Field collections and their plans, shared by every request of a document.

graphql-core collects a field's sub-selection (fragments spread, fields merged by response name) once per request,
and the executor plans the collected fields once per request too; on a page of one object (a paper's page) that is
a tenth of the request's CPU. Parsed documents are cached, so the same field nodes come back with every request of
a document: what they collect to is remembered by those nodes' identities, as long as no variable can change it
(a document without directives and fragment arguments). Entries keep their nodes alive, so an id is never reused
while its entry is here; the tables are emptied when they grow past their bound (documents leave the parse cache).
"""

from __future__ import annotations

from typing import Any, Final

from graphql import DirectiveNode, FragmentSpreadNode, Node, OperationDefinitionNode, visit
from graphql.execution.collect_fields import CollectedFields, FieldDetailsList
from graphql.language import Visitor

MAX_ENTRIES: Final = 20_000

# By the operation node's id: (the node, whether its collections are the same whatever the variables).
_STATIC: dict[int, tuple[OperationDefinitionNode, bool]] = {}
# By (type, field nodes' ids): (the nodes, the collection).
_COLLECTED: dict[tuple[Any, ...], tuple[tuple[Any, ...], CollectedFields]] = {}
# By a shared grouped field set's id: (the set, its plan).
PLANS: dict[int, tuple[object, tuple[list[Any], bool] | None]] = {}


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


def is_static(operation: OperationDefinitionNode, fragments: dict[str, Any]) -> bool:
    """Whether the operation's collections are the same for any variables (its own directives do not count)."""
    hit = _STATIC.get(id(operation))
    if hit is not None and hit[0] is operation:
        return hit[1]
    static = not _finds(operation.selection_set) and not any(
        _finds(getattr(f, "definition", f)) for f in fragments.values()
    )
    if len(_STATIC) >= MAX_ENTRIES:
        _STATIC.clear()
    _STATIC[id(operation)] = (operation, static)
    return static


def collected(return_type: Any, field_details_list: FieldDetailsList) -> tuple[tuple[Any, ...], CollectedFields | None]:
    """The key of this collection, and the collection when another request made it."""
    nodes = tuple(fd.node for fd in field_details_list)
    key = (return_type, *map(id, nodes))
    hit = _COLLECTED.get(key)
    return (nodes, hit[1]) if hit is not None else (nodes, None)


def remember(return_type: Any, nodes: tuple[Any, ...], collection: CollectedFields) -> None:
    """Share a collection; its grouped field set's plan is shared too, once made (`PLANS` holds None until then)."""
    if len(_COLLECTED) >= MAX_ENTRIES:
        _COLLECTED.clear()
        PLANS.clear()
    _COLLECTED[(return_type, *map(id, nodes))] = (nodes, collection)
    grouped = collection.grouped_field_set
    PLANS[id(grouped)] = (grouped, None)
