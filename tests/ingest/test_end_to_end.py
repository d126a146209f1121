"""Harvest and enrich into a fresh database, then ask the GraphQL API for a researcher's figures."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg

from app import create_app
from db.migrate import migrate
from ingest.pipeline import harvest_arxiv
from settings import Settings
from tests.ingest.conftest import FakeClock, FakeOAI
from tests.ingest.test_enrich import run_enrich
from tests.ingest.upstreams import CAREERS, S2_PAPERS, SAM_COX, FakeScholarly, enrich_archive_page
from tests.integration.graph_support import serving

QUERY = """
query ($id: String!) {
  researcher(id: $id) { name paperCount hIndex citationCount worksCount externalIds { semanticScholar openAlex } }
}
"""


def h_index(citations: list[int]) -> int:
    ranked = sorted(citations, reverse=True)
    return sum(1 for i, c in enumerate(ranked) if c >= i + 1)


async def test_harvest_enrich_then_the_api_answers_figures(make_database: Callable[[str], object]) -> None:
    dsn: str = await make_database("ingest_e2e")  # type: ignore[misc]
    conn = await asyncpg.connect(dsn)
    clock = FakeClock()
    try:
        await migrate(conn)
        summary = await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock))
        assert summary.inserted == 3
        enriched = await run_enrich(conn, FakeScholarly(), clock)
        assert enriched.failed == 0
    finally:
        await conn.close()

    # What the figures must be, from the upstream data: each work once, an archive paper's citations
    # are the archive's count (S2's citationCount of the paper).
    archive_counts = {aid: p["citationCount"] for aid, p in S2_PAPERS.items()}
    career = [archive_counts.get(ax, cites) if ax else cites for _, ax, _, cites in CAREERS[SAM_COX]]
    in_archive = [ax for _, ax, _, _ in CAREERS[SAM_COX] if ax in archive_counts]

    app = create_app(Settings(DATABASE_URL=dsn))
    async with serving(app) as client:
        response = await client.post("/graphql", json={"query": QUERY, "variables": {"id": f"s2:{SAM_COX}"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert "errors" not in body, body
    researcher = body["data"]["researcher"]
    assert researcher["name"] == "Sam Cox"
    assert researcher["externalIds"] == {"semanticScholar": SAM_COX, "openAlex": "A5101971357"}
    assert researcher["paperCount"] == len(in_archive) == 2
    assert researcher["hIndex"] == h_index(career)
    assert researcher["citationCount"] == sum(career)
    assert researcher["worksCount"] == len(career)
