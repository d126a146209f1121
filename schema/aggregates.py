"""Aggregate types of researchers and institutions, and the field resolvers that add them."""

from __future__ import annotations

import asyncio
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import strawberry

from db.paging import encode_global_id
from db.queries.aggregates import FieldCountRow, ReportedFiguresRow, ResearcherStatsRow, WorkFiguresRow
from db.queries.institutions import InstitutionRow
from db.queries.papers import PaperRow
from db.queries.researchers import ResearcherRow
from resolvers.aggregates import (
    check_first,
    institution_stats,
    load_researcher_coauthors,
    load_researcher_network,
    researcher_rows,
    researcher_stats,
)
from resolvers.context import Info

if TYPE_CHECKING:
    from schema.paper import Paper
    from schema.researcher import Researcher

LazyResearcher = Annotated["Researcher", strawberry.lazy("schema.researcher")]
LazyPaper = Annotated["Paper", strawberry.lazy("schema.paper")]


@strawberry.type(
    description="How often the researcher is first, middle, last or sole author, counted only on "
    "papers where every author is matched to a researcher, so the position is known."
)
class AuthorPositionStats:
    first: int = strawberry.field(description="First of two or more authors.")
    middle: int = strawberry.field(description="Neither first nor last.")
    last: int = strawberry.field(description="Last of two or more authors.")
    solo: int = strawberry.field(description="The only author.")
    matched_papers: int = strawberry.field(description="K: the papers where every author is matched.")
    total_papers: int = strawberry.field(description="N: all of the researcher's papers in this archive.")


@strawberry.type(
    description="Papers in one arXiv category, counted as the lists count them (withdrawn papers left out): "
    "`count` is what `papers(filter: {category})` lists, `primaryCount` what `papers(filter: {category, "
    "primaryOnly: true})` lists."
)
class FieldCount:
    category: str = strawberry.field(description="arXiv category, e.g. cs.DC.")
    count: int = strawberry.field(
        description="Papers listed in the category, as primary or cross-list: the `totalCount` of the papers "
        "list filtered by `category`."
    )
    primary_count: int = strawberry.field(description="Papers whose primary category this is.")


@strawberry.type(description="Citations over the researcher's papers in this archive.")
class CitationSummary:
    total: int = strawberry.field(description="Sum of citation counts over the papers that have one.")
    papers_with_counts: int = strawberry.field(description="How many of the papers have a citation count.")


@strawberry.type(description="Figures computed over a set of works: each work counted once.")
class WorkFigures:
    h_index: int = strawberry.field(description="Largest h such that h works have at least h citations each.")
    i10_index: int = strawberry.field(description="Works with at least 10 citations.")
    citation_count: int = strawberry.field(description="Sum of the works' citations.")
    works_count: int = strawberry.field(description="Works in the set.")
    works_with_counts: int = strawberry.field(description="Works that have a citation count at all.")


@strawberry.enum(description="Where a set of researcher figures comes from.")
class MetricsSource(Enum):
    COMPUTED = "COMPUTED"
    SEMANTIC_SCHOLAR = "SEMANTIC_SCHOLAR"
    OPEN_ALEX = "OPEN_ALEX"


@strawberry.type(
    description="One source's researcher figures. COMPUTED is this archive's own count over the whole career "
    "(archive papers and both sources' works, each work once); a source's figures are as it reports them, "
    "with `listed` giving the same figures computed over only the works of that source held here, which "
    "explains most disagreements (an incomplete list, or different citation counts)."
)
class SourceMetrics:
    source: MetricsSource
    h_index: int | None = strawberry.field(description="Null when the source does not report it.")
    i10_index: int | None = strawberry.field(description="Null when the source does not report it.")
    citation_count: int | None = strawberry.field(description="Null when the source does not report it.")
    works_count: int | None = strawberry.field(description="Null when the source does not report it.")
    as_of: datetime | None = strawberry.field(description="When these figures were computed or fetched.")
    listed: WorkFigures | None = strawberry.field(
        description="Figures over the works of this source held here; null for COMPUTED."
    )


@strawberry.type(description="A researcher's figures side by side, per source.")
class ResearcherMetrics:
    computed: SourceMetrics
    semantic_scholar: SourceMetrics
    open_alex: SourceMetrics


@strawberry.type(description="A researcher who shares papers in this archive with another.")
class Coauthor:
    researcher: ResearcherRow = strawberry.field(graphql_type=LazyResearcher)
    shared_papers: int = strawberry.field(description="Papers in this archive they share.")
    first_year: int = strawberry.field(description="Year of the first shared paper.")
    last_year: int = strawberry.field(description="Year of the latest shared paper.")


@strawberry.type(description="A researcher in a co-author network.")
class NetworkNode:
    researcher: ResearcherRow = strawberry.field(graphql_type=LazyResearcher)
    depth: int = strawberry.field(description="0 for the centre, 1 for its co-authors, 2 for theirs.")
    weight: int = strawberry.field(description="Sum of the shared papers over this node's edges in the network.")


@strawberry.type(description="Two researchers in a network who share papers.")
class NetworkEdge:
    source: strawberry.ID = strawberry.field(description="Global id of one researcher (the lower database id).")
    target: strawberry.ID = strawberry.field(description="Global id of the other researcher.")
    shared_papers: int = strawberry.field(description="Papers in this archive they share.")


@strawberry.type(description="The co-author graph around a researcher, for drawing.")
class CoauthorNetwork:
    nodes: list[NetworkNode]
    edges: list[NetworkEdge]


@strawberry.input(description="Range filters on researchers' whole-career figures; every given bound must hold.")
class ResearcherFilter:
    min_h_index: int | None = strawberry.field(default=None, name="minHIndex", description="h-index at least this.")
    max_h_index: int | None = strawberry.field(default=None, name="maxHIndex", description="h-index at most this.")
    min_citations: int | None = strawberry.field(default=None, description="Citations at least this.")
    max_citations: int | None = strawberry.field(default=None, description="Citations at most this.")

    def to_ranges(self) -> dict[str, int | None]:
        return {
            "min_h_index": self.min_h_index,
            "max_h_index": self.max_h_index,
            "min_citations": self.min_citations,
            "max_citations": self.max_citations,
        }


# -- Researcher fields ------------------------------------------------------------------------------


async def _stats(root: ResearcherRow, info: Info) -> ResearcherStatsRow | None:
    return await asyncio.shield(researcher_stats(info.context, root.id))


async def researcher_h_index_in_archive(root: ResearcherRow, info: Info) -> int:
    stats = await _stats(root, info)
    return stats.archive.h_index if stats else 0


async def researcher_metrics(root: ResearcherRow, info: Info) -> ResearcherMetrics:
    stats = await _stats(root, info)
    if stats is None:
        empty = SourceMetrics(
            source=MetricsSource.COMPUTED,
            h_index=0,
            i10_index=0,
            citation_count=0,
            works_count=0,
            as_of=None,
            listed=None,
        )
        return ResearcherMetrics(computed=empty, semantic_scholar=empty, open_alex=empty)
    career = stats.career

    def reported(source: MetricsSource, r: ReportedFiguresRow, listed: WorkFiguresRow) -> SourceMetrics:
        return SourceMetrics(
            source=source,
            h_index=r.h_index,
            i10_index=r.i10_index,
            citation_count=r.citation_count,
            works_count=r.works_count,
            as_of=r.as_of,
            listed=_work_figures(listed),
        )

    return ResearcherMetrics(
        computed=SourceMetrics(
            source=MetricsSource.COMPUTED,
            h_index=career.h_index,
            i10_index=career.i10_index,
            citation_count=career.citation_count,
            works_count=career.works_count,
            as_of=stats.computed_at,
            listed=None,
        ),
        semantic_scholar=reported(MetricsSource.SEMANTIC_SCHOLAR, stats.s2_reported, stats.s2_listed),
        open_alex=reported(MetricsSource.OPEN_ALEX, stats.openalex_reported, stats.openalex_listed),
    )


def _work_figures(row: WorkFiguresRow) -> WorkFigures:
    return WorkFigures(
        h_index=row.h_index,
        i10_index=row.i10_index,
        citation_count=row.citation_count,
        works_count=row.works_count,
        works_with_counts=row.with_counts,
    )


async def researcher_author_positions(root: ResearcherRow, info: Info) -> AuthorPositionStats:
    s = await _stats(root, info)
    if s is None:
        return AuthorPositionStats(first=0, middle=0, last=0, solo=0, matched_papers=0, total_papers=0)
    return AuthorPositionStats(
        first=s.first,
        middle=s.middle,
        last=s.last,
        solo=s.solo,
        matched_papers=s.matched_papers,
        total_papers=s.paper_count,
    )


async def researcher_fields(root: ResearcherRow, info: Info) -> list[FieldCountRow]:
    s = await _stats(root, info)
    return s.fields if s else []


async def researcher_most_cited_paper(root: ResearcherRow, info: Info) -> PaperRow | None:
    s = await _stats(root, info)
    if s is None or s.most_cited_paper_id is None:
        return None
    return await info.context.loaders.paper_by_id.load(s.most_cited_paper_id)


async def researcher_citation_summary(root: ResearcherRow, info: Info) -> CitationSummary:
    s = await _stats(root, info)
    if s is None:
        return CitationSummary(total=0, papers_with_counts=0)
    return CitationSummary(total=s.citation_total, papers_with_counts=s.papers_with_counts)


async def researcher_coauthors(
    root: ResearcherRow,
    info: Info,
    first: Annotated[int | None, strawberry.argument(description="1 to 100.")] = 20,
) -> list[Coauthor] | None:
    ctx = info.context
    first = 20 if first is None else first
    rows = await load_researcher_coauthors(ctx.pool, ctx.cache, root.id, first=first)
    people = await researcher_rows(ctx, [r.researcher_id for r in rows])
    return [
        Coauthor(
            researcher=people[r.researcher_id],
            shared_papers=r.shared_papers,
            first_year=r.first_year,
            last_year=r.last_year,
        )
        for r in rows
        if r.researcher_id in people
    ]


async def researcher_network(
    root: ResearcherRow,
    info: Info,
    depth: Annotated[int | None, strawberry.argument(description="1 (co-authors) or 2 (and theirs).")] = 1,
    min_shared: Annotated[
        int | None, strawberry.argument(description="Least shared papers for a link, 1 to 1000.")
    ] = 1,
    limit: Annotated[int | None, strawberry.argument(description="Most nodes, centre included, 1 to 200.")] = 100,
) -> CoauthorNetwork | None:
    ctx = info.context
    depth = 1 if depth is None else depth
    min_shared = 1 if min_shared is None else min_shared
    limit = 100 if limit is None else limit
    net = await load_researcher_network(ctx.pool, ctx.cache, root.id, depth=depth, min_shared=min_shared, limit=limit)
    if net is None:
        return CoauthorNetwork(nodes=[], edges=[])
    people = await researcher_rows(ctx, [n.researcher_id for n in net.nodes])
    return CoauthorNetwork(
        nodes=[
            NetworkNode(researcher=people[n.researcher_id], depth=n.depth, weight=n.weight)
            for n in net.nodes
            if n.researcher_id in people
        ],
        edges=[
            NetworkEdge(
                source=strawberry.ID(encode_global_id("Researcher", e.source)),
                target=strawberry.ID(encode_global_id("Researcher", e.target)),
                shared_papers=e.shared_papers,
            )
            for e in net.edges
            if e.source in people and e.target in people
        ],
    )


# -- Institution fields -----------------------------------------------------------------------------


async def institution_fields(root: InstitutionRow, info: Info) -> list[FieldCountRow]:
    s = await asyncio.shield(institution_stats(info.context, root.id))
    return s.fields if s else []


async def institution_top_researchers(
    root: InstitutionRow,
    info: Info,
    first: Annotated[int | None, strawberry.argument(description="1 to 100.")] = 10,
) -> list[ResearcherRow] | None:
    ctx = info.context
    first = 10 if first is None else first
    check_first(first)
    s = await asyncio.shield(institution_stats(ctx, root.id))
    if s is None:
        return []
    ids = s.top_researcher_ids[:first]
    people = await researcher_rows(ctx, ids)
    return [people[i] for i in ids if i in people]
