"""One page of rows, or their count, for each of several owners at once (a researcher's or an institution's papers,
an institution's researchers): one statement whatever the number of owners."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from db.connection import Conn
from db.filters import Clause, Fragment, Sort, compose, owners_page
from db.keys import keyed
from db.rows import CountedRows, RowShape

T = TypeVar("T")


async def page_of_owners(
    conn: Conn,
    shape: RowShape[T],
    owner: Fragment,
    owner_ids: Sequence[int],
    clauses: Sequence[Clause],
    sort: Sort,
    *,
    columns: str,
    source: str,
    limit: int,
    offset: int,
    by_id: bool = False,
    total: str | None = None,
) -> dict[int, CountedRows[T]]:
    """The same page of `source` rows (`columns`, built by `shape`) for each owner, every owner listed; `total` (an
    expression of `k.owner_id`): each owner's count, read with its page (see `read_pages`)."""
    sql, args = owners_page(
        owner, owner_ids, clauses, sort, columns=columns, source=source, limit=limit, offset=offset, by_id=by_id,
        total=total,
    )  # fmt: skip
    return await read_pages(conn, shape, owner_ids, sql, args)


async def read_pages(
    conn: Conn, shape: RowShape[T], owner_ids: Sequence[int], sql: str, args: Sequence[object]
) -> dict[int, CountedRows[T]]:
    """Run a statement whose rows start with their owner's id: each owner's rows, every owner listed, with the
    owner's count when the rows carry it (`listed_total`; an owner without rows on this page has none)."""
    pages: dict[int, CountedRows[T]] = {owner_id: CountedRows() for owner_id in owner_ids}
    records = await conn.fetch(sql, *args)
    if records:
        read = shape.reader(records[0])
        counted = "listed_total" in records[0].keys()
        for record in records:
            page = pages[record["owner_id"]]
            page.append(read(record))
            if counted:
                page.total = record["listed_total"]
    return pages


async def count_of_owners(
    conn: Conn, owner: Fragment, owner_ids: Sequence[int], clauses: Sequence[Clause], *, source: str
) -> dict[int, int]:
    """How many `source` rows each owner has that meet `clauses`."""
    where, args = compose(clauses, offset=1)
    sql, keys = keyed(
        f"SELECT k.owner_id, (SELECT count(*) FROM {source} WHERE {owner.sql} AND {where})"
        " FROM {keys} AS k(owner_id)",
        owner_ids,
    )
    return {record[0]: record[1] for record in await conn.fetch(sql, keys, *args)}
