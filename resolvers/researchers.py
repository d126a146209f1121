"""Researchers: look-up by any id form, lists, relations."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping

import strawberry

from db.filters import RESEARCHER_FILTERS, RESEARCHER_SORTS, Clause, escape_like
from db.queries.institutions import InstitutionRow
from db.queries.researchers import (
    ResearcherRow,
    count_researchers,
    fetch_researcher_by_external_id,
    page_researchers,
)
from resolvers.context import Context
from resolvers.errors import BadUserInput
from resolvers.ids import EntityKey, parse_researcher_id
from resolvers.pagination import Connection, page_request, selects, split_page

Info = strawberry.Info[Context, None]
MAX_QUERY_LENGTH = 200


async def _find(ctx: Context, key: EntityKey) -> ResearcherRow | None:
    if key.db_id is not None:
        return await ctx.loaders.researcher_by_id.load(key.db_id)
    assert key.kind in ("s2", "openalex", "orcid")
    async with ctx.pool.acquire() as conn:
        row = await fetch_researcher_by_external_id(conn, key.kind, key.value)
    if row is not None:
        ctx.loaders.prime_researchers([row])
    return row


async def resolve_researcher(ctx: Context, researcher_id: str) -> ResearcherRow | None:
    return await _find(ctx, parse_researcher_id(researcher_id))


async def lookup_researcher_id(ctx: Context, researcher_id: str) -> int | None:
    """The database id a researcher reference names; a numeric id or slug costs no statement."""
    key = parse_researcher_id(researcher_id)
    if key.db_id is not None:
        return key.db_id
    row = await _find(ctx, key)
    return row.id if row else None


FIGURE_RANGE_KEYS = ("min_h_index", "max_h_index", "min_citations", "max_citations")


def figure_range_clauses(ranges: Mapping[str, int | None]) -> list[Clause]:
    """Range filters on the stored whole-career figures; bounds are 0 or more."""
    clauses: list[Clause] = []
    for key in FIGURE_RANGE_KEYS:
        value = ranges.get(key)
        if value is None:
            continue
        if not 0 <= value <= 2_147_483_647:
            raise BadUserInput("Figure bounds (hIndex, citations) must be 0 or more.")
        clauses.append(Clause(RESEARCHER_FILTERS[key], (value,)))
    return clauses


def name_query_clause(query: str | None, fragment_key: str = "name") -> list[Clause]:
    if query is None or not query.strip():
        return []
    text = " ".join(query.split())
    if len(text) > MAX_QUERY_LENGTH:
        raise BadUserInput(f"`query` is longer than {MAX_QUERY_LENGTH} characters.")
    return [Clause(RESEARCHER_FILTERS[fragment_key], (escape_like(text),))]


async def resolve_researchers(
    info: Info,
    *,
    query: str | None,
    sort: str,
    first: int | None,
    after: str | None,
    page: int | None,
    institution_id: int | None = None,
    figure_ranges: Mapping[str, int | None] | None = None,
) -> Connection[ResearcherRow]:
    ctx = info.context
    sort_spec = RESEARCHER_SORTS[sort]
    request = page_request(sort_spec, first=first, after=after, page=page)
    clauses = name_query_clause(query)
    if institution_id is not None:
        clauses.append(Clause(RESEARCHER_FILTERS["institution"], (institution_id,)))
    clauses += figure_range_clauses(figure_ranges or {})
    page_clauses = [*clauses, request.after] if request.after is not None else clauses
    fields = info.selected_fields
    want_total = selects(fields, "totalCount") or selects(fields, "totalPages")
    async with ctx.pool.acquire() as conn:
        rows = await page_researchers(conn, page_clauses, sort_spec, limit=request.first + 1, offset=request.offset)
        total = await count_researchers(conn, clauses) if want_total else None
    nodes, has_next = split_page(rows, request.first)
    ctx.loaders.prime_researchers(nodes)

    async def count() -> int:
        async with ctx.pool.acquire() as conn:
            return await count_researchers(conn, clauses)

    return Connection(nodes, sort=sort_spec, request=request, has_next_page=has_next, total=total, count=count)


def researcher_institutions(ctx: Context, researcher: ResearcherRow) -> Awaitable[list[InstitutionRow]]:
    return ctx.loaders.institutions_by_researcher_id.load(researcher.id)
