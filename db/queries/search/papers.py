"""A page of a paper search, its total, its facets and its highlights (`search_papers`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg
import orjson

from db.connection import Conn, read_only
from db.filters import PAPER_FILTERS, Clause, Sort, compose
from db.queries.embeddings import vector_literal
from db.queries.papers import PaperRow, paper_from_record
from db.queries.search.category_vectors import Route, category_route
from db.queries.search.estimate import Scanned, estimate_matches
from db.queries.search.statement import (
    EXCLUSION,
    FIXED_PARAMS,
    HYBRID_CANDIDATES,
    INDEXED_CATEGORY_DONE,
    INDEXED_CATEGORY_SESSION,
    KEYWORD_SESSION,
    MAX_NAME_WORDS,
    NEIGHBOURS_PARAMS,
    SEMANTIC_CANDIDATES,
    SEMANTIC_SESSION,
    Mode,
    build_neighbours_sql,
    build_search_sql,
    has_phrase,
    is_ordered,
)

# Keyword matches ranked, paged and counted in facets; past it, the number of matches is estimated. Each costs a
# heap fetch, a ts_rank_cd and its facet values, a few microseconds: on a million papers a capped statement takes
# about 15 ms with 1,000 (30 ms with 3,000, measured side by side; bench/RESULTS.md).
KEYWORD_CAP = 1_000
# Semantic search within a category reads that category's own vectors when `wovepaper semantic-indexes` has listed
# it (migration 0029). False: always the index over all vectors (bench/semantic_search.py's `single-index`).
CATEGORY_VECTORS = True


class SemanticSearchUnavailable(Exception):
    """This database has no pgvector (no paper_embeddings table)."""


@dataclass(frozen=True, slots=True)
class FacetValue:
    value: str
    count: int


@dataclass(frozen=True, slots=True)
class Facets:
    """Every value of each facet over the whole result set, most frequent first (ties by value)."""

    categories: list[FacetValue]
    primary_categories: list[FacetValue]
    years: list[FacetValue]


@dataclass(slots=True)
class SearchHit:
    paper: PaperRow
    score: float
    title_highlight: str | None
    abstract_highlight: str | None

    # Sort keys, so that SEARCH_SORTS' cursor functions read a hit like a paper row.
    @property
    def score_key(self) -> str:
        return repr(self.score)

    @property
    def id(self) -> int:
        return self.paper.id

    @property
    def published(self) -> datetime:
        return self.paper.published

    @property
    def cited_by_count(self) -> int | None:
        return self.paper.cited_by_count


@dataclass(slots=True)
class SearchResult:
    total: int
    hits: list[SearchHit]
    facets: Facets | None
    # How many papers match: `total` when it is under KEYWORD_CAP, else an estimate (`matches_estimated`).
    matches: int = 0
    matches_estimated: bool = False


class EmptyQuery(ValueError):
    """The query has no searchable word: empty, only stop words, or only exclusions."""


def _facets_from_json(text: str | None) -> Facets:
    grouped: dict[str, list[FacetValue]] = {"category": [], "primary": [], "year": []}
    for kind, value, count in orjson.loads(text) if text else []:
        grouped[kind].append(FacetValue(value, count))
    for values in grouped.values():
        values.sort(key=lambda f: (-f.count, f.value))
    return Facets(grouped["category"], grouped["primary"], grouped["year"])


async def search_papers(
    conn: Conn,
    *,
    mode: Mode,
    text: str,
    vector: Sequence[float] | None,
    clauses: Sequence[Clause],
    sort: Sort,
    limit: int,
    offset: int = 0,
    after: Clause | None = None,
    with_facets: bool = False,
    with_highlights: bool = False,
    cap: int | None = None,
) -> SearchResult:
    """One page of a search, its total and (when asked) its facets, in one statement.

    `cap`: keyword matches ranked at most, KEYWORD_CAP when not given (chat, which wants a handful of papers,
    ranks fewer).

    `vector` (the query's embedding) is required for SEMANTIC and HYBRID. `after` is a keyset condition from
    the sort (`db.filters.after_clause`). Raises EmptyQuery (KEYWORD, HYBRID without a vector match is fine)
    and SemanticSearchUnavailable.
    """
    cap = KEYWORD_CAP if cap is None else cap
    if mode != "KEYWORD" and vector is None:
        raise ValueError("semantic and hybrid search need the query vector")
    where, filter_args = compose(clauses, offset=FIXED_PARAMS)
    after_sql, after_args = compose([after] if after else [], offset=FIXED_PARAMS + len(filter_args))
    phrase = mode != "SEMANTIC" and has_phrase(text)
    route = await _category_route(conn, mode, clauses)
    literal = route.literal if route else None
    # A category with its own index: its neighbours are read first, by a statement of their own (INDEXED_CATEGORY_
    # SESSION). A small category is scanned exactly at once: its few vectors are quicker to read than a graph walk.
    read_first = route is not None and route.indexed
    sql = build_search_sql(
        mode,
        sort,
        where,
        after_sql,
        phrase=phrase,
        category=literal,
        exact=route is not None and not route.indexed,
        neighbours_read=read_first,
    )
    exact_sql = (
        build_search_sql(mode, sort, where, after_sql, exact=True, phrase=phrase, category=literal)
        if clauses and route is None
        else None
    )
    candidates = SEMANTIC_CANDIDATES if mode == "SEMANTIC" else HYBRID_CANDIDATES
    vector_text = vector_literal(vector) if vector is not None else None
    args: list[object] = [
        limit,
        offset,
        with_facets,
        with_highlights,
        text,
        vector_text,
        candidates,
        cap,
        "" if EXCLUSION.search(text) or len(text.split()) > MAX_NAME_WORDS else text,
        None,  # the neighbours' ids and distances, when read first
        None,
        *filter_args,
        *after_args,
    ]
    if mode == "KEYWORD":
        async with read_only(conn, KEYWORD_SESSION):
            records = await conn.fetch(sql, *args)
    else:
        try:
            async with read_only(conn, f"{KEYWORD_SESSION}; {SEMANTIC_SESSION}"):
                if read_first:
                    assert literal is not None and vector_text is not None
                    args[9], args[10] = await _indexed_neighbours(conn, clauses, literal, vector_text, candidates)
                records = await conn.fetch(sql, *args)
                # A narrow filter (a researcher, a small category) leaves too few papers near the query for the
                # graph walk to find within its budget: then the filtered papers are few, and an exact scan is
                # both right and quick.
                if exact_sql is not None and _neighbours_found(mode, records[0]) < candidates:
                    records = await conn.fetch(exact_sql, *args)
        except (asyncpg.UndefinedTableError, asyncpg.UndefinedObjectError) as exc:
            raise SemanticSearchUnavailable(str(exc)) from exc
    first = records[0]
    if mode == "KEYWORD" and first["total"] == 0 and not await query_has_terms(conn, text):
        raise EmptyQuery(text)
    hits = [
        SearchHit(paper_from_record(r), r["score"], r["title_highlight"], r["abstract_highlight"])
        for r in records
        if r["id"] is not None
    ]
    facets = _facets_from_json(first["facets"]) if with_facets else None
    matches, estimated = estimate_matches(
        first["total"],
        first["capped"],
        Scanned(
            first["tier_found"],
            first["tier_block"],
            first["rest_block"],
            first["relpages"],
            first["tier_share"],
            ordered=is_ordered(mode, sort, phrase),
            probe_found=first["probe_found"],
            probe_block=first["probe_block"],
        ),
        cap,
    )
    return SearchResult(total=first["total"], hits=hits, facets=facets, matches=matches, matches_estimated=estimated)


async def _category_route(conn: Conn, mode: Mode, clauses: Sequence[Clause]) -> Route | None:
    if mode == "KEYWORD" or not CATEGORY_VECTORS:
        return None
    # A primary category is one of the paper's categories too: its rows, the rest filtered out as they come.
    routed = (PAPER_FILTERS["category"], PAPER_FILTERS["primary_category"])
    category = next((c.args[0] for c in clauses if c.fragment in routed), None)
    if not isinstance(category, str):
        return None
    return await category_route(conn, category)


async def _indexed_neighbours(
    conn: Conn, clauses: Sequence[Clause], category: str, vector: str, candidates: int
) -> tuple[list[int], list[float]]:
    """The nearest papers within a category that has its own HNSW index, walking that index (or, when the filter
    leaves too few near the query for the walk to find, scanning exactly): their ids and distances."""
    where, filter_args = compose(clauses, offset=NEIGHBOURS_PARAMS)
    await conn.execute(INDEXED_CATEGORY_SESSION)
    rows = await conn.fetch(build_neighbours_sql(where, category), vector, candidates, *filter_args)
    if len(rows) < candidates:
        rows = await conn.fetch(build_neighbours_sql(where, category, exact=True), vector, candidates, *filter_args)
    await conn.execute(INDEXED_CATEGORY_DONE)
    return [r["id"] for r in rows], [r["dist"] for r in rows]


def _neighbours_found(mode: Mode, first: asyncpg.Record) -> int:
    return int(first["neighbours"])


SELECT_QUERY_HAS_TERMS = """
SELECT numnode(q) > 0 AND querytree(q) <> 'T' FROM websearch_to_tsquery('english', $1::text) AS q
"""


async def query_has_terms(conn: Conn | asyncpg.Pool, text: str) -> bool:
    """False when the text has no word full-text search can look up (empty, stop words, only `-word`)."""
    return bool(await conn.fetchval(SELECT_QUERY_HAS_TERMS, text))
