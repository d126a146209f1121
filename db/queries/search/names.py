"""Researchers and institutions listed by name: ignoring case and diacritics, a typo tolerated (pg_trgm)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import asyncpg

from db.connection import Conn, read_only
from db.filters import INSTITUTION_FILTERS, Clause, Fragment, Sort, compose, escape_like
from db.queries.institutions import INSTITUTION_COLUMNS, InstitutionRow, institution_from_record
from db.queries.researchers import RESEARCHER_COLUMNS, ResearcherRow, researcher_from_record

# word_similarity (`<%`, served by the gin_trgm index on wp_fold(name)) scores the query against the best
# matching part of the name, so `muller` matches `Hans Müller` fully and `nuller`
# or `mueller` still pass; plain similarity breaks ties towards names that are close as a whole.
# pg_trgm's default 0.6 drops a typo in the first letters of a short name (`nuller`: 0.57); 0.5 keeps it.
# A look-up reads a few hundred index entries: parallel workers would only add their start-up, and planning the
# statement again for every keystroke would cost more than running it (its plan does not depend on the name).
NAME_SESSION = (
    "SET LOCAL pg_trgm.word_similarity_threshold = 0.5; SET LOCAL max_parallel_workers_per_gather = 0;"
    " SET LOCAL plan_cache_mode = force_generic_plan"
)
# The folded query as a sub-select: computed once per statement even in a generic plan (NAME_SESSION), where
# `wp_fold($1)` would be computed again for every row it is compared with.
_QUERY_FOLDED = "(SELECT wp_fold($1::text))"
NAME_MATCH = f"{_QUERY_FOLDED} <% wp_fold({{col}})"
# Over an already folded name.
NAME_SCORE = f"(word_similarity({_QUERY_FOLDED}, {{col}}) + similarity({_QUERY_FOLDED}, {{col}}) / 10)"

# A common name (Zhang, Wang) matches tens of thousands of researchers; ranking them all costs hundreds of
# milliseconds. So the candidates are at most NAME_CANDIDATES matches as the index yields them, plus the matches
# among as many researchers with most papers (so well-known people always come up); both are exact for names
# with fewer matches than that, and the ranking (similarity, then paper count) runs over the union.
NAME_CANDIDATES = 200

# One and two letters have no trigram to look up: a prefix of the folded name instead.
PREFIX_MATCH = "wp_fold({col}) LIKE wp_fold($1::text) || '%'"

RowT = TypeVar("RowT")


@dataclass(slots=True)
class NameMatches(Generic[RowT]):
    total: int
    rows: list[tuple[RowT, float]]


def is_short(query: str) -> bool:
    return len("".join(query.split())) < 3


# -- lists by name: researchers(query:) and institutions(query:) ----------------------------------------------

# One matching rule whatever the order and the filters: the matches (trigram word similarity, or a prefix for one
# or two letters) among the rows that pass the filters, at most NAME_CANDIDATES from the index plus those among the
# NAME_CANDIDATES with most papers; then ordered by relevance or by the list's sort.
_LIST_BY_NAME = """
SELECT * FROM (
    SELECT {columns}, {score}::float8 AS score, count(*) OVER () AS total
    FROM {table} {a}
    WHERE {a}.id IN (
        (SELECT {a}.id FROM {table} {a} WHERE {match_a} AND {where} LIMIT {size})
        UNION
        (SELECT t.id FROM (SELECT {a}.id, {a}.name FROM {table} {a} WHERE {where}
                           ORDER BY {a}.paper_count DESC, {a}.id LIMIT {size}) t
         WHERE {match_t}))) {a}
WHERE {after}
ORDER BY {order}
LIMIT ${n} OFFSET ${n_offset}
"""


def name_relevance(alias: str) -> Sort:
    """Best name match first, then most papers, then id; `score` travels as repr() text (exact)."""
    return Sort(
        "NAME_RELEVANCE",
        f"{alias}.score DESC, {alias}.paper_count DESC, {alias}.id",
        Fragment(
            f"({alias}.score < $1::text::float8 OR ({alias}.score = $1::text::float8 AND ({alias}.paper_count < $2::int"
            f" OR ({alias}.paper_count = $2::int AND {alias}.id > $3::bigint))))",
            3,
        ),
        (("score", "score"), ("paper_count", "int"), ("id", "bigint")),
    )


@dataclass(frozen=True, slots=True)
class _Named(Generic[RowT]):
    """A table listed by name: its alias in the list's SQL, its columns and how a record becomes a row."""

    table: str
    alias: str
    columns: str
    row: Callable[[asyncpg.Record], RowT]


_RESEARCHERS = _Named("researchers", "r", RESEARCHER_COLUMNS, researcher_from_record)
_INSTITUTIONS = _Named("institutions", "i", INSTITUTION_COLUMNS, institution_from_record)


async def _list_by_name(
    conn: Conn,
    named: _Named[RowT],
    query: str,
    *,
    clauses: Sequence[Clause],
    sort: Sort | None,
    after: Clause | None,
    limit: int,
    offset: int,
) -> NameMatches[RowT]:
    query = " ".join(query.split())
    short = is_short(query)
    match, score = (PREFIX_MATCH, "1.0") if short else (NAME_MATCH, NAME_SCORE)
    where, args = compose(clauses, offset=1)
    after_sql, after_args = compose([after] if after is not None else [], offset=1 + len(args))
    n = 2 + len(args) + len(after_args)
    a = named.alias
    sql = _LIST_BY_NAME.format(
        columns=named.columns,
        score=score.format(col=f"wp_fold({a}.name)"),
        table=named.table,
        a=a,
        match_a=match.format(col=f"{a}.name"),
        match_t=match.format(col="t.name"),
        where=where,
        size=NAME_CANDIDATES,
        after=after_sql,
        order=(sort or name_relevance(a)).order_by,
        n=n,
        n_offset=n + 1,
    )
    params = [escape_like(query) if short else query, *args, *after_args, limit, offset]
    async with read_only(conn, NAME_SESSION):
        records = await conn.fetch(sql, *params)
    return NameMatches(records[0]["total"] if records else 0, [(named.row(r), r["score"]) for r in records])


async def search_researchers_by_name(
    conn: Conn,
    query: str,
    *,
    limit: int,
    offset: int = 0,
    clauses: Sequence[Clause] = (),
    sort: Sort | None = None,
    after: Clause | None = None,
) -> NameMatches[ResearcherRow]:
    """Researchers whose name matches ignoring case and diacritics, a typo tolerated (with fewer than three letters,
    names that start with them) and that pass `clauses`; by `sort` (default: best match first, then most papers,
    then id). `after`: the sort's keyset condition. `total` counts every match, whatever the page."""
    return await _list_by_name(
        conn, _RESEARCHERS, query, clauses=clauses, sort=sort, after=after, limit=limit, offset=offset
    )


async def search_institutions_by_name(
    conn: Conn,
    query: str,
    *,
    limit: int,
    offset: int = 0,
    country: str | None = None,
    clauses: Sequence[Clause] = (),
    sort: Sort | None = None,
    after: Clause | None = None,
) -> NameMatches[InstitutionRow]:
    """Institutions by name, like `search_researchers_by_name`; optionally in one country (ISO code)."""
    if country is not None:
        clauses = [*clauses, Clause(INSTITUTION_FILTERS["country"], (country,))]
    return await _list_by_name(
        conn, _INSTITUTIONS, query, clauses=clauses, sort=sort, after=after, limit=limit, offset=offset
    )
