"""Loopback upstreams for the ingest: recorded OAI-PMH pages (and pages derived from them) behind
httpx.MockTransport, a fake clock so nothing sleeps, and a fresh migrated database per test."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import asyncpg
import httpx
import pytest
from lxml import etree

from db.cache.client import create_redis
from db.cache.store import CacheStore
from db.migrate import migrate
from ingest.clients.arxiv_oai import ArxivOAIClient
from ingest.clients.http import RetryPolicy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
OAI_CURRENT = FIXTURES / "arxiv_oai" / "generated_current_server"
OAI_LEGACY = FIXTURES / "arxiv_oai" / "recorded_legacy"
OAI_NS = "http://www.openarchives.org/OAI/2.0/"


class FakeClock:
    """Time that moves only when someone sleeps; every sleep is recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def fixture_records(path: Path) -> list[bytes]:
    """The <record> elements of a recorded response, serialized with their namespaces."""
    root = etree.parse(str(path)).getroot()
    return [etree.tostring(r) for r in root.iter(f"{{{OAI_NS}}}record")]


def list_records_page(records: list[bytes], token: str | None, response_date: str = "2026-11-30T00:47:01Z") -> bytes:
    """A ListRecords response in the 2025 server's shape; token '' gives the empty final `<resumptionToken/>`."""
    tok = (
        ""
        if token is None
        else (
            "<resumptionToken/>"
            if token == ""
            else f"<resumptionToken expirationDate='2026-12-01T00:00:00Z'>{token}</resumptionToken>"
        )
    )
    body = b"\n".join(records)
    return (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
        + f"<responseDate>{response_date}</responseDate>".encode()
        + b'<request verb="ListRecords">https://oaipmh.arxiv.org/oai</request><ListRecords>'
        + body
        + tok.encode()
        + b"</ListRecords></OAI-PMH>"
    )


def oai_error(code: str, message: str = "") -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?><OAI-PMH xmlns="http://www.openarchives.org/OAI/2.0/">'
        f"<responseDate>2026-11-30T00:47:01Z</responseDate><request>https://oaipmh.arxiv.org/oai</request>"
        f'<error code="{code}">{message}</error></OAI-PMH>'
    ).encode()


Responder = Callable[[httpx.Request], httpx.Response]


@dataclass
class FakeOAI:
    """An OAI-PMH endpoint: a first page for a fresh ListRecords, further pages by token.

    `script` can replace the n-th request's answer (0-based) to inject 503s, garbage or errors.
    """

    first: bytes
    by_token: dict[str, bytes] = field(default_factory=dict)
    identify: bytes = field(default_factory=lambda: (OAI_CURRENT / "identify.xml").read_bytes())
    script: dict[int, Responder | httpx.Response] = field(default_factory=dict)
    requests: list[dict[str, str]] = field(default_factory=list)
    no_records_match_after: str | None = None  # a `from` on or after this date matches nothing

    def __call__(self, request: httpx.Request) -> httpx.Response:
        params = {k: v[0] for k, v in parse_qs(urlsplit(str(request.url)).query).items()}
        n = len(self.requests)
        self.requests.append(params)
        if n in self.script:
            scripted = self.script[n]
            return scripted(request) if callable(scripted) else scripted
        verb = params.get("verb")
        if verb == "Identify":
            return self._xml(self.identify)
        if verb != "ListRecords":
            return self._xml(oai_error("badVerb"))
        if "resumptionToken" in params:
            page = self.by_token.get(params["resumptionToken"])
            return self._xml(page if page is not None else oai_error("badResumptionToken", "expired"))
        if "from" in params and params["from"] < "2005-09-16":
            return self._xml(oai_error("badArgument", "start date too early"))
        if self.no_records_match_after and params.get("from", "") >= self.no_records_match_after:
            return self._xml(oai_error("noRecordsMatch"))
        return self._xml(self.first)

    @staticmethod
    def _xml(body: bytes) -> httpx.Response:
        return httpx.Response(200, content=body, headers={"Content-Type": "text/xml"})

    def client(self, clock: FakeClock, attempts: int = 4) -> ArxivOAIClient:
        return ArxivOAIClient(
            "https://oaipmh.arxiv.org/oai",
            delay_s=0,
            transport=httpx.MockTransport(self),
            clock=clock,  # type: ignore[arg-type]
            policy=RetryPolicy(max_attempts=attempts),
        )


def three_page_archive(last_token: str = "") -> FakeOAI:
    """The recorded arXivRaw pages 1 and 2, then a derived last page (empty token, unless `last_token` continues
    the list) holding the withdrawn paper and the five-version old-style paper from the recorded GetRecord
    responses."""
    page1 = (OAI_CURRENT / "listrecords_arXivRaw_page1_with-resumptionToken.xml").read_bytes()
    page2 = (OAI_CURRENT / "listrecords_arXivRaw_page2_via-resumptionToken.xml").read_bytes()
    last = list_records_page(
        fixture_records(OAI_CURRENT / "getrecord_arXivRaw_withdrawn_cond-mat-0703772_source_type-I.xml")
        + fixture_records(OAI_CURRENT / "getrecord_arXivRaw_oldstyle-id_hep-th-0703166_5-versions.xml"),
        token=last_token,
    )
    return FakeOAI(
        first=page1,
        by_token={
            "verb%3DListRecords%26metadataPrefix%3DarXivRaw%26from%3D2009-09-17%26skip%3D0": page2,
            "verb%3DListRecords%26metadataPrefix%3DarXivRaw%26from%3D2011-02-03%26skip%3D0": last,
        },
    )


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(scope="session")
async def ingest_dsn(make_database: Callable[[str], object]) -> str:
    """One migrated database of the ingest tests' own (never the session's shared one)."""
    dsn: str = await make_database("ingest")  # type: ignore[misc]
    c = await asyncpg.connect(dsn)
    try:
        await migrate(c)
    finally:
        await c.close()
    return dsn


@pytest.fixture
async def conn(ingest_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the ingest database, emptied first: each test starts from nothing."""
    c = await asyncpg.connect(ingest_dsn)
    await c.execute(
        "TRUNCATE papers, researchers, institutions, ingest_checkpoints, ingest_progress, researcher_works,"
        " researcher_institutions, corrections RESTART IDENTITY CASCADE"
    )
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(params=["one-writer", "two-writers"])
async def writer(request: pytest.FixtureRequest, ingest_dsn: str) -> AsyncIterator[asyncpg.Connection | None]:
    """None (pages written one after another) or a second connection (two pages written at once)."""
    if request.param == "one-writer":
        yield None
        return
    c = await asyncpg.connect(ingest_dsn)
    try:
        yield c
    finally:
        await c.close()


_cache_tests = itertools.count()


@pytest.fixture
async def cache(redis_url: str, cache_namespace: str) -> AsyncIterator[CacheStore]:
    """The real Redis, under a namespace of this test's own inside the session's: nothing another test wrote
    is seen."""
    store = CacheStore(
        create_redis(redis_url, timeout_s=1.0), namespace=f"{cache_namespace}i{next(_cache_tests)}", ttl_s=60
    )
    try:
        yield store
    finally:
        await store.aclose()
