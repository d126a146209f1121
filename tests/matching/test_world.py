"""The generated matching world (world.py) ingested by the real harvest and enrichment from loopback upstreams,
scored by pairwise precision and recall per kind of trouble, then enriched again to show no link moves."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest

from app import create_app
from db.migrate import migrate
from ingest.runner import run_enrich
from settings import Settings
from tests.integration.graph_support import serving as serving_app
from tests.matching import score
from tests.matching.upstreams import Upstreams, serving
from tests.matching.world import World, generate

PRECISION = 0.999
RECALL = 0.99


@pytest.fixture(scope="module")
def world() -> World:
    return generate(seed=39, papers=220)


@pytest.fixture(scope="module")
async def dsn(make_database: Callable[[str], Awaitable[str]], world: World) -> AsyncIterator[str]:
    url = await make_database("matching_world")
    conn = await asyncpg.connect(url)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    await score.ingest(url, world)
    yield url


@pytest.fixture
async def conn(dsn: str) -> AsyncIterator[asyncpg.Connection]:
    c = await asyncpg.connect(dsn)
    try:
        yield c
    finally:
        await c.close()


async def test_precision_and_recall_per_kind(conn: asyncpg.Connection, world: World) -> None:
    links = await score.read_links(conn)
    every = score.score(world, links)
    with_s2 = score.score(world, links, s2_only=True)
    print()  # the figures, for `pytest -s` and the record
    print(score.table(every, "every person"))
    print(score.table(with_s2, "people with an S2 profile"))
    for figures in (every, with_s2):
        overall = figures["all"]
        assert overall.precision >= PRECISION and overall.recall >= RECALL, overall
        # A wrong link in any kind is a paper on someone else's page.
        assert all(f.wrong_links == 0 and f.wrong_merges == 0 for f in figures.values()), figures
    # Every kind of trouble is in the world and most of its positions are linked.
    assert set(every) == {"all", *score.KINDS}
    for kind, f in every.items():
        assert f.recall >= 0.75, (kind, f)


async def test_every_merged_s2_id_leads_to_its_survivor(conn: asyncpg.Connection, world: World) -> None:
    resolved, olds = await score.merged_ids_resolved(conn, world)
    assert olds >= 6 and resolved == olds


async def test_merged_ids_through_the_api(dsn: str, world: World, redis_url: str, cache_namespace: str) -> None:
    app = create_app(Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, cache_namespace=f"{cache_namespace}-mw"))
    person = next(p for p in world.people.values() if p.old_s2 and p.merged_in_phase == 1)
    async with serving_app(app) as client:
        body = await _graphql(
            client,
            "query($id: String!, $path: String!) { researcher(id: $id) { externalIds { semanticScholar } }"
            " resolvePath(path: $path) { redirect matchedBy path } }",
            id=f"s2:{person.old_s2}",
            path=f"/researchers/s2:{person.old_s2}",
        )
    assert body["researcher"] == {"externalIds": {"semanticScholar": person.s2}}
    found = body["resolvePath"]
    assert found["redirect"] is True and found["matchedBy"] == "MERGED" and found["path"].startswith("/researchers/")


async def _graphql(client: httpx.AsyncClient, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post("/graphql", json={"query": query, "variables": variables})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert "errors" not in body, body
    data: dict[str, Any] = body["data"]
    return data


async def test_enriching_again_changes_no_link(conn: asyncpg.Connection, dsn: str, world: World) -> None:
    before = await score.read_links(conn)
    evidence = "SELECT count(*) FROM authorships WHERE link_evidence IS NOT NULL"
    with_evidence = await conn.fetchval(evidence)
    await conn.execute("UPDATE papers SET enriched_at = NULL")
    state = Upstreams(world)
    state.phase = 2
    with serving(state) as base:
        settings = Settings(
            DATABASE_URL=dsn,
            s2_api_url=f"{base}/s2",
            s2_rps=1_000_000,
            openalex_api_url=f"{base}/oa",
            openalex_rps=1_000_000,
        )
        summary = await run_enrich(settings, limit=None)
    assert summary.failed == 0 and summary.seen == len(world.papers)
    assert await score.read_links(conn) == before
    assert await conn.fetchval(evidence) == with_evidence


async def test_every_researcher_is_named_as_a_source_names_them(conn: asyncpg.Connection, world: World) -> None:
    names = {p.name for p in world.people.values()}
    stored = [r[0] for r in await conn.fetch("SELECT name FROM researchers")]
    assert stored and all(n in names for n in stored), [n for n in stored if n not in names][:5]
