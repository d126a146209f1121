"""A category's papers by date, and its count, without reading the category (migration 0015).

`paper_categories` holds (category, published, paper id) for every listed paper (not withdrawn, cross-lists
included) and `category_counts` their number per category, both kept by triggers on `papers`. A list whose
filter is just a category (with the default withdrawn filter), sorted by date, reads its page from the
index in the list's order: a numbered page in the first half of the category from the front, one in the
second half from the back (the last page costs what the first does), a cursor page from the cursor on.
Its `totalCount` is one row of `category_counts`, read by the page's statement when it is asked for with the page.
Any other list takes the generic statements.
"""

from __future__ import annotations

from collections.abc import Sequence

from db.filters import PAPER_FILTERS, Clause, Sort

# The sorts the index serves: its direction read forwards from the list's first page.
_DIRECTION = {"NEWEST": "DESC", "OLDEST": "ASC"}
_REVERSE = {"DESC": "ASC", "ASC": "DESC"}
_AFTER = {"DESC": "(pc.published, pc.paper_id) < ($2::timestamptz, $3::bigint)",
          "ASC": "(pc.published, pc.paper_id) > ($2::timestamptz, $3::bigint)"}  # fmt: skip


def listed_category(clauses: Sequence[Clause]) -> str | None:
    """The category, when the clauses are exactly the default withdrawn filter and one category."""
    if len(clauses) != 2:
        return None
    withdrawn, category = clauses
    if withdrawn.fragment is not PAPER_FILTERS["not_withdrawn"] or category.fragment is not PAPER_FILTERS["category"]:
        return None
    value = category.args[0]
    return value if isinstance(value, str) else None


COUNT_SQL = "SELECT coalesce((SELECT c.papers FROM category_counts c WHERE c.category = $1::text), 0)"


def count_statement(clauses: Sequence[Clause]) -> tuple[str, list[object]] | None:
    category = listed_category(clauses)
    return None if category is None else (COUNT_SQL, [category])


def _ids(direction: str, where: str, limit: str, offset: str) -> str:
    return (
        f"SELECT pc.paper_id FROM paper_categories pc WHERE pc.category = $1::text{where}"
        f" ORDER BY pc.published {direction}, pc.paper_id {direction} LIMIT {limit} OFFSET {offset}"
    )


def _numbered(columns: str, sort: Sort, direction: str, joins: str, count: bool) -> str:
    # $1 category, $2 limit, $3 offset. Rows [offset, offset + limit) of the list are, read from the other end,
    # rows [total - offset - limit, total - offset): the second half of a category is read from the back.
    # The two branches' one-time filters leave only one of them running.
    back = _REVERSE[direction]
    front_ids = _ids(direction, "", "$2::bigint", "$3::bigint")
    back_ids = _ids(
        back, "", "least($2::bigint, greatest(n.total - $3::bigint, 0))",
        "greatest(n.total - $3::bigint - $2::bigint, 0)",
    )  # fmt: skip
    return f"""
WITH n AS MATERIALIZED (
    SELECT coalesce((SELECT c.papers FROM category_counts c WHERE c.category = $1::text), 0)::bigint AS total
)
SELECT {columns}{", (SELECT total FROM n) AS listed_total" if count else ""} FROM papers p {joins}
WHERE p.id = ANY (ARRAY(
    SELECT f.paper_id FROM ({front_ids}) f WHERE (SELECT 2 * $3::bigint <= total FROM n)
    UNION ALL
    SELECT b.paper_id FROM n, LATERAL ({back_ids}) b WHERE (SELECT 2 * $3::bigint > total FROM n)
))
ORDER BY {sort.order_by}"""


def _after(columns: str, sort: Sort, direction: str, joins: str, count: bool) -> str:
    # $1 category, $2 and $3 the cursor's (published, id), $4 limit.
    ids = _ids(direction, f" AND {_AFTER[direction]}", "$4::bigint", "0")
    total = f", ({COUNT_SQL}) AS listed_total" if count else ""
    return f"SELECT {columns}{total} FROM papers p {joins} WHERE p.id = ANY (ARRAY({ids})) ORDER BY {sort.order_by}"


def page_statement(
    clauses: Sequence[Clause],
    sort: Sort,
    columns: str,
    *,
    limit: int,
    offset: int,
    joins: str = "",
    count: bool = False,
) -> tuple[str, list[object]] | None:
    """The page's statement and arguments when the index serves this list (None: it does not). `joins` join each
    of the page's papers `p` (a LATERAL join runs for the page's rows only: they are picked by id first). `count`:
    each row also holds the list's total, `listed_total`."""
    direction = _DIRECTION.get(sort.name)
    if direction is None:
        return None
    category = listed_category(clauses[:2])
    if category is None or len(clauses) > 3:
        return None
    if len(clauses) == 2:
        return _numbered(columns, sort, direction, joins, count), [category, limit, offset]
    after = clauses[2]
    if after.fragment is not sort.after or offset:
        return None
    return _after(columns, sort, direction, joins, count), [category, *after.args, limit]
