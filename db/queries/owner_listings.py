"""A researcher's or an institution's papers by date, and their count, from the owner's listing (migration 0028).

`researcher_papers` and `institution_papers` hold each (owner, published, paper id) once, with the paper's
withdrawal, kept by triggers. A page whose filter is at most the withdrawn filter, sorted by date, takes its ids
from the owner's listing in the index's order (25 rows read, not the 195,853 papers of the largest institution
sorted), then reads those papers whole; its count is an index-only count of the listing. Any other page takes the
generic statements (db/filters.py, owners_page).
"""

from __future__ import annotations

from collections.abc import Sequence

from db.filters import OWNER_FILTERS, PAPER_FILTERS, Clause, Fragment, Sort, owner_keys
from db.keys import keyed

# The owner conditions that have a listing: (table, its owner column).
_LISTINGS = (
    (OWNER_FILTERS["researcher"], ("researcher_papers", "researcher_id")),
    (OWNER_FILTERS["institution"], ("institution_papers", "institution_id")),
)
_DIRECTION = {"NEWEST": "DESC", "OLDEST": "ASC"}
_WITHDRAWN = ((PAPER_FILTERS["not_withdrawn"], "NOT l.withdrawn"), (PAPER_FILTERS["withdrawn"], "l.withdrawn"))


def _listing(owner: Fragment, clauses: Sequence[Clause]) -> tuple[str, str, str] | None:
    """(table, owner column, condition) when the owner has a listing and the clauses are at most a withdrawn
    filter."""
    listing = next((found for fragment, found in _LISTINGS if fragment is owner), None)
    if listing is None or len(clauses) > 1:
        return None
    if not clauses:
        return (*listing, "true")
    condition = next((sql for fragment, sql in _WITHDRAWN if fragment is clauses[0].fragment), None)
    return None if condition is None else (*listing, condition)


def page_statement(
    owner: Fragment,
    owner_ids: Sequence[int],
    clauses: Sequence[Clause],
    sort: Sort,
    *,
    columns: str,
    limit: int,
    offset: int,
    inner: str | None = None,
    joins: str = "",
    count: bool = False,
) -> tuple[str, list[object]] | None:
    """The page of papers (`columns` over `p`) of each owner, or None when the listing cannot serve it. `inner`: the
    columns of the papers read (default `columns`) when `columns` read more than they, through `joins` (run for
    the page's rows only). `count`: each row carries its owner's count as `listed_total` (the page and its count
    in one round trip)."""
    listing = _listing(owner, clauses)
    direction = _DIRECTION.get(sort.name)
    if listing is None or direction is None:
        return None
    table, column, condition = listing
    total = _count(table, column, condition) if count else None
    sql, keys = keyed(
        f"SELECT k.*, {columns} FROM {owner_keys(total)}"
        f" CROSS JOIN LATERAL (SELECT {inner or columns} FROM papers p WHERE p.id = ANY (ARRAY("
        f"SELECT l.paper_id FROM {table} l WHERE l.{column} = k.owner_id AND {condition}"
        f" ORDER BY l.published {direction}, l.paper_id {direction} LIMIT $2 OFFSET $3))) p {joins}"
        f" ORDER BY k.ord, {sort.order_by}",
        owner_ids,
    )
    return sql, [keys, limit, offset]


def count_statement(
    owner: Fragment, owner_ids: Sequence[int], clauses: Sequence[Clause]
) -> tuple[str, list[object]] | None:
    """Each owner's number of papers, or None when the listing cannot count them."""
    listing = _listing(owner, clauses)
    if listing is None:
        return None
    table, column, condition = listing
    sql, keys = keyed(f"SELECT k.owner_id, {_count(table, column, condition)} FROM {{keys}} AS k(owner_id)", owner_ids)
    return sql, [keys]


def _count(table: str, column: str, condition: str) -> str:
    """An owner's papers in its listing, index-only (`k.owner_id`: the owner)."""
    return f"(SELECT count(*) FROM {table} l WHERE l.{column} = k.owner_id AND {condition})"
