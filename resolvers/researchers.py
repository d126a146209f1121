"""Researchers: look-up by any id form, lists, relations."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass

import strawberry
from strawberry.dataloader import DataLoader

from db.filters import RESEARCHER_FILTERS, RESEARCHER_OWNER_FILTERS, RESEARCHER_SORTS, Clause
from db.queries.institutions import AffiliationRow, InstitutionRow
from db.queries.researchers import (
    ResearcherRow,
    count_researchers,
    count_researchers_of_owners,
    fetch_researcher_by_external_id,
    fetch_researchers_with_affiliations,
    page_researchers,
    page_researchers_of_owners,
)
from resolvers.context import Context
from resolvers.errors import BadUserInput
from resolvers.ids import EntityKey, parse_researcher_id
from resolvers.pagination import Connection, PageRequest, Selection, page_request, past_the_end, selects, split_page

Info = strawberry.Info[Context, None]


async def _find(ctx: Context, key: EntityKey) -> ResearcherRow | None:
    if key.db_id is not None:
        return await ctx.loaders.researcher_by_id.load(key.db_id)
    assert key.kind in ("s2", "openalex", "orcid")
    async with ctx.pool.acquire() as conn:
        row = await fetch_researcher_by_external_id(conn, key.kind, key.value)
    if row is not None:
        ctx.loaders.prime_researchers([row])
    return row


async def resolve_researcher(
    ctx: Context, researcher_id: str, fields: Sequence[Selection] = ()
) -> ResearcherRow | None:
    """A researcher by any id form; when `fields` select its affiliations, they come in the same statement."""
    key = parse_researcher_id(researcher_id)
    if key.db_id is None or not selects(fields, "affiliations"):
        return await _find(ctx, key)
    async with ctx.pool.acquire() as conn:
        found = await fetch_researchers_with_affiliations(conn, [key.db_id])
    if not found:
        return None
    row = found[0].researcher
    ctx.loaders.prime_researchers([row])
    ctx.loaders.researcher_by_id.prime(key.db_id, row)
    ctx.loaders.affiliations_by_researcher_id.prime(row.id, found[0].affiliations)
    ctx.loaders.prime_institutions(a.institution for a in found[0].affiliations)
    return row


async def lookup_researcher_id(ctx: Context, researcher_id: str) -> int | None:
    """The database id a researcher reference names; a numeric id or slug costs no statement (it may be the id of
    a researcher merged into another: the paper filters follow the redirect in SQL)."""
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
    """`sort` RELEVANCE: best name match first with a `query`, PAPER_COUNT without one."""
    ctx = info.context
    clauses = figure_range_clauses(figure_ranges or {})
    if query is not None and query.strip():
        if institution_id is not None:
            clauses.append(Clause(RESEARCHER_FILTERS["institution"], (institution_id,)))
        # Whatever the order and the filters, a name query matches by name similarity (case, diacritics and a
        # typo ignored): the same researchers, sorted differently.
        from resolvers.search import resolve_researchers_by_name

        by = None if sort == "RELEVANCE" else RESEARCHER_SORTS[sort]
        return await resolve_researchers_by_name(
            info, query=query, sort=by, clauses=clauses, first=first, after=after, page=page
        )
    sort_spec = RESEARCHER_SORTS["PAPER_COUNT" if sort == "RELEVANCE" else sort]
    request = page_request(sort_spec, first=first, after=after, page=page)
    fields = info.selected_fields
    want_total = selects(fields, "totalCount") or selects(fields, "totalPages")
    owned = [*clauses, Clause(RESEARCHER_FILTERS["institution"], (institution_id,))] if institution_id else clauses

    async def count() -> int:
        async with ctx.pool.acquire() as conn:
            return await count_researchers(conn, owned)

    if (end := await past_the_end(request, sort_spec, count)) is not None:
        return end
    if institution_id is not None:
        # An institution's researchers: batched with every other institution's in this request.
        key = InstitutionPageKey(institution_id, tuple(clauses), sort, request, want_total)
        result = await ctx.loaders.named("institution_researcher_pages", lambda: _pages_loader(ctx)).load(key)
        return Connection(
            result[0], sort=sort_spec, request=request, has_next_page=result[1], total=result[2], count=count
        )
    page_clauses = [*clauses, request.after] if request.after is not None else clauses
    async with ctx.pool.acquire() as conn:
        rows = await page_researchers(conn, page_clauses, sort_spec, limit=request.first + 1, offset=request.offset)
        total = await count_researchers(conn, clauses) if want_total else None
    nodes, has_next = split_page(rows, request.first)
    ctx.loaders.prime_researchers(nodes)
    return Connection(nodes, sort=sort_spec, request=request, has_next_page=has_next, total=total, count=count)


@dataclass(frozen=True, slots=True)
class InstitutionPageKey:
    institution_id: int
    clauses: tuple[Clause, ...]
    sort: str
    request: PageRequest
    want_total: bool

    @property
    def group(self) -> tuple[object, ...]:
        return (self.clauses, self.sort, self.request, self.want_total)


PageOf = tuple[list[ResearcherRow], bool, int | None]


def _pages_loader(ctx: Context) -> DataLoader[InstitutionPageKey, PageOf]:
    async def load(keys: list[InstitutionPageKey]) -> list[PageOf]:
        groups: defaultdict[tuple[object, ...], list[InstitutionPageKey]] = defaultdict(list)
        for key in keys:
            groups[key.group].append(key)
        results: dict[tuple[tuple[object, ...], int], PageOf] = {}
        owner = RESEARCHER_OWNER_FILTERS["institution"]
        async with ctx.pool.acquire() as conn:
            for group, members in groups.items():
                head = members[0]
                clauses = list(head.clauses)
                page_clauses = [*clauses, head.request.after] if head.request.after is not None else clauses
                ids = list(dict.fromkeys(k.institution_id for k in members))
                pages = await page_researchers_of_owners(
                    conn,
                    owner,
                    ids,
                    page_clauses,
                    RESEARCHER_SORTS[head.sort],
                    limit=head.request.first + 1,
                    offset=head.request.offset,
                )
                totals = await count_researchers_of_owners(conn, owner, ids, clauses) if head.want_total else {}
                for owner_id in ids:
                    nodes, has_next = split_page(pages[owner_id], head.request.first)
                    ctx.loaders.prime_researchers(nodes)
                    results[(group, owner_id)] = (nodes, has_next, totals.get(owner_id))
        return [results[(k.group, k.institution_id)] for k in keys]

    return DataLoader(load, max_batch_size=100)


async def researcher_institutions(ctx: Context, researcher: ResearcherRow) -> list[InstitutionRow]:
    return [a.institution for a in await ctx.loaders.affiliations_by_researcher_id.load(researcher.id)]


def researcher_affiliations(ctx: Context, researcher: ResearcherRow) -> Awaitable[list[AffiliationRow]]:
    return ctx.loaders.affiliations_by_researcher_id.load(researcher.id)


def researcher_merged_ids(ctx: Context, researcher: ResearcherRow) -> Awaitable[list[int]]:
    return ctx.loaders.merged_ids_by_researcher_id.load(researcher.id)
