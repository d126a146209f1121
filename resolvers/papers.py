"""Papers: look-up by any id form, filtered pages with their authors prefetched, relations."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Sequence
from copy import copy
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from orjson import Fragment
from strawberry.dataloader import DataLoader

from db.connection import Conn
from db.filters import (
    OWNER_FILTERS,
    PAPER_SORTS,
    AuthorPosition,
    Clause,
    PaperFilterSpec,
    Sort,
    Withdrawn,
    paper_filter_clauses,
)
from db.queries.papers import (
    PaperExternalIdKind,
    PaperRow,
    count_papers,
    count_papers_of_owners,
    fetch_paper_by_external_id,
    page_papers,
    page_papers_of_owners,
)
from db.queries.written import (
    ListedPaper,
    PaperStatement,
    fetch_papers_written,
    page_papers_of_owners_written,
    page_papers_written,
)
from resolvers.context import Context, Info
from resolvers.errors import BadUserInput
from resolvers.ids import PaperKeyKind, parse_paper_id
from resolvers.institutions import lookup_institution_id
from resolvers.pages import ListQuery, OwnerLists, read_page, with_after
from resolvers.pagination import NOTHING, Connection, Lookahead, PageRequest, page_request, wants_total
from resolvers.paper_authors import AuthorsWanted, authors_loader, fetch_authors
from resolvers.researchers import lookup_researcher_id
from resolvers.written import NodesJson, PaperJson, nodes_json, paper_json

MAX_CATEGORY_LENGTH = 40
_EXTERNAL_KINDS: dict[PaperKeyKind, PaperExternalIdKind] = {
    "doi": "doi",
    "s2": "s2",
    "corpus": "corpus",
    "openalex": "openalex",
}


@dataclass(frozen=True, slots=True)
class PaperFilterArgs:
    """The fields of the PaperFilter / ResearcherPaperFilter inputs, as given by the caller."""

    category: str | None = None
    primary_only: bool = False
    published_from: date | None = None
    published_to: date | None = None
    researcher: str | None = None
    institution: str | None = None
    author_position: AuthorPosition | None = None
    withdrawn: Withdrawn = "EXCLUDE"


async def resolve_paper(ctx: Context, paper_id: str, look: Lookahead = NOTHING) -> PaperRow | None:
    """A paper by any id form it has (withdrawn papers too: a look-up names one paper). What `look` selects of
    its authors (their researchers, institutions) comes in one more statement, or in the same one when
    PostgreSQL writes the answer (resolvers/written.py)."""
    written = paper_json(look.only("authors"), look.only("versions")) if ctx.passes_json else None
    key = parse_paper_id(paper_id)
    if written is not None and key.kind in ("arxiv", "slug", "id"):
        row = await _find_written(ctx, key.kind, key.value, key.slug, written)
    else:
        row = await _find_paper(ctx, paper_id)
    if row is not None and row.prefetched_authors is None and row.prefetched_authors_json is None:
        wanted = AuthorsWanted.of_paper(look)
        if wanted.authors:
            # Batched: several papers looked up in one request (aliases) share the statements. The versions, when
            # selected, load at the same time rather than after.
            loader = ctx.loaders.named("paper_authors", lambda: authors_loader(ctx))
            loads: list[Awaitable[object]] = [loader.load((row, wanted))]
            if look.selects("versions"):
                loads.append(ctx.loaders.versions_by_paper_id.load(row.id))
            await asyncio.gather(*loads)
    return row


WrittenKey = tuple[str, str | int, PaperJson]
Written = tuple[PaperRow, str | None, str | None]


async def _find_written(ctx: Context, kind: str, value: str, slug: str | None, written: PaperJson) -> PaperRow | None:
    """_find_paper's look-up, with the paper's lists written as JSON in the same statement (batched: papers looked
    up in one request share it)."""
    loader = ctx.loaders.named("written_papers", lambda: _written_loader(ctx))
    found: Written | None = None
    if kind == "slug" and slug is not None:
        found = await loader.load(("slug", slug, written))
    if found is None:
        found = await loader.load(("id", int(value), written) if kind == "id" else ("arxiv", value, written))
    if found is None:
        return None
    row, authors, versions = found
    if authors is not None:
        row.prefetched_authors_json = (written.authors(), Fragment(authors))
    if versions is not None and written.versions is not None:
        row.prefetched_versions_json = (written.versions(), Fragment(versions))
    ctx.loaders.prime_papers([row])
    return row


def _written_loader(ctx: Context) -> DataLoader[WrittenKey, Written | None]:
    async def load(keys: list[WrittenKey]) -> list[Written | None]:
        # Aliases ask with their own field nodes but, mostly, the same statement: one per statement.
        by_statement: defaultdict[PaperStatement, list[str | int]] = defaultdict(list)
        for kind, value, written in keys:
            by_statement[written.statements[kind]].append(value)
        found: dict[PaperStatement, dict[str | int, Written]] = {}
        async with ctx.pool.acquire() as conn:
            for statement, values in by_statement.items():
                found[statement] = await fetch_papers_written(conn, statement, list(dict.fromkeys(values)))
        answers: list[Written | None] = []
        given: set[int] = set()
        for kind, value, written in keys:
            hit = found[written.statements[kind]].get(value)
            if hit is not None and id(hit[0]) in given:
                # The same paper for another selection: its own row, to carry its own written answers.
                hit = (copy(hit[0]), hit[1], hit[2])
            if hit is not None:
                given.add(id(hit[0]))
            answers.append(hit)
        return answers

    return DataLoader(load, max_batch_size=100)


async def _find_paper(ctx: Context, paper_id: str) -> PaperRow | None:
    key = parse_paper_id(paper_id)
    loaders = ctx.loaders
    if key.kind == "slug" and key.slug is not None:
        row = await loaders.paper_by_slug.load(key.slug)
        if row is not None:
            return row
    if key.kind in ("arxiv", "slug"):
        return await loaders.paper_by_arxiv_id.load(key.value)
    if key.kind == "id":
        return await loaders.paper_by_id.load(int(key.value))
    external = _EXTERNAL_KINDS.get(key.kind)
    if external is None:
        return None
    async with ctx.pool.acquire() as conn:
        found = await fetch_paper_by_external_id(conn, external, key.value)
    if found is not None:
        loaders.prime_papers([found])
    return found


def _day_start(d: date) -> datetime:
    return datetime.combine(d, time.min, tzinfo=UTC)


async def paper_filter_spec(
    ctx: Context,
    args: PaperFilterArgs | None,
    *,
    researcher_id: int | None = None,
    institution_id: int | None = None,
) -> PaperFilterSpec:
    """Check a filter and resolve the ids it names; a name that matches nothing matches no paper.

    `researcher_id` / `institution_id`: the list's owner (a researcher's or an institution's papers)."""
    owner_institutions = (institution_id,) if institution_id is not None else ()
    if args is None:
        return PaperFilterSpec(researcher_id=researcher_id, institution_ids=owner_institutions)
    category = args.category.strip() if args.category else None
    if category is not None and (not category or len(category) > MAX_CATEGORY_LENGTH):
        raise BadUserInput("`category` must be an arXiv category such as cs.DC.")
    if args.published_from and args.published_to and args.published_from > args.published_to:
        raise BadUserInput("`publishedFrom` is after `publishedTo`.")
    if args.author_position is not None and researcher_id is None and args.researcher is None:
        raise BadUserInput("`authorPosition` needs a researcher.")
    filter_institution = (
        await lookup_institution_id(ctx, args.institution, argument="filter.institution") if args.institution else None
    )
    if args.researcher is not None:
        found = await lookup_researcher_id(ctx, args.researcher)
        if found is None:
            return PaperFilterSpec(matches_nothing=True)
        # Both a researcher filter and the researcher's own list: the paper must be both's.
        if researcher_id is not None and found != researcher_id:
            return PaperFilterSpec(matches_nothing=True)
        researcher_id = found
    if args.institution and filter_institution is None:
        return PaperFilterSpec(matches_nothing=True)
    institution_ids = owner_institutions
    if filter_institution is not None and filter_institution not in institution_ids:
        institution_ids = (*institution_ids, filter_institution)
    return PaperFilterSpec(
        category=category,
        primary_only=args.primary_only,
        published_from=_day_start(args.published_from) if args.published_from else None,
        # `publishedTo` is inclusive: everything before the next day.
        published_before=_day_start(args.published_to + timedelta(days=1)) if args.published_to else None,
        researcher_id=researcher_id,
        institution_ids=institution_ids,
        author_position=args.author_position,
        withdrawn=args.withdrawn,
    )


@dataclass(frozen=True, slots=True)
class OwnerPageKey:
    """One owner's page; keys that differ only in `owner_id` share one statement."""

    owner_id: int
    owner: str  # an OWNER_FILTERS key
    spec: PaperFilterSpec  # the filter without the owner
    sort: str
    request: PageRequest
    want_total: bool
    wanted: AuthorsWanted
    written: NodesJson | None = None  # the page's papers written whole (written_nodes)

    @property
    def group(self) -> tuple[object, ...]:
        return (self.owner, self.spec, self.sort, self.request, self.want_total, self.written)


async def _owner_rows(conn: Conn, head: OwnerPageKey, owner_ids: list[int]) -> dict[int, list[PaperRow | ListedPaper]]:
    clauses = with_after(paper_filter_clauses(head.spec), head.request.after)
    owner, sort = OWNER_FILTERS[head.owner], PAPER_SORTS[head.sort]
    limit, offset = head.request.first + 1, head.request.offset
    count = head.want_total
    if head.written is not None:
        statement = head.written.statement
        written = await page_papers_of_owners_written(
            conn, owner, owner_ids, clauses, sort, statement, limit=limit, offset=offset, count=count
        )
        if written is not None:
            return written  # type: ignore[return-value]  # (lists are invariant)
    return await page_papers_of_owners(conn, owner, owner_ids, clauses, sort, limit=limit, offset=offset, count=count)  # type: ignore[return-value]


async def _owner_counts(conn: Conn, head: OwnerPageKey, owner_ids: list[int]) -> dict[int, int]:
    return await count_papers_of_owners(conn, OWNER_FILTERS[head.owner], owner_ids, paper_filter_clauses(head.spec))


def _owner_lists(ctx: Context) -> OwnerLists[OwnerPageKey, PaperRow | ListedPaper]:
    async def after_read(pages: list[tuple[OwnerPageKey, list[PaperRow | ListedPaper]]]) -> None:
        # Authors for every page of the batch at once, per lookahead shape (almost always one); none for pages
        # written whole.
        by_shape: defaultdict[AuthorsWanted, list[PaperRow]] = defaultdict(list)
        for key, nodes in pages:
            by_shape[key.wanted] += [n for n in nodes if type(n) is PaperRow]
        for wanted, papers in by_shape.items():
            ctx.loaders.prime_papers(papers)
            if wanted.authors and papers:
                await fetch_authors(ctx, papers, wanted)

    return OwnerLists("owner_paper_pages", _owner_rows, _owner_counts, after_read)


def written_nodes(ctx: Context, look: Lookahead) -> NodesJson | None:
    """How the page's `nodes` are written whole by PostgreSQL (resolvers/written.py): when the executor passes JSON
    on and the list selects its papers once, as `nodes` only (`edges` would need the rows)."""
    if not ctx.passes_json or look.selects("edges"):
        return None
    return nodes_json(look.only("nodes"), look.fragments)


def paper_list(ctx: Context, clauses: list[Clause], sort: Sort, look: Lookahead) -> ListQuery[PaperRow]:
    """Papers passing `clauses`; a page read on its own primes the loaders and prefetches what `look` selects: its
    authors written by the statement that reads the page when PostgreSQL can write them (resolvers/written.py),
    and the list's total with them when the statement can read it (a category's page by date)."""
    wanted = AuthorsWanted.of(look)
    authors = wanted.json.statement if wanted.json is not None and ctx.passes_json else None
    count = wants_total(look)

    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> list[PaperRow]:
        clauses_after = with_after(clauses, after)
        return await page_papers(conn, clauses_after, sort, limit=limit, offset=offset, authors=authors, count=count)

    async def count_all(conn: Conn) -> int:
        return await count_papers(conn, clauses)

    async def after_read(nodes: list[PaperRow]) -> None:
        ctx.loaders.prime_papers(nodes)
        if nodes and wanted.authors:
            await fetch_authors(ctx, nodes, wanted)

    return ListQuery(sort, rows, count_all, after_read)


def written_paper_list(
    rows_list: ListQuery[PaperRow], clauses: list[Clause], written: NodesJson, count: bool
) -> ListQuery[PaperRow | ListedPaper]:
    """`rows_list` with each paper of a page written as its node by the statement that reads the page; a page with
    a paper that cannot be written is read as `rows_list` reads it."""
    sort = rows_list.sort

    async def rows(conn: Conn, after: Clause | None, limit: int, offset: int) -> Sequence[PaperRow | ListedPaper]:
        listed = await page_papers_written(
            conn, with_after(clauses, after), sort, written.statement, limit=limit, offset=offset, count=count
        )
        return listed if listed is not None else await rows_list.rows(conn, after, limit, offset)

    async def after_read(nodes: list[PaperRow | ListedPaper]) -> None:
        if rows_list.after_read is not None and nodes and type(nodes[0]) is PaperRow:
            await rows_list.after_read(nodes)  # type: ignore[arg-type]  # rows, all of them

    return ListQuery(sort, rows, rows_list.count, after_read)


def _pass_written(page: Connection[Any], written: NodesJson | None) -> None:
    """A page read as written nodes answers its `nodes` node with them, as one JSON array."""
    node = written.node() if written is not None else None
    if node is not None and page.nodes and type(page.nodes[0]) is ListedPaper:
        page.nodes_json = (node, Fragment("[" + ",".join([p.node for p in page.nodes]) + "]"))


async def resolve_papers(
    info: Info,
    args: PaperFilterArgs | None,
    *,
    sort: str,
    first: int | None,
    after: str | None,
    page: int | None,
    researcher_id: int | None = None,
    institution_id: int | None = None,
) -> Connection[PaperRow]:
    """A page of papers. What the query selects below the page (authors, their researchers and
    institutions, the total) is fetched here in a fixed number of statements, whatever the page size.

    With an owner (`researcher_id`: a researcher's papers, `institution_id`: an institution's), the
    pages of every owner resolved together (a list of researchers, each with its papers) are fetched
    in one batch: the statement count does not grow with the number of owners."""
    ctx = info.context
    sort_spec = PAPER_SORTS[sort]
    request = page_request(sort_spec, first=first, after=after, page=page)
    spec = await paper_filter_spec(ctx, args, researcher_id=researcher_id, institution_id=institution_id)
    look = Lookahead.of(info)
    want_total = wants_total(look)
    written = written_nodes(ctx, look)
    owner_key = _owner_key(spec, researcher_id, institution_id, sort, request, want_total, look, written)
    owned = (_owner_lists(ctx), owner_key) if owner_key is not None else None
    clauses = paper_filter_clauses(spec)
    query: ListQuery[Any] = paper_list(ctx, clauses, sort_spec, look)
    if written is not None and owned is None:
        query = written_paper_list(query, clauses, written, want_total)
    listed = await read_page(ctx, query, request, want_total=want_total, owned=owned)
    _pass_written(listed, written)
    return listed


def _owner_key(
    spec: PaperFilterSpec,
    researcher_id: int | None,
    institution_id: int | None,
    sort: str,
    request: PageRequest,
    want_total: bool,
    look: Lookahead,
    written: NodesJson | None,
) -> OwnerPageKey | None:
    """The spec split into its owner and the rest, when the list has an owner and still matches something."""
    if spec.matches_nothing:
        return None
    if researcher_id is not None and spec.researcher_id == researcher_id:
        owner = f"position_{spec.author_position.lower()}" if spec.author_position else "researcher"
        rest = replace(spec, researcher_id=None, author_position=None)
        return OwnerPageKey(researcher_id, owner, rest, sort, request, want_total, AuthorsWanted.of(look), written)
    if institution_id is not None and spec.institution_ids[:1] == (institution_id,):
        rest = replace(spec, institution_ids=spec.institution_ids[1:])
        return OwnerPageKey(
            institution_id, "institution", rest, sort, request, want_total, AuthorsWanted.of(look), written
        )
    return None
