"""Researchers: look-up by any id form, lists, relations."""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass

from db.connection import Conn
from db.filters import RESEARCHER_FILTERS, RESEARCHER_OWNER_FILTERS, RESEARCHER_SORTS, Clause, Sort
from db.queries.institutions import STORED_RESEARCHER_COUNT, AffiliationRow, InstitutionRow, fetch_researcher_counts
from db.queries.researchers import (
    ResearcherRow,
    count_researchers,
    count_researchers_of_owners,
    fetch_researcher_by_external_id,
    fetch_researchers_with_affiliations,
    page_researchers,
    page_researchers_of_owners,
)
from resolvers.aggregates import researcher_stats
from resolvers.context import Context, Info
from resolvers.errors import BadUserInput
from resolvers.ids import EntityKey, parse_researcher_id
from resolvers.names import resolve_researchers_by_name
from resolvers.pages import ListQuery, OwnerLists, read_page, with_after
from resolvers.pagination import Connection, Lookahead, PageRequest, page_request, wants_total


async def _find(ctx: Context, key: EntityKey) -> ResearcherRow | None:
    if key.db_id is not None:
        return await ctx.loaders.researcher_by_id.load(key.db_id)
    assert key.kind in ("s2", "openalex", "orcid")
    async with ctx.pool.acquire() as conn:
        row = await fetch_researcher_by_external_id(conn, key.kind, key.value)
    if row is not None:
        ctx.loaders.prime_researchers([row])
    return row


async def resolve_researcher(ctx: Context, researcher_id: str, *, stats: bool = False) -> ResearcherRow | None:
    """A researcher by any id form; by its database id, with its affiliations in the same statement (a page that
    shows a researcher shows them; asking the selection whether it does costs more than reading them). `stats`:
    the selection shows the researcher's statistics, which a database id lets start beside the row (a wait fewer
    for the page: they are its longest chain, the statistics, then their most cited paper)."""
    key = parse_researcher_id(researcher_id)
    if key.db_id is None:
        return await _find(ctx, key)
    if stats:
        researcher_stats(ctx, key.db_id)
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
        by = None if sort == "RELEVANCE" else RESEARCHER_SORTS[sort]
        return await resolve_researchers_by_name(
            info, query=query, sort=by, clauses=clauses, first=first, after=after, page=page
        )
    sort_spec = RESEARCHER_SORTS["PAPER_COUNT" if sort == "RELEVANCE" else sort]
    request = page_request(sort_spec, first=first, after=after, page=page)
    want_total = wants_total(Lookahead.of(info))
    if institution_id is None:
        return await read_page(ctx, researcher_list(ctx, clauses, sort_spec), request, want_total=want_total)
    owned = [*clauses, Clause(RESEARCHER_FILTERS["institution"], (institution_id,))]
    # An institution's researchers: batched with every other institution's in this request.
    key = InstitutionPageKey(institution_id, tuple(clauses), sort, request, want_total)
    listing = researcher_list(ctx, owned, sort_spec)
    return await read_page(ctx, listing, request, want_total=want_total, owned=(_institution_lists(ctx), key))


def researcher_list(ctx: Context, clauses: list[Clause], sort: Sort) -> ListQuery[ResearcherRow]:
    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> list[ResearcherRow]:
        return await page_researchers(conn, with_after(clauses, after), sort, limit=limit, offset=offset)

    async def count(conn: Conn) -> int:
        return await count_researchers(conn, clauses)

    async def after_read(nodes: list[ResearcherRow]) -> None:
        ctx.loaders.prime_researchers(nodes)

    return ListQuery(sort, rows, count, after_read)


@dataclass(frozen=True, slots=True)
class InstitutionPageKey:
    owner_id: int  # the institution
    clauses: tuple[Clause, ...]
    sort: str
    request: PageRequest
    want_total: bool

    @property
    def group(self) -> tuple[object, ...]:
        return (self.clauses, self.sort, self.request, self.want_total)


async def _institution_rows(
    conn: Conn, head: InstitutionPageKey, owner_ids: list[int]
) -> dict[int, list[ResearcherRow]]:
    clauses = with_after(head.clauses, head.request.after)
    limit, offset = head.request.first + 1, head.request.offset
    owner, sort = RESEARCHER_OWNER_FILTERS["institution"], RESEARCHER_SORTS[head.sort]
    # Unfiltered, the count every institution keeps comes with the page.
    total = STORED_RESEARCHER_COUNT if head.want_total and not head.clauses else None
    return await page_researchers_of_owners(  # type: ignore[return-value]  # (lists are invariant)
        conn, owner, owner_ids, clauses, sort, limit=limit, offset=offset, total=total
    )


async def _institution_counts(conn: Conn, head: InstitutionPageKey, owner_ids: list[int]) -> dict[int, int]:
    if not head.clauses:
        # Unfiltered: the count every institution keeps.
        return await fetch_researcher_counts(conn, owner_ids)
    owner = RESEARCHER_OWNER_FILTERS["institution"]
    return await count_researchers_of_owners(conn, owner, owner_ids, list(head.clauses))


def _institution_lists(ctx: Context) -> OwnerLists[InstitutionPageKey, ResearcherRow]:
    async def after_read(pages: list[tuple[InstitutionPageKey, list[ResearcherRow]]]) -> None:
        for _, nodes in pages:
            ctx.loaders.prime_researchers(nodes)

    return OwnerLists("institution_researcher_pages", _institution_rows, _institution_counts, after_read)


async def researcher_institutions(ctx: Context, researcher: ResearcherRow) -> list[InstitutionRow]:
    return [a.institution for a in await ctx.loaders.affiliations_by_researcher_id.load(researcher.id)]


def researcher_affiliations(ctx: Context, researcher: ResearcherRow) -> Awaitable[list[AffiliationRow]]:
    return ctx.loaders.affiliations_by_researcher_id.load(researcher.id)


def researcher_merged_ids(ctx: Context, researcher: ResearcherRow) -> Awaitable[list[int]]:
    return ctx.loaders.merged_ids_by_researcher_id.load(researcher.id)
