"""Researchers and institutions by name: the same matching rule (case, diacritics and a typo ignored) for both,
whatever the order and the filters."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from db.filters import Clause, Sort
from db.queries.institutions import InstitutionRow
from db.queries.researchers import ResearcherRow
from db.queries.search.names import (
    NameMatches,
    name_relevance,
    search_institutions_by_name,
    search_researchers_by_name,
)
from resolvers.context import Info
from resolvers.errors import BadUserInput
from resolvers.pagination import Connection, page_request, split_page


class _Named(Protocol):
    """A researcher or an institution."""

    @property
    def id(self) -> int: ...


RowT = TypeVar("RowT", bound=_Named)

MAX_NAME_QUERY_LENGTH = 200


class _ScoredSort(Sort):
    """Relevance order of a name look-up: the cursor key comes from the scores of the page just read."""

    __slots__ = ("scores",)

    def __init__(self, base: Sort, scores: dict[int, float]) -> None:
        super().__init__(base.name, base.order_by, base.after, base.key, base.after_null)
        object.__setattr__(self, "scores", scores)

    def cursor_key(self, row: object) -> tuple[int | str | None, ...]:
        return (repr(self.scores[row.id]), row.paper_count, row.id)  # type: ignore[attr-defined]


def _name_text(query: str) -> str:
    text = " ".join(query.split())
    if len(text) > MAX_NAME_QUERY_LENGTH:
        raise BadUserInput(f"`query` is longer than {MAX_NAME_QUERY_LENGTH} characters.")
    return text


NameSearch = Callable[..., Awaitable[NameMatches[RowT]]]


async def _by_name(
    info: Info,
    search: NameSearch[RowT],
    alias: str,
    prime: Callable[[list[RowT]], None],
    *,
    query: str,
    sort: Sort | None,
    clauses: list[Clause],
    first: int | None,
    after: str | None,
    page: int | None,
) -> Connection[RowT]:
    text = _name_text(query)
    base = sort or name_relevance(alias)
    request = page_request(base, first=first, after=after, page=page, bounded=True)
    async with info.context.pool.acquire() as conn:
        found = await search(
            conn, text, clauses=clauses, sort=base, after=request.after, limit=request.first + 1, offset=request.offset
        )
    nodes, has_next = split_page([r for r, _ in found.rows], request.first)
    prime(nodes)
    # By relevance, a cursor carries the score of its row, read with the page.
    by = _ScoredSort(base, {r.id: score for r, score in found.rows}) if sort is None else base
    total = found.total

    async def count() -> int:
        return total

    return Connection(nodes, sort=by, request=request, has_next_page=has_next, total=total, count=count)


async def resolve_researchers_by_name(info: Info, **args: Any) -> Connection[ResearcherRow]:
    """`researchers(query:)`: the researchers whose name matches (case, diacritics and a typo ignored) among those
    passing `clauses`, the same set whatever the order; by `sort`, or (None) best match first, then most papers."""
    return await _by_name(info, search_researchers_by_name, "r", info.context.loaders.prime_researchers, **args)


async def resolve_institutions_by_name(info: Info, **args: Any) -> Connection[InstitutionRow]:
    """`institutions(query:)`, like `resolve_researchers_by_name`."""
    return await _by_name(info, search_institutions_by_name, "i", info.context.loaders.prime_institutions, **args)
