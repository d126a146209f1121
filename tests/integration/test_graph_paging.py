"""Connections: numbered pages and keyset cursors, argument checks, filters and sorts."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime
from typing import Any

import asyncpg
import pytest

from tests.integration.graph_support import (
    PAPERS,
    RESEARCHERS,
    AuthorSeed,
    Graph,
    PaperSeed,
    Seeded,
    graph,
    insert_paper,
    seeded_database,
)


@pytest.fixture
async def g(make_database) -> AsyncIterator[Graph]:
    seeded = await seeded_database(make_database)
    async with graph(seeded) as g:
        yield g


def expected(seeded: Seeded, papers: list[PaperSeed], sort: str) -> list[str]:
    """The order a sort promises, computed from the seed: ties broken by database id."""
    pid = seeded.paper_ids
    if sort == "NEWEST":
        key: Any = lambda p: (-p.published.timestamp(), -pid[p.arxiv_id])  # noqa: E731
    elif sort == "OLDEST":
        key = lambda p: (p.published.timestamp(), pid[p.arxiv_id])  # noqa: E731
    else:
        key = lambda p: (p.cited_by_count is None, -(p.cited_by_count or 0), -pid[p.arxiv_id])  # noqa: E731
    return [p.arxiv_id for p in sorted(papers, key=key)]


LIST_Q = """query($first: Int, $page: Int, $after: String, $sort: PaperSort, $filter: PaperFilter) {
  papers(first: $first, page: $page, after: $after, sort: $sort, filter: $filter) {
    totalCount totalPages
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor page }
    edges { cursor node { arxivId } }
    nodes { arxivId }
  }
}"""


async def test_numbered_pages(g: Graph) -> None:
    order = expected(g.seeded, list(PAPERS), "NEWEST")
    pages = math.ceil(len(order) / 5)
    for page in range(1, pages + 1):
        conn = (await g.data(LIST_Q, {"first": 5, "page": page}))["papers"]
        assert [n["arxivId"] for n in conn["nodes"]] == order[(page - 1) * 5 : page * 5]
        assert conn["totalCount"] == len(order)
        assert conn["totalPages"] == pages
        info = conn["pageInfo"]
        assert info["page"] == page
        assert info["hasPreviousPage"] is (page > 1)
        assert info["hasNextPage"] is (page < pages)
        assert [e["node"]["arxivId"] for e in conn["edges"]] == [n["arxivId"] for n in conn["nodes"]]
        assert info["endCursor"] == conn["edges"][-1]["cursor"]
        assert info["startCursor"] == conn["edges"][0]["cursor"]
    past_the_end = (await g.data(LIST_Q, {"first": 5, "page": pages + 1}))["papers"]
    assert past_the_end["nodes"] == [] and past_the_end["pageInfo"]["hasNextPage"] is False
    assert past_the_end["totalCount"] == len(order)


async def test_default_page_size_is_24(g: Graph) -> None:
    conn = (await g.data(LIST_Q))["papers"]
    assert len(conn["nodes"]) == 24
    assert conn["totalPages"] == math.ceil(len(PAPERS) / 24)


@pytest.mark.parametrize("sort", ["NEWEST", "OLDEST", "MOST_CITED"])
async def test_cursor_walk_visits_every_paper_once_in_sort_order(g: Graph, sort: str) -> None:
    seen: list[str] = []
    after = None
    while True:
        conn = (await g.data(LIST_Q, {"first": 7, "after": after, "sort": sort}))["papers"]
        seen += [n["arxivId"] for n in conn["nodes"]]
        assert conn["pageInfo"]["page"] == (1 if after is None else None)
        if not conn["pageInfo"]["hasNextPage"]:
            break
        after = conn["pageInfo"]["endCursor"]
    assert seen == expected(g.seeded, list(PAPERS), sort)


async def test_any_edge_cursor_continues_after_that_edge(g: Graph) -> None:
    order = expected(g.seeded, list(PAPERS), "MOST_CITED")
    conn = (await g.data(LIST_Q, {"first": 30, "sort": "MOST_CITED"}))["papers"]
    for i in (0, 10, 26, 28):
        cursor = conn["edges"][i]["cursor"]
        rest = (await g.data(LIST_Q, {"first": 3, "after": cursor, "sort": "MOST_CITED"}))["papers"]
        assert [n["arxivId"] for n in rest["nodes"]] == order[i + 1 : i + 4]


@pytest.mark.parametrize(
    ("variables", "needle"),
    [
        ({"first": 0}, "first"),
        ({"first": 101}, "first"),
        ({"first": -3}, "first"),
        ({"page": 0}, "page"),
        ({"page": 1, "after": "abc"}, "either"),
        ({"after": "not-a-cursor"}, "cursor"),
        ({"after": "W10"}, "cursor"),
    ],
)
async def test_bad_paging_arguments_are_bad_user_input(g: Graph, variables: dict[str, Any], needle: str) -> None:
    body = await g.query(LIST_Q, variables)
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert needle in error["message"]


async def test_a_cursor_only_works_for_its_own_sort(g: Graph) -> None:
    conn = (await g.data(LIST_Q, {"first": 2, "sort": "NEWEST"}))["papers"]
    body = await g.query(LIST_Q, {"first": 2, "sort": "MOST_CITED", "after": conn["pageInfo"]["endCursor"]})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


def _ids(data: dict[str, Any]) -> list[str]:
    return [n["arxivId"] for n in data["papers"]["nodes"]]


async def test_filters(g: Graph) -> None:
    everything = list(PAPERS)

    async def check(filter_: dict[str, Any], keep: list[PaperSeed]) -> None:
        data = await g.data(LIST_Q, {"first": 100, "filter": filter_})
        assert _ids(data) == expected(g.seeded, keep, "NEWEST"), filter_
        assert data["papers"]["totalCount"] == len(keep)

    await check({"category": "cs.DC"}, [p for p in everything if "cs.DC" in p.categories])
    await check({"category": "cs.LG"}, [p for p in everything if "cs.LG" in p.categories])
    await check({"category": "cs.LG", "primaryOnly": True}, [p for p in everything if p.categories[0] == "cs.LG"])
    start, end = date(2024, 1, 5), date(2024, 1, 12)
    await check(
        {"publishedFrom": start.isoformat(), "publishedTo": end.isoformat()},
        [p for p in everything if start <= p.published.date() <= end],
    )
    await check({"publishedTo": "2000-01-01"}, [p for p in everything if p.published.year < 2000])
    await check({"researcher": "s2:1741101"}, [p for p in everything if any(a.researcher == "ada" for a in p.authors)])
    jose = g.seeded.researcher_ids["jose"]
    await check({"researcher": str(jose)}, [p for p in everything if any(a.researcher == "jose" for a in p.authors)])
    await check(
        {"institution": "University of Tokyo"},
        [p for p in everything if any("tokyo" in a.institutions for a in p.authors)],
    )
    await check(
        {"institution": "0161xgx34", "category": "cs.DC"},
        [p for p in everything if "cs.DC" in p.categories and any("umontreal" in a.institutions for a in p.authors)],
    )
    await check({"researcher": "s2:31337"}, [])
    await check({"institution": "0abcdef23"}, [])  # a ROR id not in the archive names no paper


async def test_an_institution_filter_never_guesses(g: Graph) -> None:
    # A name that is none of an institution's names is a mistake to report, not another institution to list.
    body = await g.query(LIST_Q, {"filter": {"institution": "University of Tokio"}})
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "'University of Tokyo'" in error["message"], error["message"]
    body = await g.query(LIST_Q, {"filter": {"institution": "Zzyzx Qwv Institute of Nothing"}})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    mit = await g.data(LIST_Q, {"first": 100, "filter": {"institution": "MASSACHUSETTS INSTITUTE OF TECHNOLOGY"}})
    assert mit["papers"]["totalCount"] == sum(1 for p in PAPERS if any("mit" in a.institutions for a in p.authors))


async def test_filter_errors(g: Graph) -> None:
    body = await g.query(LIST_Q, {"filter": {"publishedFrom": "2024-02-01", "publishedTo": "2024-01-01"}})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    body = await g.query(LIST_Q, {"filter": {"researcher": "not a researcher id"}})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    body = await g.query(LIST_Q, {"filter": {"publishedFrom": "yesterday"}})
    # Variable coercion: a request error (nothing executed, no `data` entry), readable.
    assert "errors" in body and "data" not in body
    assert "publishedFrom" in body["errors"][0]["message"] or "Date" in body["errors"][0]["message"]
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    body = await g.query(LIST_Q, {"first": "ten"})
    assert "data" not in body and body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


RESEARCHER_PAPERS_Q = """query($id: String!, $filter: ResearcherPaperFilter, $sort: PaperSort, $first: Int,
    $page: Int, $after: String) {
  researcher(id: $id) { papers(filter: $filter, sort: $sort, first: $first, page: $page, after: $after) {
    totalCount totalPages nodes { arxivId } pageInfo { hasNextPage endCursor } } }
}"""


def _position(paper: PaperSeed, key: str) -> str | None:
    positions = [i for i, a in enumerate(paper.authors, start=1) if a.researcher == key]
    if not positions:
        return None
    n, pos = len(paper.authors), positions[0]
    if n == 1:
        return "SOLO"
    return "FIRST" if pos == 1 else "LAST" if pos == n else "MIDDLE"


async def test_researcher_papers_by_author_position(g: Graph) -> None:
    mine = [p for p in PAPERS if _position(p, "wumo")]
    data = await g.data(RESEARCHER_PAPERS_Q, {"id": "s2:2109311836", "first": 100})
    assert [n["arxivId"] for n in data["researcher"]["papers"]["nodes"]] == expected(g.seeded, mine, "NEWEST")
    for position in ("FIRST", "LAST", "MIDDLE", "SOLO"):
        keep = [p for p in mine if _position(p, "wumo") == position]
        assert keep, position
        data = await g.data(
            RESEARCHER_PAPERS_Q, {"id": "s2:2109311836", "first": 100, "filter": {"authorPosition": position}}
        )
        papers = data["researcher"]["papers"]
        assert [n["arxivId"] for n in papers["nodes"]] == expected(g.seeded, keep, "NEWEST"), position
        assert papers["totalCount"] == len(keep)


async def test_researcher_papers_pages_like_the_site(g: Graph) -> None:
    mine = expected(g.seeded, [p for p in PAPERS if _position(p, "wumo")], "OLDEST")
    first = await g.data(RESEARCHER_PAPERS_Q, {"id": "s2:2109311836", "sort": "OLDEST", "page": 1})
    second = await g.data(RESEARCHER_PAPERS_Q, {"id": "s2:2109311836", "sort": "OLDEST", "page": 2})
    assert first["researcher"]["papers"]["totalPages"] == math.ceil(len(mine) / 24)
    got = [n["arxivId"] for d in (first, second) for n in d["researcher"]["papers"]["nodes"]]
    assert got == mine
    filtered = await g.data(RESEARCHER_PAPERS_Q, {"id": "s2:2109311836", "filter": {"category": "stat.ML"}})
    keep = [p for p in PAPERS if _position(p, "wumo") and "stat.ML" in p.categories]
    assert [n["arxivId"] for n in filtered["researcher"]["papers"]["nodes"]] == expected(g.seeded, keep, "NEWEST")


LISTS_Q = """query($q: String, $rsort: ResearcherSort, $isort: InstitutionSort, $country: String) {
  researchers(query: $q, sort: $rsort, first: 10) { totalCount nodes { name } }
  institutions(country: $country, sort: $isort, first: 10) { totalCount nodes { name country } }
}"""


async def test_researcher_and_institution_lists(g: Graph) -> None:
    data = await g.data(LISTS_Q, {"rsort": "NAME", "isort": "NAME"})
    assert [n["name"] for n in data["researchers"]["nodes"]] == ["Ada Lovelace", "José Núñez", "Wumo Yan"]
    assert [n["name"] for n in data["institutions"]["nodes"]] == [
        "Massachusetts Institute of Technology",
        "Université de Montréal",
        "University of Tokyo",
    ]
    by_count = await g.data(LISTS_Q)
    counts = {r.name: sum(1 for p in PAPERS for a in p.authors if a.researcher == r.key) for r in RESEARCHERS}
    assert [n["name"] for n in by_count["researchers"]["nodes"]] == sorted(counts, key=lambda n: -counts[n])
    found = await g.data(LISTS_Q, {"q": "nunez", "country": "jp"})
    assert [n["name"] for n in found["researchers"]["nodes"]] == ["José Núñez"]
    assert found["researchers"]["totalCount"] == 1
    assert [n["name"] for n in found["institutions"]["nodes"]] == ["University of Tokyo"]
    body = await g.query(LISTS_Q, {"country": "Japan"})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    literal = await g.data(LISTS_Q, {"q": "%"})
    assert literal["researchers"]["totalCount"] == 0  # LIKE wildcards are taken literally


async def test_institution_researchers_and_papers(g: Graph) -> None:
    data = await g.data(
        """{ institution(id: "University of Tokyo") {
             researchers(first: 10) { totalCount nodes { name } }
             papers(first: 100) { totalCount nodes { arxivId } } } }"""
    )
    inst = data["institution"]
    assert sorted(n["name"] for n in inst["researchers"]["nodes"]) == ["Ada Lovelace", "José Núñez"]
    keep = [p for p in PAPERS if any("tokyo" in a.institutions for a in p.authors)]
    assert [n["arxivId"] for n in inst["papers"]["nodes"]] == expected(g.seeded, keep, "NEWEST")
    assert inst["papers"]["totalCount"] == len(keep)


async def test_an_institution_s_researcher_count_is_the_live_count(g: Graph) -> None:
    """An institution's researchers are counted from its stored figure (kept by every write: test_institution_figures):
    what counting the rows gives, for every institution, in one request (the counts batched)."""
    conn = await asyncpg.connect(g.seeded.dsn)
    try:
        live = {
            record[0]: record[1]
            for record in await conn.fetch(
                """SELECT i.id, (SELECT count(*) FROM researchers r WHERE r.id IN
                       (SELECT ri.researcher_id FROM researcher_institutions ri WHERE ri.institution_id = i.id))
                   FROM institutions i"""
            )
        }
    finally:
        await conn.close()
    fields = " ".join(
        f'i{n}: institution(id: "{iid}") {{ databaseId researchers(first: 1) {{ totalCount }} }}'
        for n, iid in enumerate(sorted(live))
    )
    data = await g.data(f"{{ {fields} }}")
    assert {v["databaseId"]: v["researchers"]["totalCount"] for v in data.values()} == live
    assert any(total > 0 for total in live.values())


@pytest.mark.parametrize("sort", ["NEWEST", "OLDEST", "MOST_CITED"])
async def test_institution_papers_page_by_page_in_each_sort(g: Graph, sort: str) -> None:
    # Each page is chosen by id before its rows are read: pages of two, in order, none skipped or repeated.
    keep = expected(g.seeded, [p for p in PAPERS if any("tokyo" in a.institutions for a in p.authors)], sort)
    assert len(keep) > 2
    seen: list[str] = []
    for page in range(1, math.ceil(len(keep) / 2) + 1):
        data = await g.data(
            """query($page: Int, $sort: PaperSort) { institution(id: "University of Tokyo") {
                 papers(first: 2, page: $page, sort: $sort) { totalCount nodes { arxivId } } } }""",
            {"page": page, "sort": sort},
        )
        papers = data["institution"]["papers"]
        assert papers["totalCount"] == len(keep)
        seen += [n["arxivId"] for n in papers["nodes"]]
    assert seen == keep


async def test_cursor_walk_is_stable_under_inserts(make_database) -> None:
    seeded = await seeded_database(make_database, "graph_inserts")
    # One paper newer than the first page (must not appear), one far behind the cursor (must appear, in place).
    ahead = PaperSeed("2411.00001", "Inserted ahead", ("cs.DC",), datetime.now(UTC), (AuthorSeed("Late Author"),))
    behind = PaperSeed(
        "2401.50000", "Inserted behind", ("cs.DC",), datetime(2024, 1, 2, 18, tzinfo=UTC), (AuthorSeed("Late"),)
    )
    async with graph(seeded) as g:
        first = (await g.data(LIST_Q, {"first": 10}))["papers"]
        seen = [n["arxivId"] for n in first["nodes"]]
        after = first["pageInfo"]["endCursor"]
        conn = await asyncpg.connect(seeded.dsn)
        try:
            for paper in (ahead, behind):
                await insert_paper(conn, seeded, paper)
        finally:
            await conn.close()
        while after:
            page = (await g.data(LIST_Q, {"first": 10, "after": after}))["papers"]
            seen += [n["arxivId"] for n in page["nodes"]]
            after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    assert seen == expected(seeded, [*PAPERS, behind], "NEWEST")
    assert ahead.arxiv_id not in seen
