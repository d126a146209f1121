"""Search over papers (keyword, semantic, hybrid), facets, highlights, autocomplete."""

from __future__ import annotations

from enum import Enum

import strawberry

from db.queries.search.statement import Mode
from resolvers.context import Info
from resolvers.search import (
    SearchConnection,
    SearchFacetsView,
    SuggestionView,
    resolve_autocomplete,
    resolve_facets,
    resolve_search,
)
from schema.inputs import PaperFilter
from schema.pagination import NESTED_NULL, PageInfo, total_count_field, total_pages_field
from schema.paper import Paper


@strawberry.enum(description="How `search` matches papers to the query.")
class SearchMode(Enum):
    KEYWORD = strawberry.enum_value(
        "KEYWORD",
        description="Full text over title, abstract and authors; web search syntax: "
        '`"exact phrase"`, `OR`, `-exclude`. Relevance is text rank times (1 + ln(1 + citations)).',
    )
    SEMANTIC = strawberry.enum_value(
        "SEMANTIC",
        description="Meaning, not words: the 200 papers nearest the query by embedding (all-MiniLM-L6-v2). "
        "SEMANTIC_UNAVAILABLE where the server has no embedding model or no pgvector.",
    )
    HYBRID = strawberry.enum_value(
        "HYBRID",
        description="Reciprocal rank fusion of the top 200 KEYWORD and top 200 SEMANTIC results.",
    )


_MODES: dict[SearchMode, Mode] = {
    SearchMode.KEYWORD: "KEYWORD",
    SearchMode.SEMANTIC: "SEMANTIC",
    SearchMode.HYBRID: "HYBRID",
}


@strawberry.enum(description="Order of search results; ties are broken by id.")
class SearchSort(Enum):
    RELEVANCE = "RELEVANCE"
    NEWEST = "NEWEST"
    OLDEST = "OLDEST"
    MOST_CITED = "MOST_CITED"


@strawberry.enum(description="A kind of entity autocomplete can suggest.")
class EntityType(Enum):
    PAPER = "PAPER"
    RESEARCHER = "RESEARCHER"
    INSTITUTION = "INSTITUTION"


@strawberry.type(description="How many results carry one value of a facet.")
class FacetCount:
    value: str
    count: int


@strawberry.type(description="The most frequent values of one facet over the whole result set (not the page).")
class Facet:
    values: list[FacetCount] = strawberry.field(description="Most frequent first, at most `limit`.")
    other_count: int = strawberry.field(
        description="The counts of the values past `limit`, added up (a paper in two such categories counts twice)."
    )
    other_values: int = strawberry.field(description="How many values are past `limit`.")


@strawberry.type(description="Facet counts over every result of the search, whatever page is shown.")
class SearchFacets:
    categories: Facet = strawberry.field(description="Any of a paper's arXiv categories.")
    primary_categories: Facet = strawberry.field(description="The paper's primary arXiv category.")
    years: Facet = strawberry.field(description="Year of first publication (UTC).")


@strawberry.type(description="The matched words marked with <mark>; the text is HTML-escaped otherwise.")
class SearchHighlights:
    title: str | None = strawberry.field(description="The whole title, matched words marked.")
    abstract: str | None = strawberry.field(description="Up to two passages of the abstract around matches.")


@strawberry.type
class PaperSearchEdge:
    cursor: str
    node: Paper
    score: float = strawberry.field(
        description="KEYWORD: text rank with citation boost; SEMANTIC: cosine similarity; HYBRID: fused rank score."
    )
    highlights: SearchHighlights


def _facets(root: SearchConnection, limit: int = 10) -> SearchFacetsView | None:
    return resolve_facets(root, limit)


@strawberry.type(description="A page of search results. Page with `page` or `after`, `first` 1 to 100 (default 24).")
class PaperSearchConnection:
    total_count: int = total_count_field()
    total_pages: int = total_pages_field()
    match_count: int = strawberry.field(
        description="How many papers match. Up to 1,000 matches this is `totalCount`; past that, KEYWORD ranks, "
        "pages and counts facets over 1,000 matches (well-cited papers first; sorted by date or citations, the first "
        "in that order), and this is an estimate."
    )
    match_count_is_estimate: bool = strawberry.field(description="Whether `matchCount` is an estimate.")
    page_info: PageInfo
    edges: list[PaperSearchEdge]
    nodes: list[Paper]
    facets: SearchFacetsView | None = strawberry.field(
        resolver=_facets,
        graphql_type=SearchFacets | None,
        description="Counts by category, primary category and year over the whole result set, as `fields` counts "
        "(`categories` counts cross-lists, as the `category` filter lists them); `limit` 1 to 100 per facet."
        + NESTED_NULL,
    )


@strawberry.type(description="A researcher, institution or paper matching what the user is typing.")
class Suggestion:
    type: EntityType
    id: strawberry.ID = strawberry.field(description="The global node id (`node(id:)`).")
    database_id: int
    label: str = strawberry.field(description="Name or title.")
    slug: str = strawberry.field(description="For the site's URL: /researchers/<slug>, /institutions/..., /papers/...")
    hint: str | None = strawberry.field(
        description="A researcher's latest institution, an institution's country, a paper's arXiv id."
    )


@strawberry.type
class SearchQuery:
    @strawberry.field(
        description="Search papers by words (KEYWORD), meaning (SEMANTIC) or both (HYBRID), with the same "
        "filters as `papers`, facets and highlights. An empty or stop-word-only query is BAD_USER_INPUT.",
        graphql_type=PaperSearchConnection,
    )
    async def search(
        self,
        info: Info,
        query: str,
        mode: SearchMode = SearchMode.KEYWORD,
        filter: PaperFilter | None = None,
        sort: SearchSort = SearchSort.RELEVANCE,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
    ) -> SearchConnection:
        return await resolve_search(
            info,
            query=query,
            mode=_MODES[mode or SearchMode.KEYWORD],
            filter=filter.to_args() if filter else None,
            sort=(sort or SearchSort.RELEVANCE).value,
            first=first,
            after=after,
            page=page,
        )

    @strawberry.field(
        description="Suggestions while typing: researchers and institutions by name (case, diacritics and a "
        "typo ignored), papers by title words when `types` includes PAPER (default: RESEARCHER and "
        "INSTITUTION); best matches first. `first` 1 to 50.",
        graphql_type=list[Suggestion],
    )
    async def autocomplete(
        self, info: Info, query: str, types: list[EntityType] | None = None, first: int = 8
    ) -> list[SuggestionView]:
        return await resolve_autocomplete(
            info.context, query=query, kinds=[t.value for t in types] if types is not None else None, first=first
        )


__all__ = ["PaperSearchConnection", "SearchFacets", "SearchFacetsView", "SearchQuery"]
