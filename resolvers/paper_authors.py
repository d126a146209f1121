"""A paper's authors: what a query selects of them, fetched for a page of papers at once, and their resolvers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from orjson import Fragment
from strawberry.dataloader import DataLoader

from db.queries.institutions import InstitutionRow, fetch_institutions_by_paper_ids
from db.queries.papers import AuthorshipRow, PaperRow, VersionRow, fetch_authorships
from db.queries.researchers import ResearcherRow
from db.queries.written import fetch_authors_json
from resolvers.context import Context
from resolvers.pagination import Lookahead, selects_node
from resolvers.written import AuthorsJson, authors_json


@dataclass(frozen=True, slots=True)
class AuthorsWanted:
    """What a query selects below a page's papers, decided by lookahead."""

    authors: bool
    researchers: bool
    institutions: bool
    # The selection's answer as PostgreSQL writes it, when it qualifies (resolvers/written.py).
    json: AuthorsJson | None = None

    @classmethod
    def of(cls, look: Lookahead) -> AuthorsWanted:
        return cls(
            selects_node(look, "authors"),
            selects_node(look, "authors", "researcher"),
            selects_node(look, "authors", "institutions"),
            authors_json(look.only("nodes", "authors") or look.only("edges", "node", "authors")),
        )

    @classmethod
    def of_paper(cls, look: Lookahead) -> AuthorsWanted:
        """Below one paper rather than a page of them."""
        return cls(
            look.selects("authors"),
            look.selects("authors", "researcher"),
            look.selects("authors", "institutions"),
            authors_json(look.only("authors")),
        )


def authors_loader(ctx: Context) -> DataLoader[tuple[PaperRow, AuthorsWanted], None]:
    async def load(keys: list[tuple[PaperRow, AuthorsWanted]]) -> list[None]:
        by_shape: defaultdict[AuthorsWanted, list[PaperRow]] = defaultdict(list)
        for row, wanted in keys:
            by_shape[wanted].append(row)
        for wanted, rows in by_shape.items():
            await fetch_authors(ctx, rows, wanted)
        return [None] * len(keys)

    # Rows are not hashable: a key is cached by the row's identity and the shape asked.
    return DataLoader(load, cache_key_fn=lambda key: (id(key[0]), key[1]), max_batch_size=100)


async def prefetch_authors(ctx: Context, look: Lookahead, papers: Sequence[PaperRow]) -> None:
    """Attach authorships (and, when selected, their researchers and institutions) to a page of papers:
    at most two statements for the whole page. Also usable by other page-shaped resolvers (search)."""
    wanted = AuthorsWanted.of(look)
    if wanted.authors:
        await fetch_authors(ctx, papers, wanted)


async def fetch_authors(ctx: Context, papers: Sequence[PaperRow], wanted: AuthorsWanted) -> None:
    ids = list(dict.fromkeys(p.id for p in papers))
    if wanted.json is not None and ctx.passes_json:
        statement = wanted.json.statement
        # Written already by the statement that read the page, when it could (a list read on its own).
        texts = {p.id: p.written_authors[1] for p in papers if p.written_authors and p.written_authors[0] is statement}
        missing = [pid for pid in ids if pid not in texts]
        if missing:
            async with ctx.pool.acquire() as conn:
                texts.update(await fetch_authors_json(conn, statement, missing))
        node = wanted.json.node()
        for p in papers:
            text = texts.get(p.id)
            if text is not None:
                p.prefetched_authors_json = (node, Fragment(text))
        papers = [p for p in papers if p.id not in texts]
        if not papers:
            return
        ids = [pid for pid in ids if pid not in texts]
    async with ctx.pool.acquire() as conn:
        authorships = await fetch_authorships(conn, ids, with_researchers=wanted.researchers)
        links = await fetch_institutions_by_paper_ids(conn, ids) if wanted.institutions else []
    attach_authors(ctx, papers, authorships, links, with_institutions=wanted.institutions)


def attach_authors(
    ctx: Context,
    papers: Sequence[PaperRow],
    authorships: Sequence[AuthorshipRow],
    links: Sequence[tuple[int, int, InstitutionRow]],
    *,
    with_institutions: bool,
) -> None:
    """Give each paper its authorships, their researchers and institutions (`links` holds one object per
    institution, the authorships one per researcher), and prime the loaders with them."""
    researchers: dict[int, ResearcherRow] = {}
    institutions: dict[int, InstitutionRow] = {}
    by_authorship: defaultdict[tuple[int, int], list[InstitutionRow]] = defaultdict(list)
    for paper_id, position, inst in links:
        by_authorship[(paper_id, position)].append(inst)
        institutions[inst.id] = inst
    by_paper: defaultdict[int, list[AuthorshipRow]] = defaultdict(list)
    for a in authorships:
        if a.prefetched_researcher is not None:
            researchers[a.prefetched_researcher.id] = a.prefetched_researcher
        if with_institutions:
            a.prefetched_institutions = by_authorship.get((a.paper_id, a.position), [])
        by_paper[a.paper_id].append(a)
    for p in papers:
        p.prefetched_authors = by_paper.get(p.id, [])
    ctx.loaders.prime_researchers(list(researchers.values()))
    ctx.loaders.prime_institutions(institutions.values())


def paper_authors(ctx: Context, paper: PaperRow) -> list[AuthorshipRow] | Awaitable[list[AuthorshipRow]]:
    if paper.prefetched_authors is not None:
        return paper.prefetched_authors
    return ctx.loaders.authorships_by_paper_id.load(paper.id)


def paper_versions(ctx: Context, paper: PaperRow) -> Awaitable[list[VersionRow]]:
    return ctx.loaders.versions_by_paper_id.load(paper.id)


def authorship_researcher(
    ctx: Context, authorship: AuthorshipRow
) -> ResearcherRow | None | Awaitable[ResearcherRow | None]:
    if authorship.prefetched_researcher is not None or authorship.researcher_id is None:
        return authorship.prefetched_researcher
    return ctx.loaders.researcher_by_id.load(authorship.researcher_id)


def authorship_institutions(
    ctx: Context, authorship: AuthorshipRow
) -> list[InstitutionRow] | Awaitable[list[InstitutionRow]]:
    if authorship.prefetched_institutions is not None:
        return authorship.prefetched_institutions
    return ctx.loaders.institutions_by_authorship.load((authorship.paper_id, authorship.position))
