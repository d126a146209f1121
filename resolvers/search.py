"""Search: keyword, semantic and hybrid search over papers, autocomplete, similar papers, names by relevance."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

import semantic
from db.filters import Sort, paper_filter_clauses
from db.paging import encode_cursor
from db.queries.papers import PaperRow
from db.queries.search.papers import (
    EmptyQuery,
    Facets,
    FacetValue,
    SearchHit,
    SemanticSearchUnavailable,
    search_papers,
)
from db.queries.search.statement import SEARCH_SORTS, Mode
from db.queries.search.suggest import EntityKind, Suggestion, suggest
from resolvers.context import Context, Info
from resolvers.errors import BadUserInput, PublicError
from resolvers.names import MAX_NAME_QUERY_LENGTH
from resolvers.pagination import Lookahead, PageInfo, PageRequest, page_request, split_page
from resolvers.paper_authors import prefetch_authors
from resolvers.papers import PaperFilterArgs, paper_filter_spec

MAX_QUERY_LENGTH = 500
MAX_FACET_LIMIT = 100
MAX_SUGGESTIONS = 50
MAX_SIMILAR = 100
# Paper titles are asked for explicitly: a half-typed word expands to many title words, which costs more than
# looking up every name.
DEFAULT_KINDS: tuple[EntityKind, ...] = ("RESEARCHER", "INSTITUTION")


class SemanticUnavailable(PublicError):
    code = "SEMANTIC_UNAVAILABLE"


def _semantic_unavailable(reason: str) -> SemanticUnavailable:
    return SemanticUnavailable(
        f"Semantic and hybrid search are not available on this server ({reason}); use mode KEYWORD."
    )


async def query_vector(ctx: Context, text: str) -> list[float]:
    """The query's embedding, computed off the event loop; SemanticUnavailable when the model is absent."""
    if not ctx.settings.semantic_search:
        raise _semantic_unavailable("turned off by configuration")
    if not semantic.is_available():
        raise _semantic_unavailable("the embedding model is not installed")
    try:
        return await asyncio.to_thread(semantic.embed_query, text)
    except semantic.EmbeddingsUnavailable as exc:
        raise _semantic_unavailable("the embedding model failed to load") from exc


# -- search --------------------------------------------------------------------------------------


@dataclass(slots=True)
class SearchEdge:
    cursor: str
    node: PaperRow
    score: float
    highlights: SearchHighlights


@dataclass(slots=True)
class SearchHighlights:
    title: str | None
    abstract: str | None


class SearchConnection:
    """One page of search hits, with the total and the facets of the whole result set."""

    __slots__ = (
        "_sort",
        "facets_all",
        "first",
        "has_next_page",
        "hits",
        "match_count",
        "match_count_is_estimate",
        "request",
        "total",
    )

    def __init__(
        self,
        hits: list[SearchHit],
        *,
        sort: Sort,
        cursor_name: str,
        request: PageRequest,
        has_next_page: bool,
        total: int,
        facets: Facets | None,
        match_count: int,
        match_count_is_estimate: bool,
    ) -> None:
        self.hits = hits
        self.request = request
        self.first = request.first
        self.has_next_page = has_next_page
        self.total = total
        self.facets_all = facets
        self.match_count = match_count
        self.match_count_is_estimate = match_count_is_estimate
        self._sort = (sort, cursor_name)

    def cursor(self, hit: SearchHit) -> str:
        sort, name = self._sort
        return encode_cursor(name, sort.cursor_key(hit))

    @property
    def nodes(self) -> list[PaperRow]:
        return [h.paper for h in self.hits]

    @property
    def edges(self) -> list[SearchEdge]:
        return [
            SearchEdge(self.cursor(h), h.paper, h.score, SearchHighlights(h.title_highlight, h.abstract_highlight))
            for h in self.hits
        ]

    @property
    def page_info(self) -> PageInfo:
        ends = [self.hits[0], self.hits[-1]] if self.hits else []
        return PageInfo.of(self.request, [self.cursor(h) for h in ends], has_next_page=self.has_next_page)

    def count_total(self) -> int:
        return self.total

    def count_pages(self) -> int:
        return -(-self.total // self.first)


def _cursor_sort(sort: Sort, mode: Mode) -> Sort:
    """The sort under a name that carries the mode, so a cursor only replays into the same kind of search."""
    return Sort(f"search-{mode}-{sort.name}", sort.order_by, sort.after, sort.key, sort.after_null)


async def resolve_search(
    info: Info,
    *,
    query: str,
    mode: Mode,
    filter: PaperFilterArgs | None,
    sort: str,
    first: int | None,
    after: str | None,
    page: int | None,
) -> SearchConnection:
    ctx = info.context
    text = " ".join(query.split())
    if not text:
        raise BadUserInput("`query` is empty: give words to search for (browse without words with `papers`).")
    if len(text) > MAX_QUERY_LENGTH:
        raise BadUserInput(f"`query` is longer than {MAX_QUERY_LENGTH} characters.")
    base_sort = SEARCH_SORTS[sort]
    cursor_sort = _cursor_sort(base_sort, mode)
    # At most KEYWORD_CAP (or the semantic candidates) rows: any numbered page is cheap, past the end empty.
    request = page_request(cursor_sort, first=first, after=after, page=page, bounded=True)
    spec = await paper_filter_spec(ctx, filter)
    clauses = paper_filter_clauses(spec)
    vector = await query_vector(ctx, text) if mode != "KEYWORD" else None
    look = Lookahead.of(info)
    async with ctx.pool.acquire() as conn:
        try:
            result = await search_papers(
                conn,
                mode=mode,
                text=text,
                vector=vector,
                clauses=clauses,
                sort=base_sort,
                limit=request.first + 1,
                offset=request.offset,
                after=request.after,
                with_facets=look.selects("facets"),
                with_highlights=look.selects("edges", "highlights"),
            )
        except EmptyQuery:
            raise BadUserInput(
                "`query` has no searchable word (only stop words such as `the`, or only `-excluded` words)."
            ) from None
        except SemanticSearchUnavailable:
            raise _semantic_unavailable("this database has no pgvector") from None
    hits, has_next = split_page(result.hits, request.first)
    papers = [h.paper for h in hits]
    ctx.loaders.prime_papers(papers)
    if papers:
        await prefetch_authors(ctx, look, papers)
    return SearchConnection(
        hits,
        sort=base_sort,
        cursor_name=cursor_sort.name,
        request=request,
        has_next_page=has_next,
        total=result.total,
        facets=result.facets,
        match_count=result.matches,
        match_count_is_estimate=result.matches_estimated,
    )


@dataclass(slots=True)
class Facet:
    values: list[FacetValue]
    other_count: int
    other_values: int


@dataclass(slots=True)
class SearchFacetsView:
    categories: Facet
    primary_categories: Facet
    years: Facet


def _cut(values: list[FacetValue], limit: int) -> Facet:
    rest = values[limit:]
    return Facet(values[:limit], sum(v.count for v in rest), len(rest))


def resolve_facets(connection: SearchConnection, limit: int) -> SearchFacetsView:
    if not 1 <= limit <= MAX_FACET_LIMIT:
        raise BadUserInput(f"`limit` must be between 1 and {MAX_FACET_LIMIT}; got {limit}.")
    facets = connection.facets_all or Facets([], [], [])
    return SearchFacetsView(
        _cut(facets.categories, limit), _cut(facets.primary_categories, limit), _cut(facets.years, limit)
    )


# -- autocomplete ----------------------------------------------------------------------------------


@dataclass(slots=True)
class SuggestionView:
    type: EntityKind
    id: str
    database_id: int
    label: str
    slug: str
    hint: str | None


async def resolve_autocomplete(
    ctx: Context, *, query: str, kinds: Sequence[EntityKind] | None, first: int
) -> list[SuggestionView]:
    text = " ".join(query.split())
    if not text:
        raise BadUserInput("`query` is empty.")
    if len(text) > MAX_NAME_QUERY_LENGTH:
        raise BadUserInput(f"`query` is longer than {MAX_NAME_QUERY_LENGTH} characters.")
    if not 1 <= first <= MAX_SUGGESTIONS:
        raise BadUserInput(f"`first` must be between 1 and {MAX_SUGGESTIONS}; got {first}.")
    wanted = list(dict.fromkeys(kinds)) if kinds is not None else list(DEFAULT_KINDS)
    if not wanted:
        return []
    found: list[Suggestion] = await suggest(ctx.pool, text, kinds=wanted, limit=first)
    return [SuggestionView(s.kind, s.node_id, s.id, s.label, s.slug, s.hint) for s in found]


# -- similar papers --------------------------------------------------------------------------------


async def resolve_similar_papers(ctx: Context, paper: PaperRow, first: int) -> list[PaperRow]:
    """Nearest papers by embedding; empty when the paper has no vector or the database has no pgvector
    (a paper page must not fail for want of the optional semantic index)."""
    if not 1 <= first <= MAX_SIMILAR:
        raise BadUserInput(f"`first` must be between 1 and {MAX_SIMILAR}; got {first}.")
    return await ctx.loaders.similar_papers_by_paper_id.load((paper.id, first))
