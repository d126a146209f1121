"""A paper's `authors` selection, when PostgreSQL can write its answer (db/queries/authors_json.py).

Only a plain selection qualifies: fields of Authorship, Researcher and Institution that are a column, a global id,
a slug or `__typename`, without arguments, directives or fragments, each response name once, at most one
`researcher` and one `institutions`. Anything else (a field with a resolver, such as a researcher's `hIndex`) is
answered from rows, as before. What is made here is kept per field node, weakly: the parse cache gives every
request of a document the same nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from weakref import ref

from graphql import FieldNode, SelectionSetNode

from db.queries.authors_json import AuthorsStatement, Shape, Value

_LEAVES: Final[dict[str, dict[str, Value]]] = {
    "Authorship": {
        "position": Value("column", "position"),
        "name": Value("column", "name"),
        "affiliation": Value("column", "affiliation"),
        "isCollaboration": Value("column", "is_collaboration"),
    },
    "Researcher": {
        "id": Value("global_id", "Researcher"),
        "databaseId": Value("column", "id"),
        "slug": Value("column", "slug"),
        "name": Value("column", "name"),
    },
    "Institution": {
        "id": Value("global_id", "Institution"),
        "databaseId": Value("column", "id"),
        "slug": Value("column", "slug"),
        "rorId": Value("column", "ror_id"),
        "name": Value("column", "name"),
        "country": Value("column", "country"),
    },
}
# Authorship's object fields: the field, the type it holds.
_NESTED: Final = {"researcher": "Researcher", "institutions": "Institution"}


@dataclass(frozen=True, eq=False, slots=True)
class AuthorsJson:
    """The statement writing the answer of one `authors` field node."""

    node: FieldNode
    statement: AuthorsStatement


def _shape(selection_set: SelectionSetNode | None, type_name: str) -> Shape | None:
    if selection_set is None:
        return None
    leaves = _LEAVES[type_name]
    fields: list[tuple[str, Value]] = []
    keys: set[str] = set()
    nested: set[str] = set()
    for s in selection_set.selections:
        if not isinstance(s, FieldNode) or s.directives or s.arguments:
            return None
        key = s.alias.value if s.alias else s.name.value
        name = s.name.value
        if key in keys:
            return None
        keys.add(key)
        if name == "__typename":
            fields.append((key, Value("constant", type_name)))
        elif name in leaves and s.selection_set is None:
            fields.append((key, leaves[name]))
        elif type_name == "Authorship" and name in _NESTED and name not in nested:
            nested.add(name)
            inner = _shape(s.selection_set, _NESTED[name])
            if inner is None:
                return None
            fields.append((key, Value(name, shape=inner)))
        else:
            return None
    return Shape(tuple(fields))


_MADE: dict[int, tuple[ref[FieldNode], AuthorsJson | None]] = {}
_MAX_MADE: Final = 4096


def authors_json(node: FieldNode | None) -> AuthorsJson | None:
    """The statement for this `authors` node's answer; None when the selection does not qualify."""
    if node is None:
        return None
    hit = _MADE.get(id(node))
    if hit is not None and hit[0]() is node:
        return hit[1]
    shape = None if node.directives or node.arguments else _shape(node.selection_set, "Authorship")
    made = AuthorsJson(node, AuthorsStatement.of(shape)) if shape is not None else None
    if len(_MADE) >= _MAX_MADE:
        _MADE.clear()
    _MADE[id(node)] = (ref(node), made)
    return made
