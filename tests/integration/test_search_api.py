"""`search` and `autocomplete` through /graphql: shapes, paging, facets, errors and statement counts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from db.paging import decode_global_id
from tests.integration._search_data import PAPERS, Api, Corpus, api_for, load_corpus

BY_TITLE = {p.title: p for p in PAPERS}


@pytest.fixture(scope="module")
async def corpus(make_database) -> Corpus:
    return await load_corpus(await make_database("search_api"))


@pytest.fixture
async def api(corpus: Corpus) -> AsyncIterator[Api]:
    async with api_for(corpus.dsn) as api:
        yield api


SEARCH = """
query($q: String!, $mode: SearchMode, $filter: PaperFilter, $sort: SearchSort, $first: Int, $after: String,
      $page: Int, $limit: Int) {
  search(query: $q, mode: $mode, filter: $filter, sort: $sort, first: $first, after: $after, page: $page) {
    totalCount totalPages matchCount matchCountIsEstimate
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor page }
    edges { cursor score node { id arxivId title categories publishedAt: published citedByCount }
            highlights { title abstract } }
    nodes { arxivId }
    facets(limit: $limit) {
      categories { values { value count } otherCount otherValues }
      primaryCategories { values { value count } otherCount otherValues }
      years { values { value count } otherCount otherValues }
    }
  }
}"""


async def test_keyword_search_page_with_facets_and_highlights(api: Api) -> None:
    data = (await api.data(SEARCH, q="graph neural networks", first=2, limit=100))["search"]
    everything = (await api.data(SEARCH, q="graph neural networks", first=100, limit=100))["search"]
    total = everything["totalCount"]
    assert data["totalCount"] == total == len(everything["nodes"]) >= 4
    assert data["matchCount"] == total and data["matchCountIsEstimate"] is False
    assert data["totalPages"] == -(-total // 2)
    assert [n["arxivId"] for n in data["nodes"]] == [n["arxivId"] for n in everything["nodes"][:2]]
    assert data["pageInfo"]["hasNextPage"] and not data["pageInfo"]["hasPreviousPage"]
    assert data["pageInfo"]["page"] == 1
    assert data["pageInfo"]["endCursor"] == data["edges"][-1]["cursor"]
    edge = data["edges"][0]
    assert edge["score"] > 0 and "<mark>" in edge["highlights"]["title"]
    # Facets of the whole result, not of the two papers on the page.
    assert data["facets"] == everything["facets"]
    matched = [BY_TITLE[e["node"]["title"]] for e in everything["edges"]]
    years = {f["value"]: f["count"] for f in data["facets"]["years"]["values"]}
    assert years == {str(y): sum(1 for p in matched if p.year == y) for y in {p.year for p in matched}}


async def test_facet_limit_counts_the_rest(api: Api) -> None:
    full = (await api.data(SEARCH, q="networks OR learning OR graph", limit=100))["search"]["facets"]["categories"]
    cut = (await api.data(SEARCH, q="networks OR learning OR graph", limit=2))["search"]["facets"]["categories"]
    assert len(full["values"]) > 2 and full["otherCount"] == 0 and full["otherValues"] == 0
    assert cut["values"] == full["values"][:2]
    assert cut["otherCount"] == sum(v["count"] for v in full["values"][2:])
    assert cut["otherValues"] == len(full["values"]) - 2
    default = (await api.data(SEARCH, q="networks OR learning OR graph"))["search"]["facets"]["categories"]
    assert default["values"] == full["values"][:10]


async def test_numbered_pages_and_cursors_agree(api: Api) -> None:
    q = "networks OR graph OR learning"
    full = [n["arxivId"] for n in (await api.data(SEARCH, q=q, first=100, sort="MOST_CITED"))["search"]["nodes"]]
    page2 = (await api.data(SEARCH, q=q, first=3, page=2, sort="MOST_CITED"))["search"]
    assert [n["arxivId"] for n in page2["nodes"]] == full[3:6]
    assert page2["pageInfo"]["hasPreviousPage"] and page2["pageInfo"]["page"] == 2
    walked: list[str] = []
    after = None
    while True:
        conn = (await api.data(SEARCH, q=q, first=3, after=after, sort="MOST_CITED"))["search"]
        walked += [n["arxivId"] for n in conn["nodes"]]
        if not conn["pageInfo"]["hasNextPage"]:
            break
        after = conn["pageInfo"]["endCursor"]
    assert walked == full


async def test_filter_input_is_the_papers_filter(api: Api) -> None:
    data = await api.data(SEARCH, q="networks OR learning", filter={"category": "q-bio.BM"})
    titles = {e["node"]["title"] for e in data["search"]["edges"]}
    assert titles == {p.title for p in PAPERS if "q-bio.BM" in p.categories and p.key in ("gnn_molecules", "protein")}
    dated = await api.data(SEARCH, q="networks", filter={"publishedFrom": "2020-01-01", "publishedTo": "2021-12-31"})
    assert all(e["node"]["publishedAt"][:4] in ("2020", "2021") for e in dated["search"]["edges"])
    assert dated["search"]["totalCount"] > 0


async def test_no_match_is_an_empty_connection(api: Api) -> None:
    data = (await api.data(SEARCH, q="zyxwvut"))["search"]
    assert data["totalCount"] == 0 and data["totalPages"] == 0 and data["nodes"] == [] and data["edges"] == []
    assert data["pageInfo"] == {
        "hasNextPage": False,
        "hasPreviousPage": False,
        "startCursor": None,
        "endCursor": None,
        "page": 1,
    }
    for facet in data["facets"].values():
        assert facet == {"values": [], "otherCount": 0, "otherValues": 0}


@pytest.mark.parametrize(
    "variables",
    [
        {"q": ""},
        {"q": "   "},
        {"q": "the and of"},
        {"q": "-graph"},
        {"q": "x" * 501},
        {"q": "graph", "first": 0},
        {"q": "graph", "first": 101},
        {"q": "graph", "page": 0},
        {"q": "graph", "page": 1, "after": "abc"},
        {"q": "graph", "after": "not-a-cursor"},
        {"q": "graph", "limit": 0},
    ],
)
async def test_bad_input_is_bad_user_input(api: Api, variables: dict[str, Any]) -> None:
    assert await api.error_code(SEARCH, **variables) == "BAD_USER_INPUT"


async def test_a_cursor_does_not_cross_sorts(api: Api) -> None:
    conn = (await api.data(SEARCH, q="networks", first=1, sort="NEWEST"))["search"]
    cursor = conn["pageInfo"]["endCursor"]
    assert await api.error_code(SEARCH, q="networks", first=1, sort="OLDEST", after=cursor) == "BAD_USER_INPUT"


async def test_one_statement_per_search(api: Api) -> None:
    api.counter.reset()
    await api.data(SEARCH, q="graph", first=5, limit=5)
    # Page, total, facets and highlights in one statement (no author fields selected), inside a read-only
    # transaction that sets the planner up for it.
    reads = [q for q in api.counter.statements if q.lstrip().upper().startswith(("WITH", "SELECT"))]
    assert len(reads) == 1
    assert api.counter.count <= 4


async def test_semantic_off_by_configuration_keeps_keyword_working(corpus: Corpus) -> None:
    async with api_for(corpus.dsn, semantic_search=False) as api:
        for mode in ("SEMANTIC", "HYBRID"):
            body = await api.query(SEARCH, q="graph", mode=mode)
            assert body["errors"][0]["extensions"]["code"] == "SEMANTIC_UNAVAILABLE"
            assert "KEYWORD" in body["errors"][0]["message"]
        assert (await api.data(SEARCH, q="graph"))["search"]["totalCount"] > 0


AUTOCOMPLETE = """query($q: String!, $types: [EntityType!], $first: Int) {
  autocomplete(query: $q, types: $types, first: $first) { type id databaseId label slug hint }
}"""


async def test_autocomplete(api: Api, corpus: Corpus) -> None:
    found = (await api.data(AUTOCOMPLETE, q="Muller"))["autocomplete"]
    assert [(s["type"], s["label"]) for s in found[:2]] == [
        ("RESEARCHER", "Hans Müller"),
        ("RESEARCHER", "Anna Müller"),
    ]
    assert found[0]["hint"] == "ETH Zürich"
    assert decode_global_id(found[0]["id"]) == ("Researcher", corpus.researcher_ids["Hans Müller"])
    places = (await api.data(AUTOCOMPLETE, q="Universite de Montreal", types=["INSTITUTION"]))["autocomplete"]
    assert places[0]["label"] == "Université de Montréal" and places[0]["hint"] == "CA"
    assert all(s["type"] == "INSTITUTION" for s in places)
    papers = (await api.data(AUTOCOMPLETE, q="surface cod", types=["PAPER"], first=1))["autocomplete"]
    assert [s["label"] for s in papers] == ["Quantum error correction with surface codes"]
    assert (await api.data(AUTOCOMPLETE, q="Muller", types=[]))["autocomplete"] == []
    for bad in ({"q": ""}, {"q": "Muller", "first": 0}, {"q": "Muller", "first": 51}, {"q": "x" * 201}):
        assert await api.error_code(AUTOCOMPLETE, **bad) == "BAD_USER_INPUT"


RESEARCHERS_Q = """query($q: String, $first: Int, $after: String, $page: Int) {
  researchers(query: $q, first: $first, after: $after, page: $page) {
    totalCount totalPages nodes { name } pageInfo { hasNextPage endCursor }
  }
}"""
INSTITUTIONS_Q = """query($q: String, $country: String) {
  institutions(query: $q, country: $country) { totalCount nodes { name country } }
}"""


async def test_researchers_by_name_rank_by_similarity_then_papers(api: Api) -> None:
    for q in ("Muller", "müller", "Nuller", "mueller"):
        data = (await api.data(RESEARCHERS_Q, q=q))["researchers"]
        assert [n["name"] for n in data["nodes"][:2]] == ["Hans Müller", "Anna Müller"], q
    exact = (await api.data(RESEARCHERS_Q, q="Anna Muller"))["researchers"]
    assert exact["nodes"][0]["name"] == "Anna Müller"
    first = (await api.data(RESEARCHERS_Q, q="Muller", first=1))["researchers"]
    assert first["totalCount"] >= 2 and first["pageInfo"]["hasNextPage"]
    second = await api.data(RESEARCHERS_Q, q="Muller", first=1, after=first["pageInfo"]["endCursor"])
    assert [n["name"] for n in second["researchers"]["nodes"]] == ["Anna Müller"]
    paged = (await api.data(RESEARCHERS_Q, q="Muller", first=1, page=2))["researchers"]
    assert [n["name"] for n in paged["nodes"]] == ["Anna Müller"]
    assert await api.error_code(RESEARCHERS_Q, q="Muller", after="garbage") == "BAD_USER_INPUT"


async def test_institutions_by_name(api: Api) -> None:
    data = (await api.data(INSTITUTIONS_Q, q="Universite de Montreal"))["institutions"]
    assert data["nodes"][0] == {"name": "Université de Montréal", "country": "CA"}
    swiss = (await api.data(INSTITUTIONS_Q, q="eth zurich", country="ch"))["institutions"]
    assert [n["name"] for n in swiss["nodes"]] == ["ETH Zürich"]
    assert await api.error_code(INSTITUTIONS_Q, q="eth", country="Switzerland") == "BAD_USER_INPUT"
