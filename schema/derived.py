"""Fields a GraphQL type derives from its row: global ids, URLs.

The rows (db/queries/*) hold what the database holds; how the API presents them (a global id names a GraphQL
type, an arXiv URL) is the types' business. A derived field is a synchronous function of the row alone, marked
so that the FastExecutor reads it like an attribute (schema/fast_executor/).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol, TypeVar

import strawberry

from db.paging import encode_global_id, entity_global_id, paper_global_id

R = TypeVar("R")
T = TypeVar("T")

DERIVED: Final = {"derived": True}
NODE_ID_DOC: Final = "Opaque global id; stable, but not meant to be taken apart."


def derived(
    resolver: Callable[[R], T], *, name: str | None = None, description: str | None = None, graphql_type: Any = None
) -> T:
    """A field computed from the row by `resolver` (which takes the row and nothing else)."""
    return strawberry.field(
        resolver=resolver, name=name, description=description, graphql_type=graphql_type, metadata=DERIVED
    )


class HasId(Protocol):
    @property
    def id(self) -> int: ...


class HasArxivId(Protocol):
    @property
    def arxiv_id(self) -> str: ...


class NamesEntity(Protocol):
    """A change or a sitemap entry: it names a paper (by arXiv id), a researcher or an institution."""

    @property
    def kind(self) -> str: ...
    @property
    def id(self) -> int: ...
    @property
    def arxiv_id(self) -> str | None: ...


def researcher_node_id(root: HasId) -> strawberry.ID:
    return strawberry.ID(encode_global_id("Researcher", root.id))


def institution_node_id(root: HasId) -> strawberry.ID:
    return strawberry.ID(encode_global_id("Institution", root.id))


def paper_node_id(root: HasArxivId) -> strawberry.ID:
    return strawberry.ID(paper_global_id(root.arxiv_id))


def entity_node_id(root: NamesEntity) -> strawberry.ID:
    """The global id of the paper, researcher or institution a change or a sitemap entry names."""
    return strawberry.ID(entity_global_id(root.kind, root.id, root.arxiv_id))
