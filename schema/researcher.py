from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, cast

import strawberry

from db.queries.researchers import ResearcherRow
from resolvers.pagination import Connection
from resolvers.papers import resolve_papers
from resolvers.researchers import researcher_institutions, resolve_researcher, resolve_researchers
from schema.enums import PaperSort, ResearcherSort
from schema.inputs import ResearcherPaperFilter
from schema.node import Node
from schema.pagination import TOTAL_COUNT_DOC, TOTAL_PAGES_DOC, PageInfo, total_count, total_pages
from schema.paper import PaperConnection, as_paper_connection
from schema.types import Info

if TYPE_CHECKING:
    from schema.institution import Institution


@strawberry.type(description="The researcher's ids in the sources behind the profile.")
class ExternalIds:
    s2_author_id: str | None = strawberry.field(name="semanticScholar", description="Semantic Scholar author id.")
    openalex_id: str | None = strawberry.field(name="openAlex", description="OpenAlex author id (A…).")
    orcid: str | None = strawberry.field(description="ORCID iD.")


LazyInstitution = Annotated["Institution", strawberry.lazy("schema.institution")]


def _external_ids(root: ResearcherRow) -> ExternalIds:
    return cast(ExternalIds, root)


def _institutions(root: ResearcherRow, info: Info) -> list[LazyInstitution]:
    return cast("list[Institution]", researcher_institutions(info.context, root))


async def _papers(
    root: ResearcherRow,
    info: Info,
    filter: ResearcherPaperFilter | None = None,
    sort: PaperSort | None = PaperSort.NEWEST,
    first: int | None = None,
    after: str | None = None,
    page: int | None = None,
) -> PaperConnection:
    connection = await resolve_papers(
        info,
        filter.to_args() if filter else None,
        sort=(sort or PaperSort.NEWEST).value,
        first=first,
        after=after,
        page=page,
        researcher_id=root.id,
    )
    return as_paper_connection(connection)


@strawberry.type(description="A researcher: an author profile matched across Semantic Scholar and OpenAlex.")
class Researcher(Node):
    id: int = strawberry.field(name="databaseId", description="The numeric database id.")
    slug: str = strawberry.field(description="URL slug: <id>-<name words> (/researchers/<slug>).")
    name: str
    external_ids: ExternalIds = strawberry.field(resolver=_external_ids)
    papers: PaperConnection = strawberry.field(
        resolver=_papers,
        description="The researcher's papers in this archive. `first` 1 to 100 (default 24); `page` or `after`.",
    )
    institutions: list[LazyInstitution] = strawberry.field(
        resolver=_institutions, description="Institutions the researcher is affiliated with, most recent first."
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
    total_count: int = strawberry.field(resolver=total_count, description=TOTAL_COUNT_DOC)
    total_pages: int = strawberry.field(resolver=total_pages, description=TOTAL_PAGES_DOC)
    page_info: PageInfo
    edges: list[ResearcherEdge]
    nodes: list[Researcher]


def as_researcher_connection(connection: Connection[ResearcherRow]) -> ResearcherConnection:
    return cast(ResearcherConnection, connection)


@strawberry.type
class ResearcherQuery:
    @strawberry.field(
        description="A researcher by numeric id, slug, s2:<Semantic Scholar id>, OpenAlex id or ORCID; "
        "null when not in the archive."
    )
    async def researcher(self, info: Info, id: str) -> Researcher | None:
        return cast("Researcher | None", await resolve_researcher(info.context, id))

    @strawberry.field(description="Researchers, optionally by name. `first` 1 to 100 (default 24); `page` or `after`.")
    async def researchers(
        self,
        info: Info,
        query: str | None = None,
        sort: ResearcherSort | None = ResearcherSort.PAPER_COUNT,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
    ) -> ResearcherConnection:
        connection = await resolve_researchers(
            info,
            query=query,
            sort=(sort or ResearcherSort.PAPER_COUNT).value,
            first=first,
            after=after,
            page=page,
        )
        return as_researcher_connection(connection)
