"""A small corpus with known answers for the search tests, inserted with plain SQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx

from app import create_app
from db.migrate import migrate
from tests.integration.graph_support import StatementCounter, serving, settings_for


@dataclass(frozen=True)
class P:
    key: str
    title: str
    abstract: str
    authors: str
    categories: tuple[str, ...]
    year: int
    cited: int | None


PAPERS = [
    P(
        "gnn_molecules",
        "Graph neural networks for molecule property prediction",
        "We apply message passing on molecular graphs to predict chemical properties of small molecules.",
        "Hans Müller, Anna Müller",
        ("cs.LG", "q-bio.BM"),
        2021,
        500,
    ),
    P(
        "transformer",
        "Attention is all you need",
        "We propose the Transformer, a sequence transduction architecture based solely on attention mechanisms, "
        "dispensing with recurrence and convolutions entirely, for machine translation.",
        "Ashish Vaswani, Noam Shazeer",
        ("cs.CL", "cs.LG"),
        2017,
        10000,
    ),
    P(
        "gat",
        "Graph attention networks",
        "We present graph attention networks, neural architectures operating on graph-structured data with "
        "masked self-attention layers.",
        "Petar Velickovic",
        ("stat.ML", "cs.LG"),
        2017,
        3000,
    ),
    P(
        "gnn_survey",
        "A survey of graph neural networks",
        "This survey reviews graph neural networks, their variants and their applications.",
        "Jie Zhou",
        ("cs.LG",),
        2020,
        50,
    ),
    P(
        "dark_matter",
        "Dark matter halos in galaxy clusters",
        "We measure the density profiles of dark matter halos in massive galaxy clusters with weak lensing.",
        "Jean-Luc Émile",
        ("astro-ph.CO",),
        2019,
        20,
    ),
    P(
        "grav_waves",
        "Gravitational waves from binary black hole mergers",
        "We report the observation of gravitational waves emitted by the merger of two black holes, detected "
        "by laser interferometers.",
        "Kip Thorne",
        ("gr-qc", "astro-ph.HE"),
        2016,
        1000,
    ),
    P(
        "qec",
        "Quantum error correction with surface codes",
        "Surface codes protect logical qubits against noise in a quantum computer with local stabilizer checks.",
        "John Preskill",
        ("quant-ph",),
        2018,
        300,
    ),
    P(
        "protein",
        "Protein structure prediction with deep learning",
        "A deep neural network predicts the three-dimensional structure of proteins from their amino acid sequence.",
        "John Jumper, Hans Müller",
        ("q-bio.BM", "cs.LG"),
        2021,
        800,
    ),
    P(
        "cnn",
        "Convolutional networks for image classification",
        "Deep convolutional neural networks classify natural images into a thousand categories.",
        "Alex Krizhevsky",
        ("cs.CV",),
        2015,
        5000,
    ),
    P(
        "gnn_revisited",
        "Graph neural networks revisited",
        "We revisit expressive power of graph neural networks and message passing.",
        "Wei Li",
        ("cs.LG",),
        2022,
        None,
    ),
    # Two papers whose text is identical: only the citation count separates their relevance.
    P(
        "spin_low",
        "Spin glasses and replica symmetry breaking",
        "Replica symmetry breaking in mean-field spin glasses.",
        "Giorgio Parisi",
        ("cond-mat.dis-nn",),
        2010,
        5,
    ),
    P(
        "spin_high",
        "Spin glasses and replica symmetry breaking",
        "Replica symmetry breaking in mean-field spin glasses.",
        "Marc Mézard",
        ("cond-mat.dis-nn",),
        2011,
        400,
    ),
    # A title with markup, to prove highlights are escaped before <mark> goes in.
    P(
        "markup",
        "Bounds on <i>chromatic</i> numbers & graph colouring",
        "Upper bounds on the chromatic number of sparse graphs.",
        "Paul Erdos",
        ("math.CO",),
        2005,
        10,
    ),
    # The query word only in the abstract, with the same citations as a title match.
    P(
        "abstract_only",
        "Sparse matrix methods",
        "Factorisations of sparse matrices; we also mention kernels for homology computations.",
        "Ada Lovelace",
        ("math.NA",),
        2012,
        7,
    ),
    P(
        "title_match",
        "Homology computations in practice",
        "Software for algebraic topology.",
        "Emmy Noether",
        ("math.AT",),
        2012,
        7,
    ),
]

RESEARCHERS = [
    # name, paper_count
    ("Hans Müller", 10),
    ("Anna Müller", 3),
    ("Jean-Luc Émile", 4),
    ("Wei Li", 2),
    ("Hannah Arendt", 1),
]

INSTITUTIONS = [
    # ror, name, country, paper_count
    ("0161xgx34", "Université de Montréal", "CA", 40),
    ("03dbr7087", "University of Toronto", "CA", 90),
    ("05a28rw58", "ETH Zürich", "CH", 70),
    ("04t3en479", "Karlsruhe Institute of Technology", "DE", 20),
]


@dataclass
class Corpus:
    dsn: str
    paper_ids: dict[str, int]
    researcher_ids: dict[str, int]
    institution_ids: dict[str, int]


async def load_corpus(dsn: str) -> Corpus:
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        paper_ids: dict[str, int] = {}
        for i, p in enumerate(PAPERS):
            published = datetime(p.year, 1 + i % 12, 1 + i, tzinfo=UTC)
            arxiv_id = f"{p.year % 100:02d}{1 + i % 12:02d}.{10000 + i:05d}"
            paper_ids[p.key] = await conn.fetchval(
                """INSERT INTO papers (arxiv_id, slug, title, abstract, authors_text, categories, primary_category,
                                       published, updated, cited_by_count)
                   VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9) RETURNING id""",
                arxiv_id,
                f"{arxiv_id}-{p.key}",
                p.title,
                p.abstract,
                p.authors,
                list(p.categories),
                p.categories[0],
                published,
                p.cited,
            )
        researcher_ids: dict[str, int] = {}
        for name, count in RESEARCHERS:
            researcher_ids[name] = await conn.fetchval(
                "INSERT INTO researchers (name, name_slug, paper_count) VALUES ($1, $2, $3) RETURNING id",
                name,
                name.lower().replace(" ", "-"),
                count,
            )
        institution_ids: dict[str, int] = {}
        for ror, name, country, count in INSTITUTIONS:
            institution_ids[name] = await conn.fetchval(
                """INSERT INTO institutions (ror_id, name, name_slug, country, paper_count)
                   VALUES ($1, $2, $3, $4, $5) RETURNING id""",
                ror,
                name,
                name.lower().replace(" ", "-"),
                country,
                count,
            )
        # Hans Müller moved from Toronto to ETH: his hint is the later one.
        await conn.executemany(
            "INSERT INTO researcher_institutions (researcher_id, institution_id, first_year, last_year)"
            " VALUES ($1, $2, $3, $4)",
            [
                (researcher_ids["Hans Müller"], institution_ids["University of Toronto"], 2010, 2015),
                (researcher_ids["Hans Müller"], institution_ids["ETH Zürich"], 2016, 2024),
                (researcher_ids["Jean-Luc Émile"], institution_ids["Université de Montréal"], 2015, 2020),
            ],
        )
        return Corpus(dsn, paper_ids, researcher_ids, institution_ids)
    finally:
        await conn.close()


class Api:
    def __init__(self, client: httpx.AsyncClient, counter: StatementCounter) -> None:
        self.client = client
        self.counter = counter

    async def query(self, query: str, **variables: Any) -> dict[str, Any]:
        response = await self.client.post("/graphql", json={"query": query, "variables": variables})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def data(self, query: str, **variables: Any) -> dict[str, Any]:
        body = await self.query(query, **variables)
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data

    async def error_code(self, query: str, **variables: Any) -> str:
        body = await self.query(query, **variables)
        assert body.get("errors"), body
        code: str = body["errors"][0]["extensions"]["code"]
        return code


@contextlib.asynccontextmanager
async def api_for(dsn: str, **settings: Any) -> AsyncIterator[Api]:
    counter = StatementCounter()
    app = create_app(settings_for(dsn, **settings), query_logger=counter)
    async with serving(app) as client:
        yield Api(client, counter)
