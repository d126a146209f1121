"""One page of rows, or their count, for each of several owners at once (a researcher's or an institution's papers,
an institution's researchers): one statement whatever the number of owners."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from db.connection import Conn
from db.filters import Clause, Fragment, Sort, compose, owners_page
from db.keys import keyed
from db.rows import RowShape

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
) -> dict[int, list[T]]:
    """The same page of `source` rows (`columns`, built by `shape`) for each owner, every owner listed."""
    sql, args = owners_page(
        owner, owner_ids, clauses, sort, columns=columns, source=source, limit=limit, offset=offset, by_id=by_id
    )
    return await read_pages(conn, shape, owner_ids, sql, args)


async def read_pages(
    conn: Conn, shape: RowShape[T], owner_ids: Sequence[int], sql: str, args: Sequence[object]
) -> dict[int, list[T]]:
    """Run a statement whose rows start with their owner's id: each owner's rows, every owner listed."""
    pages: dict[int, list[T]] = {owner_id: [] for owner_id in owner_ids}
    records = await conn.fetch(sql, *args)
    if records:
        read = shape.reader(records[0])
        for record in records:
            pages[record["owner_id"]].append(read(record))
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
