from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from db.paging import encode_global_id
from db.queries.aggregates import FieldCountRow
from db.queries.corrections import CorrectionLogRow
from db.queries.institutions import AffiliationRow, InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Info
from resolvers.corrections import researcher_corrections, viewer_owns
from resolvers.pagination import Connection, Lookahead
from resolvers.researchers import (
    researcher_affiliations,
    researcher_institutions,
    researcher_merged_ids,
    resolve_researcher,
    resolve_researchers,
)
from resolvers.viewer import viewer_is_following
from schema.aggregates import (
    AuthorPositionStats,
    CitationSummary,
    Coauthor,
    CoauthorNetwork,
    FieldCount,
    LazyPaper,
    ResearcherFilter,
    ResearcherMetrics,
    researcher_author_positions,
    researcher_citation_summary,
    researcher_coauthors,
    researcher_fields,
    researcher_h_index_in_archive,
    researcher_metrics,
    researcher_most_cited_paper,
    researcher_network,
)
from schema.cost import STATS_FIELDS
from schema.derived import NODE_ID_DOC, derived, researcher_node_id
from schema.enums import PaperSort, ResearcherSort
from schema.inputs import ResearcherPaperFilter
from schema.node import Node
from schema.pagination import NESTED_NULL, PageInfo, total_count_field, total_pages_field
from schema.paper import PaperConnection, paper_page

if TYPE_CHECKING:
    from schema.corrections import CorrectionLogEntry
    from schema.institution import Institution


@strawberry.type(description="The researcher's ids in the sources behind the profile.")
class ExternalIds:
    s2_author_id: str | None = strawberry.field(name="semanticScholar", description="Semantic Scholar author id.")
    openalex_id: str | None = strawberry.field(name="openAlex", description="OpenAlex author id (A…).")
    orcid: str | None = strawberry.field(description="ORCID iD.")


LazyInstitution = Annotated["Institution", strawberry.lazy("schema.institution")]
LazyCorrectionLogEntry = Annotated["CorrectionLogEntry", strawberry.lazy("schema.corrections")]


def _external_ids(root: ResearcherRow) -> ResearcherRow:
    """The row itself, shown as ExternalIds (its fields are the row's)."""
    return root


async def _institutions(root: ResearcherRow, info: Info) -> list[InstitutionRow]:
    return await researcher_institutions(info.context, root)


@strawberry.type(description="A researcher's affiliation with an institution, from their papers' authorships.")
class Affiliation:
    institution: LazyInstitution
    first_year: int | None = strawberry.field(description="Year of their first paper there.")
    last_year: int | None = strawberry.field(description="Year of their latest paper there.")


async def _merged_ids(root: ResearcherRow, info: Info) -> list[strawberry.ID]:
    return [strawberry.ID(encode_global_id("Researcher", i)) for i in await researcher_merged_ids(info.context, root)]


def _affiliations(root: ResearcherRow, info: Info) -> Awaitable[list[AffiliationRow]]:
    return researcher_affiliations(info.context, root)


def _viewer_is_following(root: ResearcherRow, info: Info) -> bool | None | Awaitable[bool]:
    return viewer_is_following(info.context, "researcher", root.id)


def _viewer_owns(root: ResearcherRow, info: Info) -> bool | None | Awaitable[bool]:
    return viewer_owns(info.context, root)


async def _corrections(root: ResearcherRow, info: Info, first: int = 10) -> list[CorrectionLogRow]:
    return await researcher_corrections(info.context, root, first)


async def _papers(
    root: ResearcherRow,
    info: Info,
    filter: ResearcherPaperFilter | None = None,
    sort: PaperSort | None = PaperSort.NEWEST,
    first: int | None = None,
    after: str | None = None,
    page: int | None = None,
) -> Connection[PaperRow]:
    return await paper_page(info, filter, sort, first, after, page, researcher_id=root.id)


@strawberry.type(description="A researcher: an author profile matched across Semantic Scholar and OpenAlex.")
class Researcher(Node):
    node_id: strawberry.ID = derived(researcher_node_id, name="id", description=NODE_ID_DOC)
    id: int = strawberry.field(name="databaseId", description="The numeric database id.")
    slug: str = strawberry.field(description="URL slug: <id>-<name words> (/researchers/<slug>).")
    name: str
    external_ids: ResearcherRow = derived(_external_ids, graphql_type=ExternalIds)
    papers: Connection[PaperRow] | None = strawberry.field(
        resolver=_papers,
        graphql_type=PaperConnection | None,
        description="The researcher's papers in this archive. `first` 1 to 100 (default 24); `page` or `after`; "
        "a page past the end is empty, with the true totals." + NESTED_NULL,
    )
    institutions: list[InstitutionRow] = strawberry.field(
        resolver=_institutions,
        graphql_type=list[LazyInstitution],
        description="Institutions the researcher is affiliated with, most recent first.",
    )
    affiliations: list[AffiliationRow] = strawberry.field(
        resolver=_affiliations,
        graphql_type=list[Affiliation],
        description="The same institutions with the years of the researcher's papers there, most recent first.",
    )
    merged_ids: list[strawberry.ID] = strawberry.field(
        resolver=_merged_ids,
        description="Global ids of the researchers merged into this one (Semantic Scholar merged their author ids, "
        "or a correction): their ids, slugs and Semantic Scholar ids resolve to this researcher, and "
        "`changes` lists each merge.",
    )
    modified_at: datetime = strawberry.field(
        description="When anything this API answers about the researcher last changed (profile, ids, figures, "
        "which papers are theirs and what those count: a category, a date, a withdrawal; affiliations): the site's "
        "Last-Modified, and `changes(since:)`'s order. A paper's own text (its title, abstract, a new version) moves "
        "the paper's `modifiedAt`, not its authors'."
    )
    # Whole-career figures are stored on the researcher and refreshed by every write (lists sort on them).
    paper_count: int = strawberry.field(
        description="Papers in this archive, withdrawn ones left out: the `totalCount` of `papers` unfiltered."
    )
    h_index: int = strawberry.field(
        description="Whole career (archive papers and Semantic Scholar / OpenAlex works, each work once): "
        "the largest h such that h works have at least h citations each."
    )
    i10_index: int = strawberry.field(description="Whole career: works with at least 10 citations.")
    citation_count: int = strawberry.field(description="Whole career: citations summed over the works.")
    works_count: int = strawberry.field(description="Whole career: works, each counted once.")
    follower_count: int = strawberry.field(description="Signed-in readers following the researcher.")
    viewer_is_following: bool | None | Awaitable[bool] = strawberry.field(
        resolver=_viewer_is_following,
        graphql_type=bool | None,
        description="Whether the signed-in reader follows the researcher; null when anonymous.",
    )
    claimed: bool = strawberry.field(
        description="Whether the researcher has claimed the profile (a signed-in reader owns it; who, the API never "
        "says)."
    )
    viewer_owns: bool | None | Awaitable[bool] = strawberry.field(
        resolver=_viewer_owns,
        graphql_type=bool | None,
        description="Whether the signed-in reader owns the profile (their corrections of it apply at once); null "
        "when anonymous.",
    )
    corrections: list[CorrectionLogRow] = strawberry.field(
        resolver=_corrections,
        graphql_type=list[LazyCorrectionLogEntry],
        description="The profile's applied corrections, newest first: what changed and when, never who asked. "
        "`first` 1 to 100 (default 10).",
    )
    h_index_in_archive: int = strawberry.field(
        resolver=researcher_h_index_in_archive, description="The h-index over this archive's papers only."
    )
    metrics: ResearcherMetrics = strawberry.field(
        resolver=researcher_metrics,
        description="The career figures per source (computed here, Semantic Scholar, OpenAlex) with their dates.",
    )
    author_positions: AuthorPositionStats = strawberry.field(
        resolver=researcher_author_positions,
        description="First / middle / last / solo counts over the K of N papers where every author is matched.",
    )
    fields: list[FieldCountRow] = strawberry.field(
        resolver=researcher_fields,
        graphql_type=list[FieldCount],
        description="The researcher's papers per arXiv category (cross-lists included), most first; each `count` "
        "equals what `papers(filter: {category})` lists.",
    )
    most_cited_paper: PaperRow | None = strawberry.field(
        resolver=researcher_most_cited_paper,
        graphql_type=LazyPaper | None,
        description="The researcher's most cited paper in this archive; null when none has a count.",
    )
    citation_summary: CitationSummary = strawberry.field(
        resolver=researcher_citation_summary,
        description="Citations summed over the archive papers that have a count, and how many have one.",
    )
    coauthors: list[Coauthor] | None = strawberry.field(
        resolver=researcher_coauthors,
        description="Researchers sharing papers in this archive, most shared first. `first` 1 to 100 (default 20)."
        + NESTED_NULL,
    )
    network: CoauthorNetwork | None = strawberry.field(
        resolver=researcher_network,
        description="The co-author graph: `depth` 1 or 2, links of at least `minShared` papers, at most `limit` "
        "nodes (1 to 200)." + NESTED_NULL,
    )

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, ResearcherRow)


@strawberry.type
class ResearcherEdge:
    cursor: str
    node: Researcher


@strawberry.type(description="A page of researchers. Page with `page` or `after`, `first` 1 to 100 (default 24).")
class ResearcherConnection:
    total_count: int = total_count_field()
    total_pages: int = total_pages_field()
    page_info: PageInfo
    edges: list[ResearcherEdge]
    nodes: list[Researcher]


@strawberry.type
class ResearcherQuery:
    @strawberry.field(
        description="A researcher by numeric id, slug, s2:<Semantic Scholar id>, OpenAlex id or ORCID; null when "
        "not in the archive. The id, slug or Semantic Scholar id of a researcher merged into another answers the "
        "survivor (`mergedIds` lists it).",
        graphql_type=Researcher | None,
    )
    async def researcher(self, info: Info, id: str) -> ResearcherRow | None:
        look = Lookahead.of(info)
        return await resolve_researcher(info.context, id, stats=any(map(look.selects, STATS_FIELDS["Researcher"])))

    @strawberry.field(
        description="Researchers, optionally by name: `query` matches names ignoring case and diacritics, a typo "
        "tolerated (one or two letters: names starting with them), whatever the `sort` and `filter`. `sort` "
        "defaults to RELEVANCE with a query, PAPER_COUNT without. `first` 1 to 100 (default 24); `page` or `after`.",
        graphql_type=ResearcherConnection,
    )
    async def researchers(
        self,
        info: Info,
        query: str | None = None,
        sort: ResearcherSort | None = None,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
        filter: ResearcherFilter | None = None,
    ) -> Connection[ResearcherRow]:
        return await resolve_researchers(
            info,
            query=query,
            sort=(sort or ResearcherSort.RELEVANCE).value,
            first=first,
            after=after,
            page=page,
            figure_ranges=filter.to_ranges() if filter else None,
        )
