"""A paper's `authors` and `versions` selections, and a page's `nodes` of papers, when PostgreSQL can write their
answers (db/queries/written.py).

Only a plain selection qualifies: fields of Authorship, Researcher, Institution and PaperVersion that are a column,
a global id, a slug or `__typename`, without arguments, directives or fragments, each response name once, at most
one `researcher` and one `institutions`; for a page's papers, the Paper's column fields and URLs, `__typename` and
one such `authors`, through fragments on Paper. Anything else (a field with a resolver, such as a researcher's
`hIndex`) is answered from rows, as before. The answer is written for one field node and only that node takes it (the
executor checks, schema/fast_executor/). What is made here is kept per field node, weakly: the parse cache gives
every request of a document the same nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from weakref import ref

from graphql import FieldNode, FragmentDefinitionNode, FragmentSpreadNode, InlineFragmentNode, SelectionSetNode

from bounded import forget
from db.queries.written import PAPER_KEYS, AuthorsStatement, NodesStatement, PaperStatement, Shape, Value

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
        "claimed": Value("column", "claimed"),
    },
    "Institution": {
        "id": Value("global_id", "Institution"),
        "databaseId": Value("column", "id"),
        "slug": Value("column", "slug"),
        "rorId": Value("column", "ror_id"),
        "name": Value("column", "name"),
        "country": Value("column", "country"),
    },
    "PaperVersion": {
        "version": Value("column", "version"),
        "submittedAt": Value("column", "submitted_at"),
        "sizeKb": Value("column", "size_kb"),
        "sourceType": Value("column", "source_type"),
    },
}
# A paper's leaves: the field, its value in db/queries/written._PAPER.
_PAPER_LEAVES: Final = {
    "id": "node_id",
    "databaseId": "id",
    "arxivId": "arxiv_id",
    "version": "version",
    "slug": "slug",
    "title": "title",
    "abstract": "abstract",
    "authorsText": "authors_text",
    "categories": "categories",
    "primaryCategory": "primary_category",
    "published": "published",
    "updated": "updated",
    "absUrl": "abs_url",
    "pdfUrl": "pdf_url",
    "doi": "doi",
    "journalRef": "journal_ref",
    "comments": "comments",
    "license": "license",
    "withdrawn": "withdrawn",
    "modifiedAt": "modified_at",
    "citedByCount": "cited_by_count",
    "summary": "summary",
    "topics": "topics",
    "paperType": "paper_type",
    "researchField": "research_field",
    "novelty": "novelty",
    "significanceScore": "significance_score",
    "analysed": "analysed",
    "analysedAt": "analysed_at",
    "analysisModel": "analysis_model",
}
# Authorship's object fields: the field, the type it holds.
_NESTED: Final = {"researcher": "Researcher", "institutions": "Institution"}


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


def _of(node: FieldNode | None, type_name: str) -> Shape | None:
    if node is None or node.directives or node.arguments:
        return None
    return _shape(node.selection_set, type_name)


def _paper_fields(
    selection_set: SelectionSetNode | None, fragments: Mapping[str, FragmentDefinitionNode], seen: set[str]
) -> list[FieldNode] | None:
    """The fields a Paper's selection asks for, through fragments on Paper; None for anything else (directives, a
    fragment on another type, a spread met twice)."""
    if selection_set is None:
        return None
    found: list[FieldNode] = []
    for s in selection_set.selections:
        if s.directives:
            return None
        inner: list[FieldNode] | None
        if isinstance(s, FieldNode):
            found.append(s)
            continue
        if isinstance(s, InlineFragmentNode):
            if s.type_condition is not None and s.type_condition.name.value != "Paper":
                return None
            inner = _paper_fields(s.selection_set, fragments, seen)
        elif isinstance(s, FragmentSpreadNode):
            fragment = fragments.get(s.name.value)
            if fragment is None or s.name.value in seen or fragment.type_condition.name.value != "Paper":
                return None
            seen.add(s.name.value)
            inner = _paper_fields(fragment.selection_set, fragments, seen)
        else:
            return None
        if inner is None:
            return None
        found += inner
    return found


def _paper_shape(node: FieldNode, fragments: Mapping[str, FragmentDefinitionNode]) -> Shape | None:
    """The shape of a list's `nodes` of papers: leaves of _PAPER_LEAVES, `__typename`, and one plain `authors`.
    A response name asked twice must be the same leaf (GraphQL merges them; the first place holds)."""
    if node.directives or node.arguments:
        return None
    selected = _paper_fields(node.selection_set, fragments, set())
    if selected is None:
        return None
    fields: list[tuple[str, Value]] = []
    names: dict[str, str] = {}
    for s in selected:
        key, name = (s.alias.value if s.alias else s.name.value), s.name.value
        if s.arguments:
            return None
        if key in names:
            if names[key] != name or s.selection_set is not None or name == "authors":
                return None
            continue
        names[key] = name
        if name == "__typename":
            fields.append((key, Value("constant", "Paper")))
        elif name in _PAPER_LEAVES and s.selection_set is None:
            fields.append((key, Value("column", _PAPER_LEAVES[name])))
        elif name == "authors" and (authors := _shape(s.selection_set, "Authorship")) is not None:
            fields.append((key, Value("authors", shape=authors)))
        else:
            return None
    return Shape(tuple(fields))


@dataclass(frozen=True, eq=False, slots=True)
class NodesJson:
    """The statement writing a page's papers as the answers of one `nodes` field node (held weakly)."""

    node: ref[FieldNode]
    statement: NodesStatement


_NODES: dict[int, tuple[ref[FieldNode], NodesJson | None]] = {}


def nodes_json(node: FieldNode | None, fragments: Mapping[str, FragmentDefinitionNode]) -> NodesJson | None:
    """How a page's papers are written as this `nodes` node's answer; None when its selection does not qualify."""
    if node is None:
        return None
    hit = _NODES.get(id(node))
    if hit is not None and hit[0]() is node:
        return hit[1]
    shape = _paper_shape(node, fragments)
    made = NodesJson(ref(node), NodesStatement.of(shape)) if shape is not None else None
    if len(_NODES) >= _MAX_MADE:
        _NODES.clear()
    _NODES[id(node)] = (ref(node, forget(_NODES, id(node))), made)
    return made


@dataclass(frozen=True, eq=False, slots=True)
class AuthorsJson:
    """The statement writing a page's answers of one `authors` field node (held weakly, as here: the request that
    uses it holds its document)."""

    node: ref[FieldNode]
    statement: AuthorsStatement


@dataclass(frozen=True, eq=False, slots=True)
class PaperJson:
    """The statements reading one paper with its `authors` answer (and its `versions` answer, when that node
    qualifies too), by how the paper is named (db/queries/written.PAPER_KEYS)."""

    authors: ref[FieldNode]
    versions: ref[FieldNode] | None
    statements: dict[str, PaperStatement] = field(default_factory=dict)


_MAX_MADE: Final = 4096
_AUTHORS: dict[int, tuple[ref[FieldNode], AuthorsJson | None]] = {}
_PAPERS: dict[tuple[int, int], tuple[ref[FieldNode], ref[FieldNode] | None, PaperJson | None]] = {}


def authors_json(node: FieldNode | None) -> AuthorsJson | None:
    """How a page's papers get this `authors` node's answers written; None when the selection does not qualify."""
    if node is None:
        return None
    hit = _AUTHORS.get(id(node))
    if hit is not None and hit[0]() is node:
        return hit[1]
    shape = _of(node, "Authorship")
    made = AuthorsJson(ref(node), AuthorsStatement.of(shape)) if shape is not None else None
    if len(_AUTHORS) >= _MAX_MADE:
        _AUTHORS.clear()
    _AUTHORS[id(node)] = (ref(node, forget(_AUTHORS, id(node))), made)
    return made


def paper_json(authors: FieldNode | None, versions: FieldNode | None) -> PaperJson | None:
    """How one paper is read with these nodes' answers written; None when the `authors` selection does not
    qualify. `versions`: the paper's one `versions` node, if any (written when it qualifies)."""
    if authors is None:
        return None
    key = (id(authors), id(versions))
    hit = _PAPERS.get(key)
    if hit is not None and hit[0]() is authors and (hit[1]() if hit[1] is not None else None) is versions:
        return hit[2]
    authors_shape = _of(authors, "Authorship")
    versions_shape = _of(versions, "PaperVersion")
    made = None
    if authors_shape is not None:
        made = PaperJson(ref(authors), ref(versions) if versions is not None and versions_shape is not None else None)
        for kind in PAPER_KEYS:
            made.statements[kind] = PaperStatement.of(kind, authors_shape, versions_shape)
    if len(_PAPERS) >= _MAX_MADE:
        _PAPERS.clear()
    gone = forget(_PAPERS, key)
    _PAPERS[key] = (ref(authors, gone), ref(versions, gone) if versions is not None else None, made)
    return made
