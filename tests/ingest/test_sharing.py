"""`ingest arxiv` on a host it shares with the site: it waits for a strained site, and says so."""

from __future__ import annotations

import asyncpg
import pytest

from db.cache import keys
from db.cache.store import CacheStore
from db.cache.strain import StrainReporter
from ingest.runner import run_arxiv
from settings import Settings
from tests.ingest.conftest import three_page_archive
from tests.ingest.loopback import serve
from tests.ingest.upstreams import FakeScholarly


# At the whole share two connections write two pages at once, and the wait comes once both committed: before the
# third page. A share below 1 writes one page at a time (two would take two of PostgreSQL's cores at once), and
# waits before each page after the first.
@pytest.mark.parametrize(("share", "waited_s", "waited"), [(1.0, 0.5, "0.5"), (0.5, 1.0, "1.0")])
async def test_a_harvest_waits_for_a_strained_site_at_most_the_yield_between_pages(
    conn: asyncpg.Connection,
    ingest_dsn: str,
    redis_url: str,
    cache: CacheStore,
    share: float,
    waited_s: float,
    waited: str,
) -> None:
    reporter = StrainReporter(cache, cache.namespace, waiting=lambda: 2)
    reporter.sample(0.0)
    await reporter.settle()
    assert cache.redis is not None
    assert await cache.redis.pexpire(keys.strain(cache.namespace), 60_000)  # strained throughout
    with serve(three_page_archive(), FakeScholarly()) as upstreams:
        settings = Settings(
            DATABASE_URL=ingest_dsn,
            REDIS_URL=redis_url,
            cache_namespace=cache.namespace,
            arxiv_oai_url=upstreams.env(ingest_dsn)["WOVEPAPER_ARXIV_OAI_URL"],
            arxiv_delay_s=0,
            ingest_share=share,
            ingest_yield_s=0.5,
        )
        summary = await run_arxiv(settings, from_=None, until=None, set_spec=None)
    assert summary.seen == 8 and summary.inserted == 8 and summary.failed == 0
    assert await conn.fetchval("SELECT count(*) FROM papers") == 8
    assert summary.yielded_s == pytest.approx(waited_s)
    assert summary.line("arxiv").endswith(f", waited {waited} s for a strained site")
