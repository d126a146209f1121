from __future__ import annotations

from collections.abc import Awaitable
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import strawberry

from db.ids import arxiv_abs_url, arxiv_doi, arxiv_pdf_url
from db.queries.institutions import InstitutionRow
from db.queries.papers import AuthorshipRow, PaperRow, VersionRow
from db.queries.researchers import ResearcherRow
from db.records import SIGNIFICANCE_SCALE
from resolvers.context import Info
from resolvers.pagination import Connection, Lookahead
from resolvers.paper_authors import authorship_institutions, authorship_researcher, paper_authors, paper_versions
from resolvers.papers import resolve_paper, resolve_papers
from resolvers.search import resolve_similar_papers
from schema.derived import NODE_ID_DOC, derived, paper_node_id
from schema.enums import PaperSort, PaperType
from schema.inputs import PaperFilter, ResearcherPaperFilter
from schema.node import Node
from schema.pagination import NESTED_NULL, PageInfo, total_count_field, total_pages_field

if TYPE_CHECKING:
    from schema.institution import Institution
    from schema.researcher import Researcher

LazyInstitution = Annotated["Institution", strawberry.lazy("schema.institution")]


LazyResearcher = Annotated["Researcher", strawberry.lazy("schema.researcher")]
# Paper's own fields name it before the class exists.
LazyPaper = Annotated["Paper", strawberry.lazy("schema.paper")]


def _researcher(root: AuthorshipRow, info: Info) -> ResearcherRow | None | Awaitable[ResearcherRow | None]:
    return authorship_researcher(info.context, root)


def _institutions(root: AuthorshipRow, info: Info) -> list[InstitutionRow] | Awaitable[list[InstitutionRow]]:
    return authorship_institutions(info.context, root)


@strawberry.type(description="One author of a paper, in the paper's order.")
class Authorship:
    position: int = strawberry.field(description="1-based place in the author list.")
    name: str = strawberry.field(description="The name as the paper gives it.")
    researcher: ResearcherRow | None | Awaitable[ResearcherRow | None] = strawberry.field(
        resolver=_researcher,
        graphql_type=LazyResearcher | None,
        metadata={"prefetched": "prefetched_researcher"},
        description="The researcher profile this author is matched to; null until matched.",
    )
    institutions: list[InstitutionRow] | Awaitable[list[InstitutionRow]] = strawberry.field(
        resolver=_institutions,
        graphql_type=list[LazyInstitution],
        metadata={"prefetched": "prefetched_institutions"},
        description="The author's institutions on this paper, as OpenAlex identifies them (matched to a "
        "researcher or not).",
    )
    affiliation: str | None = strawberry.field(
        description="The affiliation text arXiv gives for this author, as written; null when it gives none."
    )
    is_collaboration: bool = strawberry.field(
        description="A collaboration (ATLAS Collaboration), not a person: never matched to a researcher."
    )


def _authors(root: PaperRow, info: Info) -> list[AuthorshipRow] | Awaitable[list[AuthorshipRow]]:
    return paper_authors(info.context, root)


@strawberry.type(description="One version of a paper as arXiv lists it.")
class PaperVersion:
    version: int = strawberry.field(description="The version number, from 1.")
    submitted_at: datetime = strawberry.field(description="When this version was submitted.")
    size_kb: int | None = strawberry.field(description="Its size in kB; 0 for a withdrawal notice.")
    source_type: str | None = strawberry.field(
        description="arXiv's source type code: D (TeX), P (PostScript), I (withdrawn: no source), ..."
    )


def _versions(root: PaperRow, info: Info) -> Awaitable[list[VersionRow]]:
    return paper_versions(info.context, root)


@strawberry.type(description="The paper's ids elsewhere; `paper(id:)` accepts each of them.")
class PaperExternalIds:
    arxiv: str = strawberry.field(name="arxiv", description="The arXiv id, as `arxivId`.")
    semantic_scholar: str | None = strawberry.field(description="Semantic Scholar paper id (40 hex digits).")
    semantic_scholar_corpus_id: str | None = strawberry.field(
        description="Semantic Scholar corpus id (digits; `paper(id:)` takes it as CorpusId:<n>)."
    )
    open_alex: str | None = strawberry.field(description="OpenAlex work id of the preprint (W...).")
    doi: str = strawberry.field(description="The DOI arXiv registers for the paper: 10.48550/arXiv.<arxivId>.")
    journal_doi: str | None = strawberry.field(description="The DOI of the published version, as arXiv lists it.")


def _abs_url(root: PaperRow) -> str:
    return arxiv_abs_url(root.arxiv_id)


def _pdf_url(root: PaperRow) -> str:
    return arxiv_pdf_url(root.arxiv_id)


def _external_ids(root: PaperRow) -> PaperExternalIds:
    return PaperExternalIds(
        arxiv=root.arxiv_id,
        semantic_scholar=root.s2_paper_id,
        semantic_scholar_corpus_id=str(root.s2_corpus_id) if root.s2_corpus_id is not None else None,
        open_alex=root.openalex_id,
        doi=arxiv_doi(root.arxiv_id),
        journal_doi=root.doi,
    )


async def _similar_papers(root: PaperRow, info: Info, first: int = 10) -> list[PaperRow]:
    return await resolve_similar_papers(info.context, root, first)


@strawberry.type(description="An arXiv paper at its latest version.")
class Paper(Node):
    node_id: strawberry.ID = derived(paper_node_id, name="id", description=NODE_ID_DOC)
    id: int = strawberry.field(name="databaseId", description="The numeric database id.")
    arxiv_id: str = strawberry.field(description="The arXiv id without version: 2401.01234, astro-ph/9901001.")
    version: int = strawberry.field(description="The latest version number.")
    slug: str = strawberry.field(description="URL slug: the arXiv id and title words (/papers/<slug>).")
    title: str
    abstract: str
    authors_text: str = strawberry.field(description="The authors as one display string, in order.")
    authors: list[AuthorshipRow] | Awaitable[list[AuthorshipRow]] = strawberry.field(
        resolver=_authors,
        graphql_type=list[Authorship],
        metadata={"prefetched": "prefetched_authors", "json": "prefetched_authors_json"},
        description="The authors, in order.",
    )
    categories: list[str] = strawberry.field(description="arXiv categories, primary first.")
    primary_category: str
    published: datetime = strawberry.field(description="When version 1 was submitted.")
    updated: datetime = strawberry.field(description="When the latest version was submitted.")
    abs_url: str = derived(_abs_url, description="https://arxiv.org/abs/<arxivId>")
    pdf_url: str = derived(_pdf_url, description="https://arxiv.org/pdf/<arxivId>")
    doi: str | None = strawberry.field(description="The DOI of the published version (`externalIds.journalDoi`).")
    journal_ref: str | None
    comments: str | None
    license: str | None = strawberry.field(
        description="The license URL arXiv gives (http://creativecommons.org/licenses/by/4.0/); null when none."
    )
    withdrawn: bool = strawberry.field(
        description="Whether the paper is withdrawn (its last version is a withdrawal notice, or arXiv deleted "
        "it). A withdrawn paper stays reachable by id and path; lists, feeds, counts and the sitemap leave it out "
        "unless `PaperFilter.withdrawn` asks for it."
    )
    versions: list[VersionRow] = strawberry.field(
        resolver=_versions,
        graphql_type=list[PaperVersion],
        metadata={"json": "prefetched_versions_json"},
        description="Every version, oldest first.",
    )
    external_ids: PaperExternalIds = derived(_external_ids)
    modified_at: datetime = strawberry.field(
        description="When anything this API answers about the paper last changed (metadata, versions, author "
        "matches, citations, analysis): the site's Last-Modified, and `changes(since:)`'s order."
    )
    cited_by_count: int | None = strawberry.field(description="Citations, when a source has counted them.")
    summary: str | None = strawberry.field(
        description="Analysis: two or three plain sentences on what the paper does and finds; null until analysed."
    )
    topics: list[str] | None = strawberry.field(
        description="Analysis: three to eight short topic phrases, most specific first; null until analysed."
    )
    paper_type: PaperType | None = strawberry.field(description="Analysis: the kind of paper; null until analysed.")
    research_field: str | None = strawberry.field(
        description="Analysis: the research field in a few words; null until analysed."
    )
    novelty: str | None = strawberry.field(
        description="Analysis: one sentence on what is new compared with earlier work; null until analysed."
    )
    significance_score: float | None = strawberry.field(
        description="Analysis: significance from 0 to 1, judged from the abstract alone; null until analysed. "
        + SIGNIFICANCE_SCALE
    )
    analysed: bool = strawberry.field(description="Whether the analysis fields are filled.")
    analysed_at: datetime | None = strawberry.field(
        description="When the current analysis was made; null until analysed (or for analyses older than this field)."
    )
    analysis_model: str | None = strawberry.field(
        description="The language model that made the analysis, as the server names it; null until analysed."
    )

    similar_papers: list[PaperRow] | None = strawberry.field(
        resolver=_similar_papers,
        graphql_type=list[LazyPaper] | None,
        description="The papers nearest this one in meaning (embeddings of title and abstract), most similar "
        "first; `first` 1 to 100. Empty when the paper has no embedding yet or the server has no pgvector."
        + NESTED_NULL,
    )

    @classmethod
    def is_type_of(cls, obj: Any, info: Any) -> bool:
        return isinstance(obj, PaperRow)


def _connection_nodes(root: Connection[PaperRow]) -> list[PaperRow]:
    # The page's rows; or, to the FastExecutor, its papers written as this field's answer (resolvers/papers.py).
    return root.nodes


@strawberry.type
class PaperEdge:
    cursor: str
    node: Paper


@strawberry.type(description="A page of papers. " + "Page with `page` or `after`, `first` 1 to 100 (default 24).")
class PaperConnection:
    total_count: int = total_count_field()
    total_pages: int = total_pages_field()
    page_info: PageInfo
    edges: list[PaperEdge]
    nodes: list[PaperRow] = strawberry.field(
        resolver=_connection_nodes,
        graphql_type=list[Paper],
        metadata={"prefetched": "nodes", "json": "nodes_json"},
    )


async def paper_page(
    info: Info,
    filter: PaperFilter | ResearcherPaperFilter | None,
    sort: PaperSort | None,
    first: int | None,
    after: str | None,
    page: int | None,
    **scope: int,
) -> Connection[PaperRow]:
    """One page of papers, optionally scoped to a researcher or an institution (`researcher_id=`...)."""
    return await resolve_papers(
        info,
        filter.to_args() if filter else None,
        sort=(sort or PaperSort.NEWEST).value,
        first=first,
        after=after,
        page=page,
        **scope,
    )


@strawberry.type
class PaperQuery:
    @strawberry.field(
        description="A paper by arXiv id (any version, old or new style), abs/pdf URL, arXiv DOI or slug; "
        "null when it is not in the archive.",
        graphql_type=Paper | None,
    )
    async def paper(self, info: Info, id: str) -> PaperRow | None:
        return await resolve_paper(info.context, id, Lookahead.of(info))

    @strawberry.field(
        description="Papers, filtered and sorted. `first` 1 to 100 (default 24); `page` or `after`.",
        graphql_type=PaperConnection,
    )
    async def papers(
        self,
        info: Info,
        filter: PaperFilter | None = None,
        sort: PaperSort | None = PaperSort.NEWEST,
        first: int | None = None,
        after: str | None = None,
        page: int | None = None,
    ) -> Connection[PaperRow]:
        return await paper_page(info, filter, sort, first, after, page)
