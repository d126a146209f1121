"""Both paging styles on every connection: numbered pages (`page`) and keyset cursors (`after`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from weakref import ref

from graphql import FieldNode, FragmentDefinitionNode, FragmentSpreadNode, InlineFragmentNode, SelectionSetNode
from strawberry import Info

from bounded import forget
from db.filters import Clause, Sort
from db.paging import TokenError, decode_cursor, encode_cursor
from resolvers.errors import BadUserInput

T = TypeVar("T")

DEFAULT_FIRST = 24
MAX_FIRST = 100
# Numbered pages use OFFSET; past this many rows, cursors (`after`) walk any depth at constant cost.
MAX_OFFSET = 100_000


@dataclass(frozen=True, slots=True)
class PageRequest:
    first: int
    offset: int
    page: int | None
    after: Clause | None
    # A numbered page past MAX_OFFSET: answered only when it is past the end of the list (see `past_the_end`).
    deep: bool = False


def page_request(
    sort: Sort, *, first: int | None, after: str | None, page: int | None, bounded: bool = False
) -> PageRequest:
    """Check the paging arguments; malformed ones are BadUserInput, never silently clamped. `bounded`: the list
    holds at most a few thousand rows (search, name look-ups), so any page may be read with OFFSET."""
    size = DEFAULT_FIRST if first is None else first
    if not 1 <= size <= MAX_FIRST:
        raise BadUserInput(f"`first` must be between 1 and {MAX_FIRST}; got {size}.")
    if page is not None and after is not None:
        raise BadUserInput("Use either `page` (numbered pages) or `after` (cursor), not both.")
    if page is not None:
        if page < 1:
            raise BadUserInput(f"`page` starts at 1; got {page}.")
        offset = (page - 1) * size
        if bounded:
            # Past the end of any bounded list already; kept within what an SQL integer holds.
            return PageRequest(size, min(offset, MAX_OFFSET + 1), page, None)
        return PageRequest(size, offset, page, None, deep=offset > MAX_OFFSET)
    if after is not None:
        try:
            key = decode_cursor(after, sort.name, len(sort.key))
            clause = sort.after_clause(key)
        except (TokenError, ValueError):
            raise BadUserInput(
                "Malformed `after` cursor: pass an `endCursor` or edge `cursor` from the same list and sort."
            ) from None
        return PageRequest(size, 0, None, clause)
    return PageRequest(size, 0, 1, None)


class Edge(Generic[T]):
    __slots__ = ("cursor", "node")

    def __init__(self, cursor: str, node: T) -> None:
        self.cursor = cursor
        self.node = node


class PageInfo:
    __slots__ = ("end_cursor", "has_next_page", "has_previous_page", "page", "start_cursor")

    def __init__(
        self,
        *,
        has_next_page: bool,
        has_previous_page: bool,
        start_cursor: str | None,
        end_cursor: str | None,
        page: int | None,
    ) -> None:
        self.has_next_page = has_next_page
        self.has_previous_page = has_previous_page
        self.start_cursor = start_cursor
        self.end_cursor = end_cursor
        self.page = page

    @classmethod
    def of(cls, request: PageRequest, cursors: list[str], *, has_next_page: bool) -> PageInfo:
        """For a page that `request` asked for, given its items' cursors in order."""
        return cls(
            has_next_page=has_next_page,
            has_previous_page=(request.page or 1) > 1 if request.after is None else True,
            start_cursor=cursors[0] if cursors else None,
            end_cursor=cursors[-1] if cursors else None,
            page=request.page,
        )


class Connection(Generic[T]):
    """One page of a list. `total` is set when the query asked for it, else `count` computes it on demand."""

    __slots__ = ("_count", "_sort", "first", "has_next_page", "nodes", "nodes_json", "request", "total")

    def __init__(
        self,
        nodes: list[T],
        *,
        sort: Sort,
        request: PageRequest,
        has_next_page: bool,
        total: int | None,
        count: Callable[[], Awaitable[int]],
    ) -> None:
        self.nodes = nodes
        self.request = request
        self.first = request.first
        self.has_next_page = has_next_page
        self.total = total
        self._sort = sort
        self._count = count
        # (the `nodes` field node, the nodes as JSON PostgreSQL wrote for it): see schema/fast_executor/.
        self.nodes_json: tuple[object, object] | None = None

    def cursor(self, node: T) -> str:
        return encode_cursor(self._sort.name, self._sort.cursor_key(node))

    @property
    def edges(self) -> list[Edge[T]]:
        return [Edge(self.cursor(n), n) for n in self.nodes]

    @property
    def page_info(self) -> PageInfo:
        ends = [self.nodes[0], self.nodes[-1]] if self.nodes else []
        return PageInfo.of(self.request, [self.cursor(n) for n in ends], has_next_page=self.has_next_page)

    async def _counted(self) -> int:
        self.total = await self._count()
        return self.total

    def count_total(self) -> int | Awaitable[int]:
        return self.total if self.total is not None else self._counted()

    def count_pages(self) -> int | Awaitable[int]:
        if self.total is not None:
            return -(-self.total // self.first)

        async def pages() -> int:
            return -(-(await self._counted()) // self.first)

        return pages()


async def past_the_end(request: PageRequest, sort: Sort, count: Callable[[], Awaitable[int]]) -> Connection[Any] | None:
    """For a numbered page past MAX_OFFSET: an empty page with the list's true totals when the page is past the
    list's end (a stale link must not fail its page); BadUserInput when rows are there, since reading that deep
    with OFFSET costs the depth (cursors walk any depth at constant cost). None for any other page."""
    if not request.deep:
        return None
    total = await count()
    if request.offset < total:
        raise BadUserInput(
            f"`page` {request.page} is past the first {MAX_OFFSET} results; walk further with `after` cursors."
        )
    return Connection([], sort=sort, request=request, has_next_page=False, total=total, count=count)


def total_from_page(request: PageRequest, read: int) -> int | None:
    """The list's length when its page shows it (`read`: the rows read, at most first + 1): a numbered page that
    holds the list's last row, or a first page that holds the whole list. None when a count must say it."""
    if request.after is not None or read > request.first or (read == 0 and request.offset > 0):
        return None
    return request.offset + read


def split_page(rows: Sequence[T], first: int) -> tuple[list[T], bool]:
    """Rows were fetched with LIMIT first+1: the extra row only says there is a next page."""
    return list(rows[:first]), len(rows) > first


# -- lookahead -------------------------------------------------------------------------------------

# Walks per (field nodes, path): parsed documents are cached, so the same nodes come back on every request of a
# document and a walk is done once. Entries hold their nodes weakly and leave with the first of them (a document
# leaves with the parse cache, and its walks with it); an answer counts only while its nodes are the very ones asked
# about, so a reused id never answers for another document; the table is emptied if it ever grows past the bound.
_WALKS: dict[
    tuple[tuple[int, ...], tuple[str, ...]], tuple[tuple[ref[FieldNode], ...], bool, ref[FieldNode] | None]
] = {}
_MAX_WALKS = 8192


@dataclass(frozen=True, slots=True)
class Lookahead:
    """What a query selects below a field, read from the parsed document (through fragments and aliases).

    Read from graphql-core's nodes rather than Strawberry's `info.selected_fields`, which converts the whole
    selection below the field (every argument of every field) into new objects on each call. Directives are not
    evaluated: a field under `@skip` counts as selected (it costs a statement at most, never a wrong answer)."""

    nodes: tuple[FieldNode, ...] = ()
    fragments: Mapping[str, FragmentDefinitionNode] = field(default_factory=dict)

    @classmethod
    def of(cls, info: Info[Any, Any]) -> Lookahead:
        raw = info._raw_info  # Strawberry's Info wraps graphql-core's; its nodes are the parsed document's own
        return cls(tuple(raw.field_nodes), raw.fragments)

    def selects(self, *path: str) -> bool:
        """Whether the selection below these nodes reaches `path`."""
        return self._walk(path)[0]

    def only(self, *path: str) -> FieldNode | None:
        """The one field node at `path` below these nodes; None when there is none or more than one (at any level)."""
        return self._walk(path)[1]

    def _walk(self, path: tuple[str, ...]) -> tuple[bool, FieldNode | None]:
        """Whether `path` is reached, and the one node reached when every level on the way had one."""
        key = (tuple(map(id, self.nodes)), path)
        hit = _WALKS.get(key)
        if hit is not None and all(r() is n for r, n in zip(hit[0], self.nodes, strict=True)):
            return hit[1], hit[2]() if hit[2] is not None else None
        level: list[FieldNode] = list(self.nodes)
        single = True
        for name in path:
            level = [child for node in level for child in self._named(node.selection_set, name)]
            single = single and len(level) == 1
            if not level:
                break
        found = level[0] if single and path else None
        if len(_WALKS) >= _MAX_WALKS:
            _WALKS.clear()
        first = (ref(self.nodes[0], forget(_WALKS, key)),) if self.nodes else ()
        held = first + tuple(map(ref, self.nodes[1:]))
        _WALKS[key] = (held, bool(level), ref(found) if found is not None else None)
        return bool(level), found

    def _named(self, selection_set: SelectionSetNode | None, name: str) -> Iterable[FieldNode]:
        for s in selection_set.selections if selection_set is not None else ():
            if isinstance(s, FieldNode):
                if s.name.value == name:
                    yield s
            elif isinstance(s, InlineFragmentNode):
                yield from self._named(s.selection_set, name)
            elif isinstance(s, FragmentSpreadNode):
                fragment = self.fragments.get(s.name.value)
                if fragment is not None:
                    yield from self._named(fragment.selection_set, name)


# No selection at all: an in-process caller that asks for nothing below the field.
NOTHING = Lookahead()


def wants_total(look: Lookahead) -> bool:
    """Whether the query selects the list's length (then it is read with the page, in the same round trip)."""
    return look.selects("totalCount") or look.selects("totalPages")


def selects_node(look: Lookahead, *path: str) -> bool:
    """`path` under a connection's nodes, either as `nodes { ... }` or `edges { node { ... } }`."""
    return look.selects("nodes", *path) or look.selects("edges", "node", *path)
