"""The paging engine: one page of any list, and the same page of many owners' lists read together.

A list is a `ListQuery`: how to read rows after a keyset position (LIMIT first+1, OFFSET for numbered pages) and
how to count the whole list. `read_page` answers a `PageRequest` with a Connection whose total is read with the
page when the query selects it, or counted on demand when the query's shape hid it from the lookahead.

An owner's list (a researcher's papers, an institution's researchers) inside a list of owners is read through
`OwnerLists`: every owner resolved in the same request with the same filter, sort and page shares one statement
(and one count), so the statement count does not grow with the number of owners.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import asyncpg
from strawberry.dataloader import DataLoader

from db.connection import Conn
from db.filters import Clause, Sort
from db.rows import CountedRows
from resolvers.context import Context
from resolvers.pagination import Connection, PageRequest, past_the_end, split_page, total_from_page

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ListQuery(Generic[T]):
    """A list in one order: `rows(conn, after, limit, offset)` reads a page, `count(conn)` the whole list."""

    sort: Sort
    rows: Callable[[Conn, Clause | None, int, int], Awaitable[Sequence[T]]]
    count: Callable[[Conn], Awaitable[int]]
    # Run on a page's rows once read (priming loaders, prefetching what the query selects below them).
    after_read: Callable[[list[T]], Awaitable[None]] | None = None


class OwnerKey(Protocol):
    """One owner's page; keys with equal `group` differ only in `owner_id` and share one statement."""

    @property
    def owner_id(self) -> int: ...
    @property
    def group(self) -> Hashable: ...
    @property
    def request(self) -> PageRequest: ...
    @property
    def want_total(self) -> bool: ...


K = TypeVar("K", bound=OwnerKey)


@dataclass(frozen=True, slots=True)
class OwnerLists(Generic[K, T]):
    """How to read the same page of many owners' lists at once; `name` names the request's loader."""

    name: str
    # (conn, the group's first key, owner ids) -> each owner's rows, LIMIT first+1 each
    rows: Callable[[Conn, K, list[int]], Awaitable[dict[int, list[T]]]]
    counts: Callable[[Conn, K, list[int]], Awaitable[dict[int, int]]]
    # Run once per batch on every page read (keys in batch order).
    after_read: Callable[[list[tuple[K, list[T]]]], Awaitable[None]] | None = None


@dataclass(slots=True)
class OwnerPage(Generic[T]):
    nodes: list[T]
    has_next: bool
    total: int | None


def counter(pool: asyncpg.Pool, count: Callable[[Conn], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
    """The list's count on a connection of its own, for a total asked for after the page was read."""

    async def counted() -> int:
        async with pool.acquire() as conn:
            return await count(conn)

    return counted


async def read_page(
    ctx: Context,
    query: ListQuery[T],
    request: PageRequest,
    *,
    want_total: bool,
    owned: tuple[OwnerLists[K, T], K] | None = None,
    guard_depth: bool = True,
) -> Connection[T]:
    """The page `request` asks for. `owned`: the list is one owner's, read in a batch with the other owners'.
    `guard_depth`: a numbered page past MAX_OFFSET is refused unless it is past the end (see `past_the_end`)."""
    count = counter(ctx.pool, query.count)
    if guard_depth and (end := await past_the_end(request, query.sort, count)) is not None:
        return end
    if owned is not None:
        lists, key = owned
        page = await ctx.loaders.named(lists.name, lambda: _owner_loader(ctx, lists)).load(key)
        nodes, has_next, total = page.nodes, page.has_next, page.total
    else:
        async with ctx.pool.acquire() as conn:
            rows = await query.rows(conn, request.after, request.first + 1, request.offset)
            # Counted by the page's own statement when it could (CountedRows), or shown by the page, else by a
            # statement of its own.
            total = _total(request, rows)
            if total is None and want_total:
                total = await query.count(conn)
        nodes, has_next = split_page(rows, request.first)
        if query.after_read is not None:
            await query.after_read(nodes)
    return Connection(nodes, sort=query.sort, request=request, has_next_page=has_next, total=total, count=count)


def _total(request: PageRequest, rows: Sequence[object]) -> int | None:
    counted = rows.total if isinstance(rows, CountedRows) else None
    return counted if counted is not None else total_from_page(request, len(rows))


def _owner_loader(ctx: Context, lists: OwnerLists[K, T]) -> DataLoader[K, OwnerPage[T]]:
    async def load(keys: list[K]) -> list[OwnerPage[T]]:
        groups: defaultdict[Hashable, list[K]] = defaultdict(list)
        for key in keys:
            groups[key.group].append(key)
        pages: dict[tuple[Hashable, int], OwnerPage[T]] = {}
        async with ctx.pool.acquire() as conn:
            for group, members in groups.items():
                head = members[0]
                owner_ids = list(dict.fromkeys(k.owner_id for k in members))
                rows = await lists.rows(conn, head, owner_ids)
                # Counted with the page where the statement could, else shown by a page that holds the list's end
                # (most researchers' first page); the rest are counted on their own.
                totals = {o: _total(head.request, rows[o]) for o in owner_ids}
                uncounted = [o for o, total in totals.items() if total is None]
                if head.want_total and uncounted:
                    totals.update(await lists.counts(conn, head, uncounted))
                for owner_id in owner_ids:
                    nodes, has_next = split_page(rows[owner_id], head.request.first)
                    pages[(group, owner_id)] = OwnerPage(nodes, has_next, totals[owner_id])
        answered = [pages[(k.group, k.owner_id)] for k in keys]
        if lists.after_read is not None:
            await lists.after_read([(k, page.nodes) for k, page in zip(keys, answered, strict=True)])
        return answered

    return DataLoader(load, max_batch_size=100)


def with_after(clauses: Sequence[Clause], after: Clause | None) -> list[Clause]:
    """The list's clauses and, for a keyset page, its position."""
    return [*clauses, after] if after is not None else list(clauses)
