"""Institutions: look-up by id, slug, ROR id or name, and lists."""

from __future__ import annotations

import re

from db.connection import Conn
from db.filters import INSTITUTION_FILTERS, INSTITUTION_SORTS, Clause, Sort
from db.queries.institutions import (
    InstitutionRow,
    count_institutions,
    fetch_institution_by_name,
    fetch_institution_by_openalex,
    fetch_institution_by_ror,
    fetch_institutions_by_similar_name,
    page_institutions,
)
from resolvers.aggregates import institution_stats
from resolvers.context import Context, Info
from resolvers.errors import BadUserInput
from resolvers.ids import EntityKey, parse_institution_id
from resolvers.names import resolve_institutions_by_name
from resolvers.pages import ListQuery, read_page, with_after
from resolvers.pagination import Connection, Lookahead, page_request, wants_total

_COUNTRY = re.compile(r"^[A-Za-z]{2}$")


SUGGESTIONS = 3
_FETCH = {"ror": fetch_institution_by_ror, "openalex": fetch_institution_by_openalex, "name": fetch_institution_by_name}


async def find_institution(ctx: Context, key: EntityKey) -> InstitutionRow | None:
    """The institution an id form names exactly (a name only as its name, an alias or an acronym); else None."""
    if key.db_id is not None:
        return await ctx.loaders.institution_by_id.load(key.db_id)
    async with ctx.pool.acquire() as conn:
        row = await _FETCH[key.kind](conn, key.value)
    if row is not None:
        ctx.loaders.prime_institutions([row])
    return row


async def find_institution_by_similar_name(ctx: Context, name: str) -> InstitutionRow | None:
    """The institution whose name is most like `name`: a guess, for where one is asked for (a typed route)."""
    async with ctx.pool.acquire() as conn:
        rows = await fetch_institutions_by_similar_name(conn, name, limit=1)
    return rows[0] if rows else None


async def resolve_institution(ctx: Context, institution_id: str, *, stats: bool = False) -> InstitutionRow | None:
    """`stats`: the selection shows the institution's statistics, which a database id lets start beside its row."""
    key = parse_institution_id(institution_id)
    if stats and key.db_id is not None:
        institution_stats(ctx, key.db_id)
    return await find_institution(ctx, key)


async def lookup_institution_id(ctx: Context, institution_id: str, *, argument: str | None = None) -> int | None:
    """The database id an institution reference names; None when it names none. For a filter (`argument` names it)
    a name that is none of an institution's names is a mistake, not an empty list: BadUserInput, naming the
    institutions whose names are closest (an id form not in the archive still matches nothing)."""
    key = parse_institution_id(institution_id)
    row = await find_institution(ctx, key)
    if row is not None:
        return row.id
    if key.kind != "name" or argument is None:
        return None
    async with ctx.pool.acquire() as conn:
        close = await fetch_institutions_by_similar_name(conn, key.value, limit=SUGGESTIONS)
    hint = "; the closest names are " + ", ".join(repr(i.name) for i in close) if close else ""
    raise BadUserInput(
        f"`{argument}`: no institution is named {key.value[:80]!r} (names, aliases and acronyms match exactly, "
        f"ignoring case and accents){hint}."
    )


async def resolve_institutions(
    info: Info,
    *,
    query: str | None,
    country: str | None,
    sort: str,
    first: int | None,
    after: str | None,
    page: int | None,
) -> Connection[InstitutionRow]:
    """`sort` RELEVANCE: best name match first with a `query`, PAPER_COUNT without one."""
    ctx = info.context
    clauses: list[Clause] = []
    if country is not None:
        if not _COUNTRY.match(country.strip()):
            raise BadUserInput("`country` must be an ISO 3166-1 alpha-2 code such as CA.")
        clauses.append(Clause(INSTITUTION_FILTERS["country"], (country.strip().upper(),)))
    if query is not None and query.strip():
        # One matching rule (name similarity, case, diacritics and a typo ignored) whatever the order.
        by = None if sort == "RELEVANCE" else INSTITUTION_SORTS[sort]
        return await resolve_institutions_by_name(
            info, query=query, sort=by, clauses=clauses, first=first, after=after, page=page
        )
    sort_spec = INSTITUTION_SORTS["PAPER_COUNT" if sort == "RELEVANCE" else sort]
    request = page_request(sort_spec, first=first, after=after, page=page)
    want_total = wants_total(Lookahead.of(info))
    return await read_page(ctx, institution_list(ctx, clauses, sort_spec), request, want_total=want_total)


def institution_list(ctx: Context, clauses: list[Clause], sort: Sort) -> ListQuery[InstitutionRow]:
    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> list[InstitutionRow]:
        return await page_institutions(conn, with_after(clauses, after), sort, limit=limit, offset=offset)

    async def count(conn: Conn) -> int:
        return await count_institutions(conn, clauses)

    async def after_read(nodes: list[InstitutionRow]) -> None:
        ctx.loaders.prime_institutions(nodes)

    return ListQuery(sort, rows, count, after_read)
