"""Where the layers meet: rows hold data, the GraphQL types present it, and mypy sees every step.

The schema declares what Python value each field holds (a row) and, separately, the GraphQL type it is shown as
(`graphql_type=`), so no `cast` hides a mismatch; these tests check what mypy cannot: that every plain field of a
type is an attribute of the rows shown as it.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from strawberry.types.base import get_object_definition

from db.queries.aggregates import FieldCountRow
from db.queries.changes import ChangeRow
from db.queries.chat import ConversationRow, MessageRow
from db.queries.institutions import AffiliationRow, InstitutionRow
from db.queries.papers import AuthorshipRow, PaperRow, VersionRow
from db.queries.researchers import ResearcherRow
from db.queries.sitemap import SitemapRow
from resolvers import pagination
from resolvers.chat import ChatAnswerView
from resolvers.pagination import Connection, Edge
from resolvers.path import PathResult
from resolvers.search import SearchConnection, SearchEdge, SearchFacetsView, SuggestionView
from resolvers.sitemap import SitemapPageResult
from schema import build_schema
from schema.aggregates import FieldCount
from schema.changes import Change
from schema.chat import ChatAnswer, ChatPaper, Conversation, ConversationConnection, ConversationMessage
from schema.fast_executor.plan import BASIC, static_plan
from schema.institution import Institution, InstitutionConnection
from schema.pagination import PageInfo
from schema.paper import Authorship, Paper, PaperConnection, PaperEdge, PaperVersion
from schema.path import PathResolution, SitemapEntry, SitemapPage
from schema.researcher import Affiliation, ExternalIds, Researcher, ResearcherConnection
from schema.search import PaperSearchConnection, PaperSearchEdge, SearchFacets, Suggestion

ROOT = Path(__file__).resolve().parents[2]

# Each GraphQL type and the Python values resolvers hand it.
SHOWN_AS: list[tuple[type, type]] = [
    (Paper, PaperRow),
    (Researcher, ResearcherRow),
    (Institution, InstitutionRow),
    (Authorship, AuthorshipRow),
    (PaperVersion, VersionRow),
    (ExternalIds, ResearcherRow),
    (Affiliation, AffiliationRow),
    (FieldCount, FieldCountRow),
    (Change, ChangeRow),
    (SitemapEntry, SitemapRow),
    (SitemapPage, SitemapPageResult),
    (PathResolution, PathResult),
    (ChatPaper, PaperRow),
    (ChatAnswer, ChatAnswerView),
    (ConversationMessage, MessageRow),
    (Conversation, ConversationRow),
    (Suggestion, SuggestionView),
    (SearchFacets, SearchFacetsView),
    (PaperConnection, Connection),
    (ResearcherConnection, Connection),
    (InstitutionConnection, Connection),
    (ConversationConnection, Connection),
    (PaperSearchConnection, SearchConnection),
    (PaperEdge, Edge),
    (PaperSearchEdge, SearchEdge),
    (PageInfo, pagination.PageInfo),
]


def _attributes(cls: type) -> set[str]:
    names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    return names | {n for n in dir(cls) if not n.startswith("_")}


@pytest.mark.parametrize(("graphql_type", "row"), SHOWN_AS, ids=lambda t: getattr(t, "__name__", ""))
def test_plain_fields_are_attributes_of_the_rows(graphql_type: type, row: type) -> None:
    definition = get_object_definition(graphql_type, strict=True)
    plain = [f.python_name for f in definition.fields if f.base_resolver is None]
    missing = [name for name in plain if name not in _attributes(row)]
    assert not missing, f"{graphql_type.__name__} reads {missing} that {row.__name__} does not have"


@pytest.mark.parametrize("row", [PaperRow, ResearcherRow, InstitutionRow, ChangeRow, SitemapRow])
def test_rows_carry_no_graphql_presentation(row: type) -> None:
    # A global id names a GraphQL type, an arXiv URL is how a paper is shown: the types derive them.
    assert not {"node_id", "abs_url", "pdf_url", "arxiv_doi", "ror_url"} & set(dir(row))


def _sources(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def test_no_cast_where_the_layers_meet() -> None:
    found = []
    for path in _sources("schema", "resolvers"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "cast":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found


def _function_imports(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("resolvers", "schema"):
                    found.append((node.lineno, node.module or ""))
    return found


def test_no_import_inside_a_function_works_around_a_cycle() -> None:
    found = {
        str(path.relative_to(ROOT)): imports
        for path in _sources("schema", "resolvers")
        if (imports := _function_imports(ast.parse(path.read_text())))
    }
    assert not found


def test_info_is_defined_once() -> None:
    definitions = [
        str(path.relative_to(ROOT))
        for path in _sources("schema", "resolvers")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign) and "Info[" in ast.unparse(node.value)
    ]
    assert definitions == ["resolvers/context.py"]


def test_conn_is_defined_once_in_db() -> None:
    definitions = [
        str(path.relative_to(ROOT))
        for path in _sources("db", "resolvers", "chat")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "Conn" for t in node.targets)
    ]
    assert definitions == ["db/connection.py"]


def _field_def(type_name: str, field_name: str) -> Any:
    graphql_type = build_schema()._schema.get_type(type_name)  # the graphql-core schema
    return graphql_type.fields[field_name]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("type_name", "field_name"),
    [("Paper", "id"), ("Paper", "absUrl"), ("Paper", "pdfUrl"), ("Researcher", "id"), ("Institution", "id")],
)
def test_derived_fields_stay_on_the_fast_path(type_name: str, field_name: str) -> None:
    kind, getter, _ = static_plan(_field_def(type_name, field_name))
    assert kind == BASIC and getter is not None
