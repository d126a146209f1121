"""Acceptance: the fictional world (world.py) served by loopback upstreams in their real formats, ingested by the
real pipeline (`wovepaper ingest` and `wovepaper merge-researchers` code), and every figure checked through the API
against the ground truth computed from the world's definition."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import httpx
import pytest
from typer.testing import CliRunner

from app import create_app
from cli import app as cli_app
from db.migrate import migrate
from db.paging import encode_global_id, paper_global_id
from ingest.runner import run_arxiv, run_enrich
from settings import Settings
from tests.acceptance import world
from tests.acceptance.upstreams import World, serving
from tests.integration.graph_support import serving as serving_app


class Api:
    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def query(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        response = await self.client.post("/graphql", json={"query": query, "variables": variables or {}})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        return body

    async def data(self, query: str, **variables: Any) -> dict[str, Any]:
        body = await self.query(query, variables)
        assert "errors" not in body, body["errors"]
        data: dict[str, Any] = body["data"]
        return data


def settings_for(dsn: str, base: str, redis_url: str, namespace: str) -> Settings:
    return Settings(
        DATABASE_URL=dsn,
        REDIS_URL=redis_url,
        cache_namespace=namespace,
        arxiv_oai_url=f"{base}/oai",
        arxiv_delay_s=0,
        s2_api_url=f"{base}/s2",
        s2_rps=1_000_000,
        openalex_api_url=f"{base}/oa",
        openalex_rps=1_000_000,
    )


async def ingest(settings: Settings) -> None:
    harvested = await run_arxiv(settings, from_=None, until=None, set_spec=None)
    assert harvested.failed == 0 and harvested.stopped is None, harvested
    enriched = await run_enrich(settings, limit=None)
    assert enriched.failed == 0 and enriched.stopped is None, enriched


@pytest.fixture(scope="module")
async def run(make_database, redis_url: str, cache_namespace: str) -> AsyncIterator[dict[str, Any]]:
    """Both phases ingested; what the checks need from between them."""
    dsn = await make_database("world")
    conn = await asyncpg.connect(dsn)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    state = World()
    with serving(state) as base:
        settings = settings_for(dsn, base, redis_url, f"{cache_namespace}-world")
        app = create_app(settings)
        async with serving_app(app) as client:
            api = Api(client)
            await ingest(settings)
            seen: dict[str, Any] = {"api": api, "phase1": await phase1_checks(api)}
            seen["between"] = datetime.now(UTC)
            state.phase = 2
            await ingest(settings)
            oskar2 = seen["phase1"]["ids"]["oskar2"]
            oskar = seen["phase1"]["ids"]["oskar"]
            # The operator's correction, through the command.
            env = {
                "DATABASE_URL": dsn,
                "REDIS_URL": redis_url,
                "WOVEPAPER_CACHE_NAMESPACE": settings.cache_namespace,
            }
            result = await asyncio.to_thread(
                CliRunner().invoke, cli_app, ["merge-researchers", str(oskar2), str(oskar)], env=env
            )
            assert result.exit_code == 0, result.output
            yield seen


RESEARCHER_Q = """query($id: String!) { researcher(id: $id) {
  id databaseId slug name paperCount hIndex i10Index citationCount worksCount hIndexInArchive mergedIds
  externalIds { semanticScholar openAlex orcid }
  metrics { openAlex { hIndex worksCount } semanticScholar { hIndex worksCount } }
  authorPositions { first middle last solo matchedPapers totalPapers }
  fields { category count primaryCount }
  citationSummary { total papersWithCounts }
  mostCitedPaper { arxivId }
  coauthors(first: 100) { researcher { externalIds { semanticScholar } } sharedPapers }
  affiliations { institution { rorId } firstYear lastYear }
  papers(first: 100) { totalCount nodes { arxivId } }
} }"""


async def phase1_checks(api: Api) -> dict[str, Any]:
    """After phase 1: Semantic Scholar's duplicate profiles are two researchers; aliases work already."""
    ids = {}
    for r in world.RESEARCHERS:
        found = (await api.data(RESEARCHER_Q, id=f"s2:{r.s2}"))["researcher"]
        assert found is not None and found["name"] == r.name, r.key
        ids[r.key] = found["databaseId"]
    duplicate = (await api.data(RESEARCHER_Q, id=f"s2:{world.INES_DUPLICATE}"))["researcher"]
    assert duplicate["databaseId"] != ids["ines"]
    ids["ines_dup"] = duplicate["databaseId"]
    slugs = {"ines_dup": duplicate["slug"]}
    total = (await api.data("{ papers { totalCount } }"))["papers"]["totalCount"]
    assert total == len(world.live(1))
    for inst in world.INSTITUTIONS:
        found = await api.data("query($id: String!) { institution(id: $id) { name } }", id=inst.acronyms[0])
        assert found["institution"]["name"] == inst.name
    return {"ids": ids, "slugs": slugs}


@pytest.fixture
def api(run: dict[str, Any]) -> Api:
    api: Api = run["api"]
    return api


# -- researchers -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", world.SURVIVORS)
async def test_every_researcher_figure_is_the_world_s(api: Api, run: dict[str, Any], key: str) -> None:
    r = world.RESEARCHER[key]
    got = (await api.data(RESEARCHER_Q, id=f"s2:{r.s2}"))["researcher"]
    mine = world.papers_of(key)
    assert (got["name"], got["paperCount"], got["papers"]["totalCount"]) == (r.name, len(mine), len(mine))
    assert {n["arxivId"] for n in got["papers"]["nodes"]} == {p.arxiv_id for p in mine}
    assert {f["category"]: (f["count"], f["primaryCount"]) for f in got["fields"]} == world.fields_of(mine)
    career = world.career(key)
    assert (got["hIndex"], got["citationCount"], got["worksCount"], got["i10Index"]) == (
        world.h_index(career),
        sum(career),
        len(career),
        sum(1 for c in career if c >= 10),
    )
    assert got["hIndexInArchive"] == world.h_index([p.citations for p in mine])
    assert got["authorPositions"] == world.positions(key)
    assert got["citationSummary"] == {"total": sum(p.citations for p in mine), "papersWithCounts": len(mine)}
    top = max(mine, key=lambda p: (p.citations, p.published)) if mine else None
    assert (got["mostCitedPaper"] or {}).get("arxivId") == (top.arxiv_id if top else None)
    by_s2 = {x.s2: x.key for x in world.RESEARCHERS}
    shared = {by_s2[c["researcher"]["externalIds"]["semanticScholar"]]: c["sharedPapers"] for c in got["coauthors"]}
    assert shared == world.coauthors(key)
    places = {
        i
        for p in world.papers(2)
        if p.s2_known
        for a in p.authors
        if a.researcher and world.survivor(a.researcher) == key
        for i in a.institutions
    }
    assert {a["institution"]["rorId"] for a in got["affiliations"]} == {world.INSTITUTION[i].ror for i in places}
    assert all((a["firstYear"], a["lastYear"]) == (2024, 2024) for a in got["affiliations"])
    assert got["externalIds"] == {"semanticScholar": r.s2, "openAlex": r.openalex, "orcid": r.orcid}
    if r.openalex_figures:
        assert got["metrics"]["openAlex"] == {"hIndex": r.openalex_figures[2], "worksCount": r.openalex_figures[0]}
    s2_works = world.s2_works(r.s2, 2)
    assert got["metrics"]["semanticScholar"] == {
        "hIndex": world.h_index([w[4] for w in s2_works]),
        "worksCount": len(s2_works),
    }
    absorbed = [encode_global_id("Researcher", run["phase1"]["ids"][k]) for k in world.ABSORBED.get(key, ())]
    assert got["mergedIds"] == absorbed
    # The count beside each field's link is what the link lists.
    for category, (count, primary) in world.fields_of(mine).items():
        for primary_only, expected in ((False, count), (True, primary)):
            f = {"researcher": got["id"], "category": category, "primaryOnly": primary_only}
            listed = await api.data("query($f: PaperFilter) { papers(filter: $f) { totalCount } }", f=f)
            assert listed["papers"]["totalCount"] == expected, (key, f)


async def test_merged_profiles_resolve_to_their_survivor(api: Api, run: dict[str, Any]) -> None:
    ids, slugs = run["phase1"]["ids"], run["phase1"]["slugs"]
    for old, survivor, forms in (
        ("ines_dup", "ines", [str(ids["ines_dup"]), slugs["ines_dup"], f"s2:{world.INES_DUPLICATE}"]),
        ("oskar2", "oskar", [str(ids["oskar2"]), "s2:1080"]),
    ):
        for form in forms:
            got = await api.data("query($id: String!) { researcher(id: $id) { databaseId } }", id=form)
            assert got["researcher"]["databaseId"] == ids[survivor], form
        node = await api.data("query($id: ID!) { node(id: $id) { id } }", id=encode_global_id("Researcher", ids[old]))
        assert node["node"]["id"] == encode_global_id("Researcher", ids[survivor])
    path = (
        await api.data(
            "query($p: String!) { resolvePath(path: $p) { path redirect matchedBy } }",
            p=f"/researchers/{slugs['ines_dup']}",
        )
    )["resolvePath"]
    assert (
        path["redirect"] is True
        and path["matchedBy"] == "MERGED"
        and path["path"].startswith(f"/researchers/{ids['ines']}-")
    )


# -- institutions ----------------------------------------------------------------------------------------------

INSTITUTION_Q = """query($id: String!) { institution(id: $id) {
  databaseId rorId name aliases country type paperCount researcherCount
  externalIds { ror openAlex }
  fields { category count primaryCount }
  papers(first: 100) { totalCount nodes { arxivId } }
  researchers(first: 100) { totalCount nodes { externalIds { semanticScholar } } }
} }"""


@pytest.mark.parametrize("inst", world.INSTITUTIONS, ids=lambda i: i.key)
async def test_every_institution_figure_is_the_world_s(api: Api, inst: world.Institution) -> None:
    forms = [inst.name, inst.name.upper(), inst.ror, f"https://ror.org/{inst.ror}", inst.openalex, *inst.aliases]
    got = None
    for form in forms:
        found = (await api.data(INSTITUTION_Q, id=form))["institution"]
        assert found is not None and found["rorId"] == inst.ror, form
        got = found
    assert got is not None
    papers = world.institution_papers(inst.key)
    assert (got["name"], got["aliases"], got["country"], got["type"]) == (
        inst.name,
        inst.aliases,
        inst.country,
        inst.type,
    )
    assert got["externalIds"] == {"ror": inst.ror, "openAlex": inst.openalex}
    assert got["paperCount"] == got["papers"]["totalCount"] == len(papers)
    assert {n["arxivId"] for n in got["papers"]["nodes"]} == {p.arxiv_id for p in papers}
    assert {f["category"]: (f["count"], f["primaryCount"]) for f in got["fields"]} == world.fields_of(papers)
    people = {world.RESEARCHER[k].s2 for k in world.institution_researchers(inst.key)}
    assert got["researcherCount"] == got["researchers"]["totalCount"] == len(people)
    assert {n["externalIds"]["semanticScholar"] for n in got["researchers"]["nodes"]} == people


@pytest.mark.parametrize(
    "typo", ["Northbrige Institute", "Valmont University", "Karsk Polytechnik", "Helios Research Lab.", "NITT"]
)
async def test_a_typo_names_no_institution_and_a_filter_says_which_it_meant(api: Api, typo: str) -> None:
    assert (await api.data("query($id: String!) { institution(id: $id) { name } }", id=typo)) == {"institution": None}
    body = await api.query("query($f: PaperFilter) { papers(filter: $f) { totalCount } }", {"f": {"institution": typo}})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


# -- papers ------------------------------------------------------------------------------------------------------

PAPER_Q = """query($id: String!) { paper(id: $id) {
  id arxivId title version withdrawn license citedByCount
  versions { version sizeKb sourceType }
  externalIds { semanticScholar semanticScholarCorpusId openAlex doi journalDoi }
  authors {
    position name affiliation isCollaboration
    researcher { externalIds { semanticScholar } } institutions { rorId }
  }
} }"""


@pytest.mark.parametrize("paper", world.papers(2), ids=lambda p: p.arxiv_id)
async def test_every_paper_is_the_world_s(api: Api, paper: world.Paper) -> None:
    got = (await api.data(PAPER_Q, id=paper.arxiv_id))["paper"]
    assert (got["id"], got["title"], got["version"], got["withdrawn"]) == (
        paper_global_id(paper.arxiv_id),
        paper.title,
        len(paper.versions),
        paper.withdrawn,
    )
    assert got["license"] == "http://creativecommons.org/licenses/by/4.0/" and got["citedByCount"] == paper.citations
    assert got["versions"] == [
        {"version": n, "sizeKb": v.size_kb, "sourceType": v.source} for n, v in enumerate(paper.versions, 1)
    ]
    assert got["externalIds"] == {
        "semanticScholar": paper.s2_paper_id if paper.s2_known else None,
        "semanticScholarCorpusId": str(paper.corpus_id) if paper.s2_known else None,
        "openAlex": paper.openalex_work,
        "doi": f"10.48550/arXiv.{paper.arxiv_id}",
        "journalDoi": paper.journal_doi,
    }
    expected_authors = [
        {
            "position": n,
            "name": a.name,
            "affiliation": a.affiliation,
            "isCollaboration": a.collaboration,
            "researcher": None
            if a.researcher is None or not paper.s2_known
            else {"externalIds": {"semanticScholar": world.RESEARCHER[world.survivor(a.researcher)].s2}},
            "institutions": [{"rorId": world.INSTITUTION[i].ror} for i in a.institutions],
        }
        for n, a in enumerate(paper.authors, 1)
    ]
    assert got["authors"] == expected_authors
    forms = [f"CorpusId:{paper.corpus_id}", f"s2:{paper.s2_paper_id}"] if paper.s2_known else []
    forms += [paper.openalex_work, *([paper.journal_doi] if paper.journal_doi else [])]
    for form in forms:
        assert (await api.data("query($id: String!) { paper(id: $id) { arxivId } }", id=form))["paper"] == {
            "arxivId": paper.arxiv_id
        }, form


async def test_lists_counts_and_the_sitemap_leave_withdrawn_papers_out(api: Api) -> None:
    q = "query($f: PaperFilter) { papers(filter: $f, first: 100) { totalCount nodes { arxivId } } }"
    every = world.papers(2)
    for withdrawn, expected in (
        ("EXCLUDE", [p for p in every if not p.withdrawn]),
        ("INCLUDE", every),
        ("ONLY", [p for p in every if p.withdrawn]),
    ):
        got = (await api.data(q, f={"withdrawn": withdrawn}))["papers"]
        assert {n["arxivId"] for n in got["nodes"]} == {p.arxiv_id for p in expected}
        assert got["totalCount"] == len(expected)
    for category, (count, primary) in world.fields_of(world.live()).items():
        for primary_only, n in ((False, count), (True, primary)):
            got = await api.data(q, f={"category": category, "primaryOnly": primary_only})
            assert got["papers"]["totalCount"] == n, category
    chunked: list[str] = []
    first = (await api.data("{ sitemap(kind: PAPER, chunk: 0, chunkSize: 5) { chunkCount totalCount } }"))["sitemap"]
    for chunk in range(first["chunkCount"]):
        page = await api.data(
            "query($c: Int!) { sitemap(kind: PAPER, chunk: $c, chunkSize: 5) { entries { id path } } }", c=chunk
        )
        chunked += [e["id"] for e in page["sitemap"]["entries"]]
    assert sorted(chunked) == sorted(paper_global_id(p.arxiv_id) for p in world.live())
    assert first["totalCount"] == len(world.live())


async def test_search_and_name_lists_answer_what_the_world_holds(api: Api) -> None:
    found = await api.data(
        '{ search(query: "drift") { totalCount nodes { arxivId } facets { categories { values { value count } } } } }'
    )
    drift = {p.arxiv_id for p in world.live() if "drift" in (p.title + " " + p.abstract).lower()}
    assert {n["arxivId"] for n in found["search"]["nodes"]} == drift and found["search"]["totalCount"] == len(drift)
    for facet in found["search"]["facets"]["categories"]["values"]:
        narrowed = await api.data(
            'query($c: String!) { search(query: "drift", filter: {category: $c}) { totalCount } }', c=facet["value"]
        )
        assert narrowed["search"]["totalCount"] == facet["count"]
    q = 'query($s: ResearcherSort) { researchers(query: "lind", sort: $s) { nodes { name } } }'
    for sort in (None, "NAME", "H_INDEX"):
        assert [n["name"] for n in (await api.data(q, s=sort))["researchers"]["nodes"]] == ["Oskar Lind"]
    suggested = (await api.data('{ autocomplete(query: "Kova") { label type } }'))["autocomplete"]
    assert {"label": "Ada Kovacs", "type": "RESEARCHER"} in suggested


# -- the changes feed between the phases -----------------------------------------------------------------------


async def test_the_changes_feed_lists_what_phase_two_changed(api: Api, run: dict[str, Any]) -> None:
    q = """query($since: DateTime!, $after: String) { changes(since: $since, first: 5, after: $after) {
      nodes { kind change databaseId id mergedInto { databaseId } } pageInfo { hasNextPage endCursor } } }"""
    changes: list[dict[str, Any]] = []
    after = None
    while True:
        page = (await api.data(q, since=run["between"].isoformat(), after=after))["changes"]
        changes += page["nodes"]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    papers = {c["id"]: c["change"] for c in changes if c["kind"] == "PAPER"}
    # Exactly the papers phase 2 wrote: the revised and withdrawn ones, the new ones, and those whose author was
    # merged into another researcher.
    expected = {"2403.00103": "MODIFIED", "2403.00105": "WITHDRAWN", "2406.00201": "MODIFIED", "2406.00202": "MODIFIED"}
    expected |= {"2403.00107": "MODIFIED", "2403.00112": "MODIFIED"}
    assert papers == {paper_global_id(k): v for k, v in expected.items()}
    ids = run["phase1"]["ids"]
    merged = {c["databaseId"]: c["mergedInto"]["databaseId"] for c in changes if c["change"] == "MERGED"}
    assert merged == {ids["ines_dup"]: ids["ines"], ids["oskar2"]: ids["oskar"]}
    modified = {c["databaseId"] for c in changes if c["kind"] == "RESEARCHER" and c["change"] == "MODIFIED"}
    assert {ids["ines"], ids["oskar"], ids["ada"], ids["jonas"]} <= modified
    assert len(changes) == len({(c["kind"], c["databaseId"]) for c in changes}), "each entity once"
