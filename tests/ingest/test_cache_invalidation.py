"""After each committed batch the ingest makes the cache forget what it touched (real Redis)."""

from __future__ import annotations

import asyncpg
import httpx

from db.cache import keys
from db.cache.store import CacheStore
from ingest.pipeline import enrich, harvest_arxiv
from tests.ingest.conftest import FakeClock, FakeOAI
from tests.ingest.test_enrich import clients
from tests.ingest.upstreams import SAM_COX, FakeScholarly, enrich_archive_page


async def generation(cache: CacheStore, kind: str, entity_id: int) -> int:
    assert cache.redis is not None
    return int(await cache.redis.get(keys.entity_generation(cache.namespace, kind, entity_id)) or 0)


async def test_harvest_and_enrich_invalidate_touched_entities(
    conn: asyncpg.Connection, clock: FakeClock, cache: CacheStore
) -> None:
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock), cache=cache)
    paper_id = await conn.fetchval("SELECT id FROM papers WHERE arxiv_id = '2304.05376'")
    assert await generation(cache, "paper", paper_id) == 1

    s2, oa = clients(FakeScholarly(), clock)
    await enrich(conn, s2, oa, cache=cache)
    await s2.aclose()
    await oa.aclose()
    researcher_id = await conn.fetchval("SELECT id FROM researchers WHERE s2_author_id = $1", SAM_COX)
    assert await generation(cache, "researcher", researcher_id) >= 1
    assert await generation(cache, "paper", paper_id) == 2
    rochester = await conn.fetchval("SELECT id FROM institutions WHERE ror_id = '022kthw22'")
    assert await generation(cache, "institution", rochester) >= 1

    # A run that changes nothing invalidates nothing.
    before = await generation(cache, "paper", paper_id)
    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock), cache=cache)
    assert await generation(cache, "paper", paper_id) == before


async def test_a_failed_page_invalidates_nothing(conn: asyncpg.Connection, clock: FakeClock, cache: CacheStore) -> None:
    oai = FakeOAI(first=enrich_archive_page())
    oai.script[0] = httpx.Response(400)
    await harvest_arxiv(conn, oai.client(clock), cache=cache)
    assert cache.redis is not None
    assert await cache.redis.get(keys.response_epoch(cache.namespace)) is None
