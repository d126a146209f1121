"""After each committed batch the ingest makes the cache forget what it touched (real Redis)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import asyncpg
import httpx
import pytest

from db.cache import keys
from db.cache.client import create_redis
from db.cache.store import CacheStore
from db.records import Touched
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
    assert await cache.redis.exists(*keys.response_epochs(cache.namespace)) == 0


async def test_a_cached_paper_page_is_dropped_when_the_ingest_rewrites_the_paper(
    conn: asyncpg.Connection, clock: FakeClock, cache: CacheStore, ingest_dsn: str, redis_url: str
) -> None:
    """End to end: the site's PaperPage (tagged by the paper's global id, which names its arXiv id) cached, then
    the harvest rewrites the paper and the enrichment matches its authors: each time the next page is fresh."""
    from datetime import UTC, datetime

    from app import create_app
    from settings import Settings
    from tests.contract.conftest import operation_text
    from tests.ingest.conftest import list_records_page
    from tests.ingest.upstreams import arxiv_raw
    from tests.integration.graph_support import serving

    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock), cache=cache)
    app = create_app(Settings(DATABASE_URL=ingest_dsn, REDIS_URL=redis_url, cache_namespace=cache.namespace))
    body = {"query": operation_text("PaperPage"), "variables": {"id": "2304.05376"}, "operationName": "PaperPage"}
    async with serving(app) as client:

        async def page() -> tuple[str, dict[str, object]]:
            response = await client.post("/graphql", json=body)
            assert response.status_code == 200
            return response.headers["x-cache"], response.json()["data"]["paper"]

        assert (await page())[0] == "miss"
        cached, before = await page()
        assert cached == "hit" and before["version"] == 1
        revised = arxiv_raw(
            "2304.05376",
            "ChemCrow, revised",
            "Andres M. Bran, Sam Cox, Oliver Schilter, Carlo Baldassari, Andrew D. White, Philippe Schwaller",
            datetime(2023, 4, 11, 12, 0, tzinfo=UTC),
        ).replace(b'version="v1"', b'version="v2"')
        await harvest_arxiv(conn, FakeOAI(first=list_records_page([revised], "")).client(clock), cache=cache)
        cached, after = await page()
        assert cached == "miss" and (after["title"], after["version"]) == ("ChemCrow, revised", 2)
        assert (await page())[0] == "hit"
        s2, oa = clients(FakeScholarly(), clock)
        await enrich(conn, s2, oa, cache=cache)
        await s2.aclose()
        await oa.aclose()
        cached, matched = await page()
        assert cached == "miss" and matched["authors"][1]["researcher"]["name"] == "Sam Cox"


async def test_a_run_whose_last_drop_redis_did_not_take_sends_it_before_it_ends(
    conn: asyncpg.Connection, ingest_dsn: str, tmp_path: Path, cache_namespace: str
) -> None:
    """`ingest arxiv` with Redis frozen while its page commits: the page's drop times out and is kept, and the run
    sends it again before it ends, once Redis is back (a run that exited with it left stale answers until their
    TTL). Redis's own record of the drop: the paper's generation moved."""
    import localservers
    from ingest.runner import run_arxiv
    from settings import Settings
    from tests.ingest.loopback import serve

    server = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    namespace = f"{cache_namespace}-frozen"
    try:
        with serve(FakeOAI(first=enrich_archive_page()), FakeScholarly()) as upstreams:
            env = upstreams.env(ingest_dsn)
            settings = Settings(
                DATABASE_URL=ingest_dsn,
                REDIS_URL=server.url,
                cache_namespace=namespace,
                arxiv_oai_url=env["WOVEPAPER_ARXIV_OAI_URL"],
                arxiv_delay_s=0,
            )
            os.kill(server.pid, signal.SIGSTOP)
            asyncio.get_running_loop().call_later(3.0, os.kill, server.pid, signal.SIGCONT)
            summary = await run_arxiv(settings, from_=None, until=None, set_spec=None)
        assert summary.inserted == 3
        paper_id = await conn.fetchval("SELECT id FROM papers WHERE arxiv_id = '2304.05376'")
        redis = create_redis(server.url, timeout_s=2.0)
        try:
            assert int(await redis.get(keys.entity_generation(namespace, "paper", paper_id)) or 0) == 1
        finally:
            await redis.aclose()
    finally:
        if server.process.poll() is None:
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


async def test_a_harvest_stopped_while_it_writes_a_page_tells_the_cache_what_the_page_committed(
    conn: asyncpg.Connection, clock: FakeClock, cache: CacheStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C or SIGTERM cancels the run: the page being written still commits and the cache still forgets what it
    changed (else the answers showing it are stale until their TTL), and the run then stops."""
    import ingest.harvest as harvest_module

    writing = asyncio.Event()
    refresh = harvest_module.refresh_figures

    async def stopped_meanwhile(c: asyncpg.Connection, touched: Touched) -> None:
        writing.set()
        await asyncio.sleep(0.2)  # the run is cancelled here, inside the page's transaction
        await refresh(c, touched)

    monkeypatch.setattr(harvest_module, "refresh_figures", stopped_meanwhile)
    run = asyncio.create_task(harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock), cache=cache))
    await writing.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    paper_id = await conn.fetchval("SELECT id FROM papers WHERE arxiv_id = '2304.05376'")
    assert paper_id is not None
    assert await generation(cache, "paper", paper_id) == 1


async def test_an_enrichment_stopped_right_after_its_commit_tells_the_cache(
    conn: asyncpg.Connection, clock: FakeClock, cache: CacheStore
) -> None:
    """Cancelled while it reads the commit's WAL position, the drop of what the commit touched still happens."""
    from ingest.cache import tell_after_commit

    await harvest_arxiv(conn, FakeOAI(first=enrich_archive_page()).client(clock), cache=cache)
    paper_id = await conn.fetchval("SELECT id FROM papers WHERE arxiv_id = '2304.05376'")
    told = asyncio.create_task(tell_after_commit(cache, conn, Touched(papers={paper_id})))
    await asyncio.sleep(0)  # on its way: the position's round trip
    told.cancel()
    with pytest.raises(asyncio.CancelledError):
        await told
    assert await generation(cache, "paper", paper_id) == 2
