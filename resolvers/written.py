"""A page's `nodes`, a paper's `authors` and `versions` selections, when PostgreSQL can write their answers
(db/queries/written.py).

Only a plain selection qualifies: fields of Paper, Authorship, Researcher, Institution and PaperVersion that are a
column, a global id, a slug, a value computed from columns alone (a paper's URLs) or `__typename`, without
arguments, directives or fragments, each response name once, at most one `authors`, `researcher` and
`institutions`. Anything else (a field with a resolver, such as a researcher's `hIndex` or a paper's `versions`) is
answered from rows, as before. The answer is written for one field node and only that node takes it (the
executor checks, schema/fast_executor/). What is made here is kept per field node, weakly: the parse cache gives
every request of a document the same nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar
from weakref import ref

from graphql import FieldNode, SelectionSetNode

from db.queries.written import PAPER_KEYS, AuthorsStatement, NodesStatement, PaperStatement, Shape, Value


def _columns(**fields: str) -> dict[str, Value]:
    return {name: Value("column", column) for name, column in fields.items()}


_LEAVES: Final[dict[str, dict[str, Value]]] = {
    "Paper": {
        "id": Value("global_id", "Paper"),
        **_columns(
            databaseId="id",
            arxivId="arxiv_id",
            version="version",
            slug="slug",
            title="title",
            abstract="abstract",
            authorsText="authors_text",
            categories="categories",
            primaryCategory="primary_category",
            published="published",
            updated="updated",
            absUrl="abs_url",
            pdfUrl="pdf_url",
            doi="doi",
            journalRef="journal_ref",
            comments="comments",
            license="license",
            withdrawn="withdrawn",
            modifiedAt="modified_at",
            citedByCount="cited_by_count",
            summary="summary",
            topics="topics",
            paperType="paper_type",
            researchField="research_field",
            novelty="novelty",
            significanceScore="significance_score",
            analysed="analysed",
            analysedAt="analysed_at",
            analysisModel="analysis_model",
        ),
    },
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
    "PaperVersion": {
        "version": Value("column", "version"),
        "submittedAt": Value("column", "submitted_at"),
        "sizeKb": Value("column", "size_kb"),
        "sourceType": Value("column", "source_type"),
    },
}
# The object fields written inside a type's answer: the field, the type it holds.
_NESTED: Final[dict[str, dict[str, str]]] = {
    "Paper": {"authors": "Authorship"},
    "Authorship": {"researcher": "Researcher", "institutions": "Institution"},
}


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
        elif name in _NESTED.get(type_name, {}) and name not in nested:
            nested.add(name)
            inner = _shape(s.selection_set, _NESTED[type_name][name])
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


@dataclass(frozen=True, eq=False, slots=True)
class NodesJson:
    """The statement writing a page's papers whole, for one `nodes` field node (held weakly)."""

    node: ref[FieldNode]
    statement: NodesStatement


_MAX_MADE: Final = 4096
_AUTHORS: dict[int, tuple[ref[FieldNode], AuthorsJson | None]] = {}
_NODES: dict[int, tuple[ref[FieldNode], NodesJson | None]] = {}
_PAPERS: dict[tuple[int, int], tuple[ref[FieldNode], ref[FieldNode] | None, PaperJson | None]] = {}

M = TypeVar("M")


def _made_once(
    made: dict[int, tuple[ref[FieldNode], M | None]], node: FieldNode, make: Callable[[], M | None]
) -> M | None:
    hit = made.get(id(node))
    if hit is not None and hit[0]() is node:
        return hit[1]
    value = make()
    if len(made) >= _MAX_MADE:
        made.clear()
    made[id(node)] = (ref(node), value)
    return value


def authors_json(node: FieldNode | None) -> AuthorsJson | None:
    """How a page's papers get this `authors` node's answers written; None when the selection does not qualify."""
    if node is None:
        return None

    def make() -> AuthorsJson | None:
        shape = _of(node, "Authorship")
        return AuthorsJson(ref(node), AuthorsStatement.of(shape)) if shape is not None else None

    return _made_once(_AUTHORS, node, make)


def nodes_json(node: FieldNode | None) -> NodesJson | None:
    """How a page's papers are written whole for this `nodes` node; None when the selection does not qualify."""
    if node is None:
        return None

    def make() -> NodesJson | None:
        shape = _of(node, "Paper")
        return NodesJson(ref(node), NodesStatement.of(shape)) if shape is not None else None

    return _made_once(_NODES, node, make)


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
    _PAPERS[key] = (ref(authors), ref(versions) if versions is not None else None, made)
    return made
