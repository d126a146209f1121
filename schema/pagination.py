"""Pieces every connection shares."""

from __future__ import annotations

from typing import Any, cast

import strawberry

from resolvers.pagination import Connection


@strawberry.type(description="Where this page sits in its list.")
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None = strawberry.field(description="Cursor of the first item on this page.")
    end_cursor: str | None = strawberry.field(description="Pass as `after` to get the next page.")
    page: int | None = strawberry.field(description="The page number, when paging with `page`.")


def total_count(root: Connection[Any]) -> int:
    # An int, or an awaitable when the query's shape hid totalCount from the lookahead.
    return cast(int, root.count_total())


def total_pages(root: Connection[Any]) -> int:
    return cast(int, root.count_pages())


TOTAL_COUNT_DOC = "How many items the whole list holds (all pages)."
TOTAL_PAGES_DOC = "How many pages of `first` items the list holds."
NESTED_NULL = (
    " Null, with an error at this field, when one of its arguments is malformed: the object's other fields still "
    "answer."
)
