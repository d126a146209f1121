from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import Any

import strawberry

from db.queries.aggregates import FieldCountRow
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.context import Info
from resolvers.institutions import resolve_institution, resolve_institutions
from resolvers.pagination import Connection, Lookahead
from resolvers.researchers import resolve_researchers
from resolvers.viewer import viewer_is_following
from schema.aggregates import FieldCount, LazyResearcher, institution_fields, institution_top_researchers
from schema.derived import NODE_ID_DOC, derived, institution_node_id
from schema.enums import InstitutionSort, PaperSort
from schema.inputs import PaperFilter
from schema.node import Node
from schema.pagination import NESTED_NULL, PageInfo, total_count_field, total_pages_field
from schema.paper import PaperConnection, paper_page
from schema.researcher import ResearcherConnection


async def _researchers(
    root: InstitutionRow, info: Info, first: int | None = None, after: str | None = None, page: int | None = None
) -> Connection[ResearcherRow]:
    return await resolve_researchers(
        info, query=None, sort="PAPER_COUNT", first=first, after=after, page=page, institution_id=root.id
    )


def _viewer_is_following(root: InstitutionRow, info: Info) -> bool | None | Awaitable[bool]:
    return viewer_is_following(info.context, "institution", root.id)


async def _papers(
    root: InstitutionRow,
    info: Info,
    filter: PaperFilter | None = None,
    sort: PaperSort | None = PaperSort.NEWEST,
    first: int | None = None,
    after: str | None = None,
    page: int | None = None,
) -> Connection[PaperRow]:
    return await paper_page(info, filter, sort, first, after, page, institution_id=root.id)


@strawberry.type(description="The institution's ids elsewhere; `institution(id:)` accepts each of them.")
class InstitutionExternalIds:
    ror: str = strawberry.field(description="The ROR id, bare: 05gq02987.")
    open_alex: str | None = strawberry.field(description="The OpenAlex institution id (I...).")


def _external_ids(root: InstitutionRow) -> InstitutionExternalIds:
    return InstitutionExternalIds(ror=root.ror_id, open_alex=root.openalex_id)


@strawberry.type(description="A research institution, identified by its ROR id.")
class Institution(Node):
    node_id: strawberry.ID = derived(institution_node_id, name="id", description=NODE_ID_DOC)
    id: int = strawberry.field(name="databaseId", description="The numeric database id.")
    slug: str = strawberry.field(description="URL slug: <id>-<name words> (/institutions/<slug>).")
    ror_id: str = strawberry.field(description="The ROR id, bare: 05gq02987 (https://ror.org/05gq02987).")
    name: str
    country: str | None = strawberry.field(description="ISO 3166-1 alpha-2 country code.")
    type: str | None = strawberry.field(description="ROR type: education, facility, company, …")
    aliases: list[str] = strawberry.field(
        description="Other names and acronyms the institution goes by (ROR's, through OpenAlex); "
        "`institution(id:)` finds it by any of them."
    )
    external_ids: InstitutionExternalIds = derived(_external_ids)
    modified_at: datetime = strawberry.field(
        description="When anything this API answers about the institution last changed (names, counts): the "
        "site's Last-Modified, and `changes(since:)`'s order. A paper's own text moves the paper's `modifiedAt`."
    )
    researchers: Connection[ResearcherRow] = strawberry.field(
        resolver=_researchers,
        graphql_type=ResearcherConnection | None,
        description="Researchers affiliated with the institution, most papers first. "
        "`first` 1 to 100 (default 24); `page` or `after`." + NESTED_NULL,
    )
    papers: Connection[PaperRow] = strawberry.field(
        resolver=_papers,
        graphql_type=PaperConnection | None,
        description="Papers with an author at the institution. `first` 1 to 100 (default 24); `page` or `after`; "
        "a page past the end is empty, with the true totals." + NESTED_NULL,
    )
    # Stored on the institution and refreshed by every write.
    paper_count: int = strawberry.field(
        description="Papers with an author at the institution, withdrawn ones left out: the `totalCount` of "
        "`papers` unfiltered."
    )
    researcher_count: int = strawberry.field(description="Researchers affiliated with the institution.")
    follower_count: int = strawberry.field(description="Signed-in readers following the institution.")
    viewer_is_following: bool | None | Awaitable[bool] = strawberry.field(
        resolver=_viewer_is_following,
        graphql_type=bool | None,
        description="Whether the signed-in reader follows the institution; null when anonymous.",
    )
    fields: list[FieldCountRow] = strawberry.field(
        resolver=institution_fields,
        graphql_type=list[FieldCount],
        description="The institution's papers per arXiv category (cross-lists included), most first; each `count` "
        "equals what `papers(filter: {category})` lists.",
    )
    top_researchers: list[ResearcherRow] | None = strawberry.field(
        resolver=institution_top_researchers,
        graphql_type=list[LazyResearcher] | None,
        description="Affiliated researchers by whole-career h-index, then citations. `first` 1 to 100 (default 10)."
        + NESTED_NULL,
    )

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, InstitutionRow)


@strawberry.type
class InstitutionEdge:
    cursor: str
    node: Institution


@strawberry.type(description="A page of institutions. Page with `page` or `after`, `first` 1 to 100 (default 24).")
class InstitutionConnection:
    total_count: int = total_count_field()
    total_pages: int = total_pages_field()
    page_info: PageInfo
    edges: list[InstitutionEdge]
    nodes: list[Institution]


@strawberry.type
class InstitutionQuery:
    @strawberry.field(
        description="An institution by numeric id, slug, ROR id (bare or URL), OpenAlex id, or one of its names, "
        "aliases or acronyms (exactly, ignoring case and accents: `MIT`); null when none matches. Never a guess: "
        "`institutions(query:)`, `autocomplete` and `resolvePath` find similar names and say so.",
        graphql_type=Institution | None,
    )
    async def institution(self, info: Info, id: str) -> InstitutionRow | None:
        look = Lookahead.of(info)
        return await resolve_institution(
            info.context, id, stats=look.selects("fields") or look.selects("topResearchers")
        )

    @strawberry.field(
        description="Institutions, optionally by name and country: `query` matches names ignoring case and "
        "diacritics, a typo tolerated, whatever the `sort`. `sort` defaults to RELEVANCE with a query, PAPER_COUNT "
        "without. `first` 1 to 100 (default 24); `page` or `after`.",
        graphql_type=InstitutionConnection,
    )
    async def institutions(
        self,
        info: Info,
        query: str | None = None,
        country: str | None = None,
        sort: InstitutionSort | None = None,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
    ) -> Connection[InstitutionRow]:
        return await resolve_institutions(
            info,
            query=query,
            country=country,
            sort=(sort or InstitutionSort.RELEVANCE).value,
            first=first,
            after=after,
            page=page,
        )
