"""Pieces every connection shares."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Protocol

import strawberry

from schema.derived import derived


@strawberry.type(description="Where this page sits in its list.")
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None = strawberry.field(description="Cursor of the first item on this page.")
    end_cursor: str | None = strawberry.field(description="Pass as `after` to get the next page.")
    page: int | None = strawberry.field(description="The page number, when paging with `page`.")


class Counted(Protocol):
    """A page that knows (or can count) the length of its whole list."""

    def count_total(self) -> int | Awaitable[int]: ...
    def count_pages(self) -> int | Awaitable[int]: ...


def total_count(root: Counted) -> int | Awaitable[int]:
    # An int, or an awaitable when the query's shape hid totalCount from the lookahead.
    return root.count_total()


def total_pages(root: Counted) -> int | Awaitable[int]:
    return root.count_pages()


TOTAL_COUNT_DOC = "How many items the whole list holds (all pages)."
TOTAL_PAGES_DOC = "How many pages of `first` items the list holds."
NESTED_NULL = (
    " Null, with an error at this field, when one of its arguments is malformed: the object's other fields still "
    "answer."
)


# Derived: the FastExecutor reads a count the page already holds like an attribute, without a resolver call and its
# argument conversion; a count still to be made (an awaitable) goes through graphql-core.
def total_count_field() -> Any:
    return derived(total_count, graphql_type=int, description=TOTAL_COUNT_DOC)


def total_pages_field() -> Any:
    return derived(total_pages, graphql_type=int, description=TOTAL_PAGES_DOC)
