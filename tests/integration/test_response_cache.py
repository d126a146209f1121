"""The aggregates through the API, and the whole-response cache in front of /graphql."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest

import app as app_module
import localservers
from app import create_app
from db.cache import keys
from db.cache.invalidation import invalidate
from db.cache.store import CacheStore
from db.migrate import migrate
from db.paging import encode_global_id, paper_global_id
from db.queries.figures import refresh_institution_figures, refresh_researcher_figures
from db.records import AuthorRecord, PaperRecord, Touched
from settings import Settings
from tests.integration.agg_data import ARXIV_IDS, EXPECTED_ADA, build_handmade
from tests.integration.inprocess import served

RESEARCHER_PAGE = """
query ResearcherPage($id: String!) {
  researcher(id: $id) {
    id
    name
    paperCount
    hIndex
    i10Index
    citationCount
    worksCount
    hIndexInArchive
    authorPositions { first middle last solo matchedPapers totalPapers }
    fields { category count }
    mostCitedPaper { id arxivId citedByCount }
    citationSummary { total papersWithCounts }
    coauthors(first: 5) { researcher { id name } sharedPapers firstYear lastYear }
    network(depth: 1) { nodes { researcher { id } depth weight } edges { source target sharedPapers } }
    metrics {
      computed { source hIndex citationCount worksCount asOf listed { hIndex } }
      semanticScholar { source hIndex i10Index citationCount worksCount asOf listed { hIndex worksCount } }
      openAlex { source hIndex i10Index citationCount worksCount listed { hIndex worksCount citationCount } }
    }
    papers(first: 24) { totalCount nodes { id arxivId } }
  }
}
"""

RESEARCHERS_LIST = """
query ResearchersList {
  researchers(first: 10) { nodes { id name paperCount hIndex } }
}
"""

INSTITUTION_PAGE = """
query InstitutionPage($id: String!) {
  institution(id: $id) {
    id
    paperCount
    researcherCount
    fields { category count }
    topResearchers(first: 3) { id name }
  }
}
"""

PAPER_PAGE = """
query PaperPage($id: String!) {
  paper(id: $id) { id arxivId title }
}
"""

# A researcher's follower count, and a list showing it.
FOLLOWERS = """
query Followers($id: String!) {
  researcher(id: $id) { id followerCount }
}
"""
FOLLOWED_LIST = """
query FollowedList {
  researchers(first: 10) { nodes { id followerCount } }
}
"""
# A list of papers alone: no researcher in it.
PAPERS_LIST = """
query PapersList {
  papers(first: 5) { nodes { id title } }
}
"""

# A paper with its authors by name, as the site's paper cards show them.
PAPER_AUTHORS = """
query PaperAuthors($id: String!) {
  paper(id: $id) { id title authors { position name researcher { id slug name } } }
}
"""

_ns = itertools.count()


@pytest.fixture(scope="module")
async def resp_db(make_database) -> tuple[str, dict[str, int]]:
    return await build_resp_db(make_database, "respcache")


async def build_resp_db(make_database: Any, suffix: str) -> tuple[str, dict[str, int]]:
    """A database of the hand-made researchers and papers, figures refreshed; (dsn, ids by key)."""
    dsn = await make_database(suffix)
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
        ids = await build_handmade(conn)
        # Every researcher of the data is affiliated, as the ingest's matches record it.
        for key in ("A", "B", "C"):
            await conn.execute(
                "INSERT INTO researcher_institutions (researcher_id, institution_id) VALUES ($1, $2)",
                ids[key],
                ids["I"],
            )
        await refresh_researcher_figures(conn, None)
        await refresh_institution_figures(conn, None)
    finally:
        await conn.close()
    return dsn, ids


@pytest.fixture
def operations_dir(tmp_path, monkeypatch) -> None:
    ops = tmp_path / "operations"
    ops.mkdir()
    for name, text in (
        ("ResearcherPage", RESEARCHER_PAGE),
        ("ResearchersList", RESEARCHERS_LIST),
        ("InstitutionPage", INSTITUTION_PAGE),
        ("PaperPage", PAPER_PAGE),
        ("PaperAuthors", PAPER_AUTHORS),
        ("Followers", FOLLOWERS),
        ("FollowedList", FOLLOWED_LIST),
        ("PapersList", PAPERS_LIST),
    ):
        (ops / f"{name}.graphql").write_text(text)
    monkeypatch.setattr(app_module, "OPERATIONS_DIR", ops)


class Statements:
    def __init__(self) -> None:
        self.n = 0
        self.texts: list[str] = []

    def __call__(self, record: object) -> None:
        self.n += 1
        self.texts.append(record.query)  # type: ignore[attr-defined]


@contextlib.asynccontextmanager
async def serving(
    dsn: str, redis_url: str | None, namespace: str, **settings: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, CacheStore, Statements]]:
    counter = Statements()
    application = create_app(
        Settings(DATABASE_URL=dsn, REDIS_URL=redis_url, cache_namespace=namespace, **settings), query_logger=counter
    )
    async with served(dsn, application=application) as (client, state):
        yield client, state["cache"], counter


@pytest.fixture
async def api(resp_db, redis_url, cache_namespace, operations_dir):
    async with serving(resp_db[0], redis_url, f"{cache_namespace}-r{next(_ns)}") as served:
        yield served


async def post(client: httpx.AsyncClient, query: str, variables: dict[str, Any] | None = None, **headers: str):
    body: dict[str, Any] = {"query": query}
    if variables is not None:
        body["variables"] = variables
    return await client.post("/graphql", json=body, headers=headers)


def gid(kind: str, db_id: int) -> str:
    return encode_global_id(kind, db_id)


async def test_researcher_page_figures_through_the_api(api, resp_db) -> None:
    client, _, _ = api
    ids = resp_db[1]
    r = await post(client, RESEARCHER_PAGE, {"id": str(ids["A"])})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "errors" not in body, body
    page = body["data"]["researcher"]
    assert page["paperCount"] == EXPECTED_ADA["paper_count"]
    assert (page["hIndex"], page["i10Index"], page["citationCount"], page["worksCount"]) == (
        EXPECTED_ADA["h_index"],
        EXPECTED_ADA["i10_index"],
        EXPECTED_ADA["citation_count"],
        EXPECTED_ADA["works_count"],
    )
    assert page["hIndexInArchive"] == EXPECTED_ADA["h_index_in_archive"]
    assert page["authorPositions"] == {
        "first": 1,
        "middle": 1,
        "last": 1,
        "solo": 1,
        "matchedPapers": 4,
        "totalPapers": 6,
    }
    assert [(f["category"], f["count"]) for f in page["fields"]] == EXPECTED_ADA["fields"]
    assert page["mostCitedPaper"]["id"] == paper_global_id(ARXIV_IDS["P5"])
    assert page["mostCitedPaper"]["citedByCount"] == 50
    assert page["citationSummary"] == {"total": 68, "papersWithCounts": 5}
    assert [(c["researcher"]["id"], c["sharedPapers"], c["firstYear"], c["lastYear"]) for c in page["coauthors"]] == [
        (gid("Researcher", ids["C"]), 3, 2017, 2021),
        (gid("Researcher", ids["B"]), 2, 2019, 2020),
    ]
    nodes = {(n["researcher"]["id"], n["depth"], n["weight"]) for n in page["network"]["nodes"]}
    assert nodes == {
        (gid("Researcher", ids["A"]), 0, 5),
        (gid("Researcher", ids["B"]), 1, 4),
        (gid("Researcher", ids["C"]), 1, 5),
    }
    assert {frozenset((e["source"], e["target"])) for e in page["network"]["edges"]} == {
        frozenset((gid("Researcher", ids["A"]), gid("Researcher", ids["B"]))),
        frozenset((gid("Researcher", ids["A"]), gid("Researcher", ids["C"]))),
        frozenset((gid("Researcher", ids["B"]), gid("Researcher", ids["C"]))),
    }
    m = page["metrics"]
    assert m["computed"]["source"] == "COMPUTED" and m["computed"]["hIndex"] == 5 and m["computed"]["asOf"]
    assert m["computed"]["listed"] is None
    s2 = m["semanticScholar"]
    assert (s2["hIndex"], s2["i10Index"], s2["citationCount"], s2["worksCount"]) == (4, None, 90, 8)
    assert s2["asOf"].startswith("2026-01-02") and s2["listed"] == {"hIndex": 3, "worksCount": 4}
    oa = m["openAlex"]
    assert (oa["hIndex"], oa["i10Index"], oa["citationCount"], oa["worksCount"]) == (6, 5, 120, 11)
    assert oa["listed"] == {"hIndex": 3, "worksCount": 3, "citationCount": 36}
    assert page["papers"]["totalCount"] == 6


async def test_page_fields_share_one_statistics_statement(resp_db, redis_url, cache_namespace, operations_dir) -> None:
    """Six fields read the researcher's statistics: one statement computes them (and reads the most cited paper),
    with or without Redis."""
    from db.queries.aggregates import SELECT_RESEARCHER_STATS_AND_MOST_CITED

    adhoc = RESEARCHER_PAGE.replace("ResearcherPage", "Adhoc")  # not a contract operation: always executed
    for redis in (None, redis_url):
        async with serving(resp_db[0], redis, f"{cache_namespace}-s{next(_ns)}") as (client, store, statements):
            body = (await post(client, adhoc, {"id": str(resp_db[1]["A"])})).json()
            assert "errors" not in body
            assert statements.texts.count(SELECT_RESEARCHER_STATS_AND_MOST_CITED) == 1, redis
            assert store.metrics.misses + store.metrics.fallbacks >= 1


async def test_institution_aggregates_through_the_api(api, resp_db) -> None:
    client, _, _ = api
    ids = resp_db[1]
    body = (await post(client, INSTITUTION_PAGE, {"id": str(ids["I"])})).json()
    assert "errors" not in body, body
    inst = body["data"]["institution"]
    assert (inst["paperCount"], inst["researcherCount"]) == (3, 4)
    assert inst["fields"] == [{"category": "cs.LG", "count": 3}]
    # Stored whole-career h-index after the refresh: A 5, then C and B (h 1 each: P2/P6 and P1/P2/P6...).
    assert inst["topResearchers"][0]["id"] == gid("Researcher", ids["A"])
    assert len(inst["topResearchers"]) == 3


async def test_bad_aggregate_arguments_are_user_errors(api, resp_db) -> None:
    client, _, _ = api
    a = resp_db[1]["A"]
    for field in (
        "network(depth: 3) { edges { source } }",
        "coauthors(first: 0) { sharedPapers }",
        "network(limit: 500) { edges { source } }",
    ):
        body = (await post(client, f'{{ researcher(id: "{a}") {{ {field} }} }}')).json()
        assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT", body


async def test_warm_response_skips_graphql_and_sql(api, resp_db) -> None:
    client, store, statements = api
    variables = {"id": str(resp_db[1]["A"])}
    first = await post(client, RESEARCHER_PAGE, variables)
    assert first.headers["x-cache"] == "miss" and statements.n > 0
    statements.n = 0
    second = await post(client, RESEARCHER_PAGE, variables)
    assert second.headers["x-cache"] == "hit"
    assert second.content == first.content
    assert statements.n == 0  # no SQL at all: GraphQL did not run
    assert (store.metrics.response_hits, store.metrics.response_misses, store.metrics.response_stores) == (1, 1, 1)
    metrics = (await client.get("/metrics")).text.splitlines()
    # Counters are per process (summed over workers), so other tests' requests count too.
    assert any(line.startswith('wovepaper_cache_events_total{cache="response",event="hit"}') for line in metrics)
    assert any(line.startswith('wovepaper_cache_events_total{cache="response",event="miss"}') for line in metrics)


async def test_key_is_operation_and_canonical_variables(api, resp_db) -> None:
    client, store, _ = api
    ids = resp_db[1]
    raw = b'{"query": %s, "variables": {  "id" :  "%d"  }}' % (json.dumps(RESEARCHER_PAGE).encode(), ids["A"])
    first = await client.post("/graphql", content=raw, headers={"content-type": "application/json"})
    assert first.headers["x-cache"] == "miss" and "errors" not in first.json()
    # The same variables spelt differently (spacing, operationName given, key order) hit.
    hit = await client.post(
        "/graphql",
        json={"variables": {"id": str(ids["A"])}, "operationName": "ResearcherPage", "query": RESEARCHER_PAGE},
    )
    assert hit.headers["x-cache"] == "hit"
    other = await post(client, RESEARCHER_PAGE, {"id": str(ids["B"])})
    assert other.headers["x-cache"] == "miss"
    assert other.json()["data"]["researcher"]["id"] == gid("Researcher", ids["B"])


async def test_only_anonymous_contract_operations_are_cached(api, resp_db) -> None:
    client, store, _ = api
    variables = {"id": str(resp_db[1]["A"])}
    for _ in range(2):
        with_cookie = await post(client, RESEARCHER_PAGE, variables, cookie="session=x")
        assert with_cookie.status_code == 200 and "x-cache" not in with_cookie.headers
    # A bearer token this server cannot verify is refused, never answered as anonymous (or from the cache).
    refused = await post(client, RESEARCHER_PAGE, variables, authorization="Bearer x")
    assert refused.status_code == 401 and refused.json()["errors"][0]["extensions"]["code"] == "UNAUTHENTICATED"
    # Any other document, even one asking for the same fields, is executed every time.
    ad_hoc = RESEARCHER_PAGE.replace("query ResearcherPage", "query Mine")
    for _ in range(2):
        r = await post(client, ad_hoc, variables)
        assert "x-cache" not in r.headers and "errors" not in r.json()
    assert store.metrics.response_hits == 0


async def test_errors_are_not_cached(api) -> None:
    client, store, _ = api
    for _ in range(2):
        r = await post(client, RESEARCHER_PAGE, {"id": "not a researcher id!"})
        assert r.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
        assert r.headers["x-cache"] == "miss"
    assert store.metrics.response_stores == 0


async def test_invalidation_drops_responses_that_read_the_entity(api, resp_db) -> None:
    client, store, _ = api
    ids = resp_db[1]
    variables = {"id": str(ids["A"])}
    await post(client, RESEARCHER_PAGE, variables)
    await post(client, RESEARCHERS_LIST)
    # E appears in neither response's entities... but any write may change a list.
    await invalidate(store, Touched(researchers={ids["E"]}))
    assert (await post(client, RESEARCHER_PAGE, variables)).headers["x-cache"] == "hit"
    assert (await post(client, RESEARCHERS_LIST)).headers["x-cache"] == "miss"
    # B is a co-author shown on A's page: touching B drops A's page.
    await invalidate(store, Touched(researchers={ids["B"]}))
    assert (await post(client, RESEARCHER_PAGE, variables)).headers["x-cache"] == "miss"
    # So does a paper on it.
    assert (await post(client, RESEARCHER_PAGE, variables)).headers["x-cache"] == "hit"
    await invalidate(store, Touched(papers={ids["P8"]}, paper_keys={ARXIV_IDS["P8"]}))
    assert (await post(client, RESEARCHER_PAGE, variables)).headers["x-cache"] == "miss"


async def test_an_answer_whose_tag_set_redis_evicted_is_not_served_after_its_paper_changes(
    resp_db, evicting_redis_url, cache_namespace, operations_dir
) -> None:
    """Redis under `maxmemory` (allkeys-lru) evicts a tag set sooner than the answers it lists: the paper's write
    then finds no set to drop them by. An answer some tag set no longer lists is computed again, not served."""
    async with serving(resp_db[0], evicting_redis_url, f"{cache_namespace}-ev") as (client, store, _):
        await _evicted_set_is_seen(client, store, resp_db)


async def _evicted_set_is_seen(client: httpx.AsyncClient, store: CacheStore, resp_db) -> None:
    ids = resp_db[1]
    variables = {"id": ARXIV_IDS["P1"]}
    title = (await post(client, PAPER_PAGE, variables)).json()["data"]["paper"]["title"]
    assert (await post(client, PAPER_PAGE, variables)).headers["x-cache"] == "hit"
    assert store.redis is not None
    evicted = await store.redis.delete(keys.entity_tag(store.namespace, "paper", ARXIV_IDS["P1"]))
    assert evicted == 1
    conn = await asyncpg.connect(resp_db[0])
    try:
        await conn.execute("UPDATE papers SET title = 'Revised' WHERE id = $1", ids["P1"])
        await invalidate(store, Touched(papers={ids["P1"]}, paper_keys={ARXIV_IDS["P1"]}))
        after = await post(client, PAPER_PAGE, variables)
        assert after.headers["x-cache"] == "miss" and after.json()["data"]["paper"]["title"] == "Revised"
        assert store.metrics.response_unlisted_skipped == 1
        again = await post(client, PAPER_PAGE, variables)
        assert again.headers["x-cache"] == "hit" and again.json()["data"]["paper"]["title"] == "Revised"
    finally:
        await conn.execute("UPDATE papers SET title = $2 WHERE id = $1", ids["P1"], title)
        await conn.close()
        await invalidate(store, Touched(papers={ids["P1"]}, paper_keys={ARXIV_IDS["P1"]}))


async def test_write_then_invalidate_shows_new_figures_at_once(api, resp_db) -> None:
    client, store, _ = api
    ids = resp_db[1]
    variables = {"id": str(ids["A"])}
    before = (await post(client, RESEARCHER_PAGE, variables)).json()["data"]["researcher"]
    await post(client, RESEARCHER_PAGE, variables)
    conn = await asyncpg.connect(resp_db[0])
    try:
        async with conn.transaction():
            await conn.execute("UPDATE papers SET cited_by_count = 80 WHERE id = $1", ids["P4"])
            await refresh_researcher_figures(conn, [ids["A"]])
        await invalidate(store, Touched(papers={ids["P4"]}, paper_keys={ARXIV_IDS["P4"]}, researchers={ids["A"]}))
        after_response = await post(client, RESEARCHER_PAGE, variables)
        after = after_response.json()["data"]["researcher"]
        assert after_response.headers["x-cache"] == "miss"
        assert after["mostCitedPaper"]["id"] == paper_global_id(ARXIV_IDS["P4"])
        assert after["citationSummary"]["total"] == before["citationSummary"]["total"] + 77
        assert after["citationCount"] == before["citationCount"] + 77
    finally:
        async with conn.transaction():
            await conn.execute("UPDATE papers SET cited_by_count = 3 WHERE id = $1", ids["P4"])
            await refresh_researcher_figures(conn, [ids["A"]])
        await conn.close()
        await invalidate(store, Touched(papers={ids["P4"]}, paper_keys={ARXIV_IDS["P4"]}, researchers={ids["A"]}))


async def test_api_answers_correctly_and_quickly_with_redis_stopped_or_frozen(
    resp_db, cache_namespace, operations_dir, tmp_path
) -> None:
    server = localservers.start_redis(tmp_path / "redis", port=localservers.free_port())
    try:
        breaker = {"redis_breaker_min_calls": 3, "redis_breaker_window_s": 30.0}
        # The breaker's path: the in-process tier (which would answer this page from memory) is off.
        async with serving(
            resp_db[0], server.url, f"{cache_namespace}-rf", redis_timeout_s=0.25, near_cache_mb=0, **breaker
        ) as (client, store, _):
            variables = {"id": str(resp_db[1]["A"])}
            expected = (await post(client, RESEARCHER_PAGE, variables)).json()["data"]["researcher"]
            os.kill(server.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                # Each request waits out one Redis timeout at most (0.25 s), and the failures open the breaker
                # within a few requests (half the calls in its window: the first request's successes count too).
                asked = 0
                while asked < 10:
                    asked += 1
                    got = (await post(client, RESEARCHER_PAGE, variables)).json()
                    assert got["data"]["researcher"]["hIndex"] == expected["hIndex"]
                    assert got["data"]["researcher"]["fields"] == expected["fields"]
                    if store.breaker.state.name == "OPEN":
                        break
                frozen_elapsed = time.monotonic() - started
            finally:
                os.kill(server.pid, signal.SIGCONT)
            assert store.breaker.state.name == "OPEN"
            assert asked <= 8
            assert frozen_elapsed < 0.25 * asked + 1.5
            server.stop()
            started = time.monotonic()
            for _ in range(6):
                got = (await post(client, RESEARCHER_PAGE, variables)).json()
                assert got["data"]["researcher"]["citationSummary"] == expected["citationSummary"]
            assert time.monotonic() - started < 2.0
            metrics = (await client.get("/metrics")).text.splitlines()
            assert "wovepaper_cache_breaker_state 1.0" in metrics
    finally:
        if server.process.poll() is None:
            os.kill(server.pid, signal.SIGCONT)
        server.stop()


async def test_researchers_sorted_and_filtered_by_stored_figures(api, resp_db) -> None:
    client, _, _ = api
    ids = resp_db[1]
    order = [ids[k] for k in ("A", "B", "C", "D", "E")]

    async def names(args: str) -> list[int]:
        body = (
            await post(client, f"{{ researchers({args}) {{ nodes {{ databaseId hIndex citationCount }} }} }}")
        ).json()
        assert "errors" not in body, body
        # Only the hand-made researchers: other tests of this module add their own.
        return [n["databaseId"] for n in body["data"]["researchers"]["nodes"] if n["databaseId"] in order]

    # h-index 5, 2, 1, 1, 0 (ties by id); citations 100, 18, 6, 2, 0.
    assert await names("sort: H_INDEX, first: 10") == order
    assert await names("sort: CITATIONS, first: 10") == order
    assert await names("sort: H_INDEX, filter: {minHIndex: 1, maxHIndex: 2}") == [ids["B"], ids["C"], ids["D"]]
    assert await names("sort: CITATIONS, filter: {minCitations: 3, maxCitations: 50}") == [ids["B"], ids["C"]]
    # Keyset pages on the new sorts walk the same order.
    seen: list[int] = []
    after = None
    while True:
        cursor = f', after: "{after}"' if after else ""
        page = f"researchers(sort: H_INDEX, first: 2{cursor})"
        body = (
            await post(client, f"{{ {page} {{ pageInfo {{ endCursor hasNextPage }} nodes {{ databaseId }} }} }}")
        ).json()
        conn = body["data"]["researchers"]
        seen += [n["databaseId"] for n in conn["nodes"] if n["databaseId"] in order]
        if not conn["pageInfo"]["hasNextPage"]:
            break
        after = conn["pageInfo"]["endCursor"]
    assert seen == order
    bad = (await post(client, "{ researchers(filter: {minHIndex: -1}) { nodes { id } } }")).json()
    assert bad["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_ingest_write_path_then_api_shows_new_figures_at_once(api, resp_db) -> None:
    """The ingest's write functions in one transaction, invalidation after the commit: the very next
    request (a cached page before) shows the new paper and figures."""
    from db.queries.figures import refresh_figures
    from db.queries.writes.citations import update_citations
    from db.queries.writes.matches import apply_authorship_matches
    from db.queries.writes.papers import upsert_papers
    from db.queries.writes.researchers import upsert_researchers
    from db.records import AuthorshipMatch, CitationRecord, ResearcherRecord

    client, store, _ = api
    when = datetime(2025, 2, 1, tzinfo=UTC)

    async def ingest(arxiv_id: str, cited: int) -> dict[str, int]:
        touched = Touched()
        conn = await asyncpg.connect(resp_db[0])
        try:
            async with conn.transaction():
                rids = await upsert_researchers(
                    conn, [ResearcherRecord("Ingested Author", s2_author_id="ing-1")], touched=touched
                )
                paper = paper_record(arxiv_id, f"Paper {arxiv_id}", "astro-ph.GA", "Ingested Author", when)
                await upsert_papers(conn, [paper], touched=touched)
                await apply_authorship_matches(conn, [AuthorshipMatch(arxiv_id, 1, "ing-1")], rids, {}, touched=touched)
                await update_citations(conn, [CitationRecord(arxiv_id, cited, "s2")], touched=touched)
                await refresh_figures(conn, touched)
        finally:
            await conn.close()
        await invalidate(store, touched)  # after the commit, as the ingest does
        return rids

    rids = await ingest("2502.00001", 3)
    variables = {"id": str(rids["ing-1"])}
    first = (await post(client, RESEARCHER_PAGE, variables)).json()["data"]["researcher"]
    assert (first["paperCount"], first["hIndex"], first["citationCount"]) == (1, 1, 3)
    assert (await post(client, RESEARCHER_PAGE, variables)).headers["x-cache"] == "hit"

    await ingest("2502.00002", 7)
    response = await post(client, RESEARCHER_PAGE, variables)
    assert response.headers["x-cache"] == "miss"
    now = response.json()["data"]["researcher"]
    assert (now["paperCount"], now["hIndex"], now["citationCount"]) == (2, 2, 10)
    assert now["authorPositions"]["solo"] == 2 and now["fields"] == [{"category": "astro-ph.GA", "count": 2}]
    assert now["citationSummary"] == {"total": 10, "papersWithCounts": 2}
    assert now["mostCitedPaper"]["arxivId"] == "2502.00002"


def paper_record(arxiv_id: str, title: str, category: str, author: str, when: datetime) -> PaperRecord:
    return PaperRecord(
        arxiv_id=arxiv_id,
        version=1,
        title=title,
        abstract="",
        categories=[category],
        published=when,
        updated=when,
        authors=[AuthorRecord(1, author)],
    )


async def response_entries(store: CacheStore) -> int:
    assert store.redis is not None
    return len([k async for k in store.redis.scan_iter(match=f"{store.namespace}:{{r:*}}:response:s*", count=1000)])


async def test_undeclared_variables_are_refused_and_never_stored(api, resp_db) -> None:
    """Each random undeclared variable was a new entry (and 52 MB of Redis for 200 requests)."""
    client, store, _ = api
    for i in range(20):
        r = await post(client, RESEARCHER_PAGE, {"id": str(resp_db[1]["A"]), "pad": f"{i}-{os.urandom(8).hex()}"})
        assert r.json()["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert store.metrics.response_stores == 0
    assert await response_entries(store) == 0


async def test_id_spellings_share_one_entry(api, resp_db) -> None:
    client, store, _ = api
    a = resp_db[1]["A"]
    first = await post(client, RESEARCHER_PAGE, {"id": str(a)})
    assert first.headers["x-cache"] == "miss"
    for spelling in (f"{a}-ada-lovelace", f"{a}-anything-at-all", f" {a}"):
        again = await post(client, RESEARCHER_PAGE, {"id": spelling})
        assert again.headers["x-cache"] == "hit", spelling
        assert again.content == first.content
    assert await response_entries(store) == 1


async def test_only_what_graphql_accepts_is_served_from_cache(api, resp_db) -> None:
    client, store, _ = api
    body = json.dumps({"query": RESEARCHER_PAGE, "variables": {"id": str(resp_db[1]["A"])}})
    assert (
        await client.post("/graphql", content=body, headers={"content-type": "application/json"})
    ).status_code == 200
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        r = await client.post("/graphql", content=body, headers={"content-type": content_type})
        assert r.status_code == 415 and "x-cache" not in r.headers
    trailing = await post(client, RESEARCHER_PAGE + "\x0b", {"id": str(resp_db[1]["A"])})
    assert trailing.json()["errors"][0]["extensions"]["code"] == "GRAPHQL_PARSE_FAILED"
    assert trailing.headers.get("x-cache") != "hit"
    assert store.metrics.response_hits == 0


async def test_a_paper_asked_for_before_its_ingest_is_found_right_after(api, resp_db) -> None:
    from db.queries.writes.papers import upsert_papers

    client, store, _ = api
    arxiv_id = f"2503.{int.from_bytes(os.urandom(2), 'big') % 90000 + 10000:05d}"
    missing = await post(client, PAPER_PAGE, {"id": arxiv_id})
    assert missing.json() == {"data": {"paper": None}}
    # The miss is cached, under the id in any spelling...
    for spelling in (arxiv_id, f"arXiv:{arxiv_id}v2", f"{arxiv_id}-a-title"):
        assert (await post(client, PAPER_PAGE, {"id": spelling})).headers["x-cache"] == "hit"
    # ... and an unrelated write keeps it.
    await invalidate(store, Touched(new_papers={"2503.00001"} - {arxiv_id}))
    assert (await post(client, PAPER_PAGE, {"id": arxiv_id})).headers["x-cache"] == "hit"
    when = datetime(2025, 3, 1, tzinfo=UTC)
    touched = Touched()
    conn = await asyncpg.connect(resp_db[0])
    try:
        async with conn.transaction():
            paper = paper_record(arxiv_id, "Found at last", "cs.LG", "Some Author", when)
            await upsert_papers(conn, [paper], touched=touched)
    finally:
        await conn.close()
    assert touched.new_papers == {arxiv_id}
    await invalidate(store, touched)
    found = await post(client, PAPER_PAGE, {"id": f"arXiv:{arxiv_id}v2"})
    assert found.headers["x-cache"] == "miss"
    assert found.json()["data"]["paper"]["title"] == "Found at last"


async def test_a_researcher_asked_for_by_id_before_it_exists_is_found_after_its_write(api, resp_db) -> None:
    client, store, _ = api
    conn = await asyncpg.connect(resp_db[0])
    try:
        next_id = await conn.fetchval("SELECT coalesce(max(id), 0) + 1000 FROM researchers")
    finally:
        await conn.close()
    assert (await post(client, RESEARCHER_PAGE, {"id": str(next_id)})).json() == {"data": {"researcher": None}}
    assert (await post(client, RESEARCHER_PAGE, {"id": str(next_id)})).headers["x-cache"] == "hit"
    await invalidate(store, Touched(researchers={next_id}))
    assert (await post(client, RESEARCHER_PAGE, {"id": str(next_id)})).headers["x-cache"] == "miss"


async def test_a_researcher_s_new_figures_keep_the_answers_naming_them_and_a_new_name_drops_them(
    make_database, redis_url, cache_namespace, operations_dir
) -> None:
    """The enrichment's write of a researcher (ingest's upsert_researchers): new figures drop the researcher's page,
    not a paper's answer that shows them only by name; a new name drops that too."""
    from db.queries.figures import refresh_figures
    from db.queries.writes.researchers import upsert_researchers
    from db.records import ResearcherRecord

    dsn, ids = await build_resp_db(make_database, "respnames")
    paper = {"id": ARXIV_IDS["P1"]}  # authors A, B
    page = {"id": str(ids["A"])}

    async def write(record: ResearcherRecord) -> Touched:
        touched = Touched()
        conn = await asyncpg.connect(dsn)
        try:
            async with conn.transaction():
                await upsert_researchers(conn, [record], touched=touched)
                await refresh_figures(conn, touched)
        finally:
            await conn.close()
        return touched

    conn = await asyncpg.connect(dsn)
    await conn.execute("UPDATE researchers SET s2_author_id = 's2-ada' WHERE id = $1", ids["A"])
    await conn.close()
    async with serving(dsn, redis_url, f"{cache_namespace}-n{next(_ns)}") as (client, store, _):
        shown = (await post(client, PAPER_AUTHORS, paper)).json()["data"]["paper"]["authors"]
        assert [a["researcher"]["name"] for a in shown] == ["Ada", "Bob"]
        s2 = (await post(client, RESEARCHER_PAGE, page)).json()["data"]["researcher"]["metrics"]["semanticScholar"]
        assert s2["hIndex"] == 4
        for query, variables in ((PAPER_AUTHORS, paper), (RESEARCHER_PAGE, page)):
            assert (await post(client, query, variables)).headers["x-cache"] == "hit"

        # Semantic Scholar's figures of Ada move; her name does not.
        touched = await write(ResearcherRecord("Ada", s2_author_id="s2-ada", s2_paper_count=30, s2_h_index=9))
        assert ids["A"] in touched.researcher_figures and ids["A"] not in touched.researchers
        await invalidate(store, touched)
        again = await post(client, RESEARCHER_PAGE, page)
        assert again.headers["x-cache"] == "miss"
        assert again.json()["data"]["researcher"]["metrics"]["semanticScholar"]["hIndex"] == 9
        assert (await post(client, PAPER_AUTHORS, paper)).headers["x-cache"] == "hit"

        # Her name changes: every answer showing it goes.
        touched = await write(ResearcherRecord("Ada Lovelace", s2_author_id="s2-ada"))
        assert ids["A"] in touched.researchers
        await invalidate(store, touched)
        renamed = await post(client, PAPER_AUTHORS, paper)
        assert renamed.headers["x-cache"] == "miss"
        assert [a["researcher"]["name"] for a in renamed.json()["data"]["paper"]["authors"]] == ["Ada Lovelace", "Bob"]
        assert (await post(client, RESEARCHER_PAGE, page)).json()["data"]["researcher"]["name"] == "Ada Lovelace"


async def test_a_follow_drops_what_shows_the_follower_count_and_keeps_the_lists_and_the_names(
    make_database, redis_url, cache_namespace, operations_dir
) -> None:
    """A follow changes one figure of its target: the answers showing it go (the target's own, a list showing it in
    full); lists that do not show it, and answers naming the target (a paper's authors), stay, since no list filters
    or sorts by followers."""
    from tests.jwt_support import SECRET, bearer, hs256

    dsn, ids = await build_resp_db(make_database, "respfollow")
    follow = "mutation F($id: String!) { followResearcher(input: {id: $id}) { researcher { followerCount } } }"
    reader = bearer(hs256("follow-cache-reader"))
    ada, eve, paper = {"id": str(ids["A"])}, {"id": str(ids["E"])}, {"id": ARXIV_IDS["P1"]}  # P1: Ada and Bob
    answers = [(PAPERS_LIST, None), (FOLLOWED_LIST, None), (FOLLOWERS, ada), (PAPER_AUTHORS, paper)]

    async def cached() -> dict[str, str]:
        return {q.split()[1].split("(")[0]: (await post(client, q, v)).headers["x-cache"] for q, v in answers}

    async with serving(dsn, redis_url, f"{cache_namespace}-f{next(_ns)}", jwt_secret=SECRET) as (client, _, _):
        await cached()
        assert set((await cached()).values()) == {"hit"}

        # Eve: the list showing her follower count goes; the list of papers (before: any follow dropped every list),
        # Ada's count and the paper naming Ada stay.
        followed = await post(client, follow, eve, **reader)
        assert followed.json()["data"]["followResearcher"]["researcher"] == {"followerCount": 1}
        assert await cached() == {
            "PapersList": "hit",
            "FollowedList": "miss",
            "Followers": "hit",
            "PaperAuthors": "hit",
        }
        counts = {
            n["id"]: n["followerCount"]
            for n in (await post(client, FOLLOWED_LIST)).json()["data"]["researchers"]["nodes"]
        }
        assert counts[gid("Researcher", ids["E"])] == 1 and counts[gid("Researcher", ids["A"])] == 0

        # Ada: what shows her follower count goes, with the new count; what only names her stays.
        await post(client, follow, ada, **reader)
        assert await cached() == {
            "PapersList": "hit",
            "FollowedList": "miss",
            "Followers": "miss",
            "PaperAuthors": "hit",
        }
        assert (await post(client, FOLLOWERS, ada)).json()["data"]["researcher"]["followerCount"] == 1
