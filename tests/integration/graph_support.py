"""A small hand-made archive for the graph tests, the app serving it, and a SQL statement counter.

Expected values in the tests are derived from the definitions here, never copied from responses.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
from starlette.applications import Starlette
from starlette.types import Receive, Scope, Send

from app import create_app
from db.migrate import migrate
from db.slugs import paper_slug, slugify
from schema import Schema
from settings import Settings


@dataclass(frozen=True)
class InstitutionSeed:
    key: str
    ror_id: str
    name: str
    country: str
    type: str = "education"
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResearcherSeed:
    key: str
    name: str
    s2: str | None = None
    openalex: str | None = None
    orcid: str | None = None
    institutions: tuple[str, ...] = ()


@dataclass(frozen=True)
class AuthorSeed:
    name: str
    researcher: str | None = None
    institutions: tuple[str, ...] = ()


@dataclass(frozen=True)
class PaperSeed:
    arxiv_id: str
    title: str
    categories: tuple[str, ...]
    published: datetime
    authors: tuple[AuthorSeed, ...]
    cited_by_count: int | None = None
    version: int = 1
    doi: str | None = None
    summary: str | None = None

    @property
    def slug(self) -> str:
        return paper_slug(self.arxiv_id, self.title)


INSTITUTIONS = (
    InstitutionSeed("umontreal", "0161xgx34", "Université de Montréal", "CA", aliases=("UdeM",)),
    InstitutionSeed("mit", "042nb2s44", "Massachusetts Institute of Technology", "US"),
    InstitutionSeed("tokyo", "057zh3y96", "University of Tokyo", "JP"),
)
RESEARCHERS = (
    ResearcherSeed("wumo", "Wumo Yan", "2109311836", "A5023888391", "0000-0002-1825-0097", ("umontreal",)),
    ResearcherSeed("ada", "Ada Lovelace", "1741101", None, None, ("mit", "tokyo")),
    ResearcherSeed("jose", "José Núñez", None, "A5000000001", None, ("tokyo",)),
)

BASE_DAY = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
WUMO_PAPERS = 30


def _wumo_paper(i: int) -> PaperSeed:
    """Paper i of Wumo Yan: positions cycle solo, first, middle, last; up to 8 authors."""
    shape = i % 4
    others = [AuthorSeed(f"Coauthor {i}-{k}") for k in range(1, 7 if i % 3 else 3)]
    others.insert(0, AuthorSeed("Ada Lovelace", "ada", ("mit", "tokyo")))
    wumo = AuthorSeed("Wumo Yan", "wumo", ("umontreal",))
    if shape == 0:
        authors: list[AuthorSeed] = [wumo]
    elif shape == 1:
        authors = [wumo, *others]
    elif shape == 2:
        authors = [others[0], wumo, *others[1:]]
    else:
        authors = [*others, wumo]
    categories = ("cs.DC", "cs.LG") if i % 2 == 0 else ("cs.LG", "stat.ML")
    # Papers 29 and 30 share a date: the id tie-break must order them.
    day = min(i, 29)
    return PaperSeed(
        arxiv_id=f"2401.{i:05d}",
        title=f"Distributed learning study number {i}",
        categories=categories,
        published=BASE_DAY + timedelta(days=day),
        authors=tuple(authors[:8]),
        cited_by_count=None if i % 7 == 0 else (i * 5) % 23,
        version=1 + i % 3,
        summary="A summary." if i % 5 == 0 else None,
    )


PAPERS: tuple[PaperSeed, ...] = (
    *(_wumo_paper(i) for i in range(1, WUMO_PAPERS + 1)),
    PaperSeed(
        "astro-ph/9901001",
        "Cosmic rays from old times",
        ("astro-ph",),
        datetime(1999, 1, 4, tzinfo=UTC),
        (AuthorSeed("José Núñez", "jose", ("tokyo",)), AuthorSeed("Unmatched Person")),
        cited_by_count=120,
        version=3,
        doi="10.1000/old.paper",
    ),
    PaperSeed(
        "2312.99999",
        "A paper without matched authors",
        ("math.GT",),
        datetime(2023, 12, 30, tzinfo=UTC),
        (AuthorSeed("Nobody Known"),),
    ),
)


@dataclass
class Seeded:
    dsn: str
    paper_ids: dict[str, int] = field(default_factory=dict)
    researcher_ids: dict[str, int] = field(default_factory=dict)
    institution_ids: dict[str, int] = field(default_factory=dict)


async def insert_paper(conn: asyncpg.Connection, seeded: Seeded, paper: PaperSeed) -> int:
    matched = sum(1 for a in paper.authors if a.researcher)
    paper_id: int = await conn.fetchval(
        """INSERT INTO papers (arxiv_id, version, slug, title, abstract, authors_text, categories, primary_category,
               published, updated, doi, cited_by_count, author_count, matched_count, summary, analysed)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16) RETURNING id""",
        paper.arxiv_id,
        paper.version,
        paper.slug,
        paper.title,
        f"Abstract of {paper.title}.",
        ", ".join(a.name for a in paper.authors),
        list(paper.categories),
        paper.categories[0],
        paper.published,
        paper.published + timedelta(days=paper.version - 1),
        paper.doi,
        paper.cited_by_count,
        len(paper.authors),
        matched,
        paper.summary,
        paper.summary is not None,
    )
    seeded.paper_ids[paper.arxiv_id] = paper_id
    for position, author in enumerate(paper.authors, start=1):
        researcher_id = seeded.researcher_ids[author.researcher] if author.researcher else None
        await conn.execute(
            "INSERT INTO authorships (paper_id, position, name, researcher_id) VALUES ($1, $2, $3, $4)",
            paper_id,
            position,
            author.name,
            researcher_id,
        )
        for key in author.institutions:
            await conn.execute(
                "INSERT INTO authorship_institutions (paper_id, position, institution_id) VALUES ($1, $2, $3)",
                paper_id,
                position,
                seeded.institution_ids[key],
            )
    return paper_id


async def seed(dsn: str) -> Seeded:
    seeded = Seeded(dsn)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        async with conn.transaction():
            for inst in INSTITUTIONS:
                seeded.institution_ids[inst.key] = await conn.fetchval(
                    """INSERT INTO institutions (ror_id, name, name_slug, aliases, country, type)
                       VALUES ($1, $2, $3, $4, $5, $6) RETURNING id""",
                    inst.ror_id,
                    inst.name,
                    slugify(inst.name),
                    list(inst.aliases),
                    inst.country,
                    inst.type,
                )
            for r in RESEARCHERS:
                seeded.researcher_ids[r.key] = await conn.fetchval(
                    """INSERT INTO researchers (name, name_slug, s2_author_id, openalex_id, orcid)
                       VALUES ($1, $2, $3, $4, $5) RETURNING id""",
                    r.name,
                    slugify(r.name),
                    r.s2,
                    r.openalex,
                    r.orcid,
                )
                for key in r.institutions:
                    await conn.execute(
                        "INSERT INTO researcher_institutions (researcher_id, institution_id) VALUES ($1, $2)",
                        seeded.researcher_ids[r.key],
                        seeded.institution_ids[key],
                    )
            for paper in PAPERS:
                await insert_paper(conn, seeded, paper)
            # The stored figures lists sort by, as the write path keeps them.
            await conn.execute(
                """UPDATE researchers r SET paper_count = (SELECT count(*) FROM authorships a
                   WHERE a.researcher_id = r.id)"""
            )
            await conn.execute(
                """UPDATE institutions i SET paper_count = (SELECT count(DISTINCT paper_id)
                   FROM authorship_institutions ai WHERE ai.institution_id = i.id),
                   researcher_count = (SELECT count(*) FROM researcher_institutions ri
                                       WHERE ri.institution_id = i.id)"""
            )
    finally:
        await conn.close()
    return seeded


# asyncpg's own type introspection: once per connection and type, when a fresh pooled connection first
# meets a type (text[], enums) - connection set-up, not work the operation asked for.
CONNECTION_SETUP = ("typeinfo_tree", "set_config('jit'", "pg_catalog.pg_type AS t")


class StatementCounter:
    """Counts SQL statements through asyncpg's query logger; `reset()` before the request to measure."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, record: Any) -> None:
        query: str = record.query
        if not any(marker in query for marker in CONNECTION_SETUP):
            self.statements.append(query)

    def reset(self) -> None:
        self.statements.clear()

    @property
    def count(self) -> int:
        return len(self.statements)


def settings_for(dsn: str, **overrides: Any) -> Settings:
    return Settings(DATABASE_URL=dsn, **overrides)


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """Run the app's lifespan and hand each request a copy of its state, as uvicorn does."""
    async with app.router.lifespan_context(app) as state:

        async def with_state(scope: Scope, receive: Receive, send: Send) -> None:
            await app({**scope, "state": dict(state or {})}, receive, send)

        transport = httpx.ASGITransport(app=with_state)
        async with httpx.AsyncClient(transport=transport, base_url="http://wovepaper.test") as client:
            yield client


@dataclass
class Graph:
    client: httpx.AsyncClient
    counter: StatementCounter
    seeded: Seeded

    async def query(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.client.post("/graphql", json={"query": query, "variables": variables or {}})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def data(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        body = await self.query(query, variables)
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    async def counted(self, query: str, variables: dict[str, Any] | None = None) -> tuple[dict[str, Any], int]:
        self.counter.reset()
        data = await self.data(query, variables)
        return data, self.counter.count


@contextlib.asynccontextmanager
async def graph(seeded: Seeded, *, schema: Schema | None = None, **settings: Any) -> AsyncIterator[Graph]:
    counter = StatementCounter()
    app = create_app(settings_for(seeded.dsn, **settings), schema=schema, query_logger=counter)
    async with serving(app) as client:
        yield Graph(client, counter, seeded)


_SEEDED: dict[str, Seeded] = {}


async def seeded_database(make_database: Callable[[str], Awaitable[str]], name: str = "graph") -> Seeded:
    """One seeded database per name for the whole session (tests that insert rows use their own name)."""
    if name not in _SEEDED:
        _SEEDED[name] = await seed(await make_database(name))
    return _SEEDED[name]
