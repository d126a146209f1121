"""No N+1: SQL statements per operation are fixed, whatever the page size."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator

import asyncpg
import pytest
from graphql.execution.executor import Executor
from strawberry.dataloader import DataLoader

from db.queries.aggregates import SELECT_INSTITUTION_STATS, SELECT_RESEARCHER_STATS_AND_MOST_CITED
from db.queries.papers import PaperRow
from resolvers import loaders as loaders_module
from resolvers.context import Context
from resolvers.loaders import Loaders
from tests.integration.graph_support import INSTITUTIONS, PAPERS, RESEARCHERS, Graph, graph, seeded_database


@pytest.fixture
async def g(make_database) -> AsyncIterator[Graph]:
    seeded = await seeded_database(make_database)
    async with graph(seeded) as g:
        yield g


PAPER_FIELDS = """id databaseId arxivId slug title abstract authorsText categories primaryCategory published updated
  absUrl pdfUrl doi journalRef comments citedByCount summary topics paperType researchField novelty
  significanceScore analysed"""

# The site's researcher page: the profile, its institutions, and a page of papers with every author,
# their profile and their institutions.
RESEARCHER_PAGE = f"""query ResearcherPage($id: String!, $first: Int, $page: Int, $category: String) {{
  researcher(id: $id) {{
    id databaseId slug name
    externalIds {{ semanticScholar openAlex orcid }}
    institutions {{ id slug name rorId country }}
    papers(first: $first, page: $page, sort: NEWEST, filter: {{category: $category}}) {{
      totalCount totalPages
      pageInfo {{ hasNextPage hasPreviousPage endCursor page }}
      nodes {{
        {PAPER_FIELDS}
        authors {{ position name researcher {{ id slug name }} institutions {{ id slug name rorId }} }}
      }}
    }}
  }}
}}"""
RESEARCHER_PAGE_BUDGET = 6

PAPER_PAGE = f"""query PaperPage($id: String!) {{
  paper(id: $id) {{
    {PAPER_FIELDS}
    authors {{ position name researcher {{ id slug name externalIds {{ orcid }} }} institutions {{ id slug name }} }}
  }}
}}"""
PAPER_PAGE_BUDGET = 4

PAPER_LIST = f"""query PaperList($first: Int, $after: String, $filter: PaperFilter) {{
  papers(first: $first, after: $after, filter: $filter) {{
    totalCount
    pageInfo {{ hasNextPage endCursor }}
    edges {{ cursor node {{ {PAPER_FIELDS} authors {{ name researcher {{ slug name }} }} }} }}
  }}
}}"""
PAPER_LIST_BUDGET = 3


async def test_researcher_page_runs_a_fixed_number_of_statements(g: Graph) -> None:
    wumo_papers = [p for p in PAPERS if any(a.researcher == "wumo" for a in p.authors)]
    counts = {}
    for first in (1, 24):
        data, counts[first] = await g.counted(RESEARCHER_PAGE, {"id": "s2:2109311836", "first": first})
        papers = data["researcher"]["papers"]
        assert len(papers["nodes"]) == first
        assert papers["totalCount"] == len(wumo_papers)
        authors = [a for n in papers["nodes"] for a in n["authors"]]
        assert all(a["researcher"] is None or a["researcher"]["slug"] for a in authors)
        if first == 24:
            # The page really carries up to 8 authors per paper, with profiles and institutions.
            assert max(len(n["authors"]) for n in papers["nodes"]) == 8
            assert any(a["institutions"] for a in authors)
            assert sum(1 for a in authors if a["researcher"]) > 24
    assert counts[1] == counts[24] <= RESEARCHER_PAGE_BUDGET
    # By numeric id (a loader) or with a filter: the same shape, the same count.
    wumo_id = g.seeded.researcher_ids["wumo"]
    _, by_id = await g.counted(RESEARCHER_PAGE, {"id": str(wumo_id), "first": 24, "page": 2, "category": "cs.DC"})
    assert by_id <= RESEARCHER_PAGE_BUDGET


async def test_researcher_page_matches_the_generic_loader_path(g: Graph) -> None:
    """The prefetched page and the DataLoader fallback give identical answers."""
    data = await g.data(RESEARCHER_PAGE, {"id": "s2:2109311836", "first": 24})
    # Same papers through node(...) fetched one by one: no prefetch, every relation from loaders.
    for paper in data["researcher"]["papers"]["nodes"][:6]:
        again = await g.data(
            "query($id: ID!) { node(id: $id) { ... on Paper { authors { position name "
            "researcher { id slug name } institutions { id slug name rorId } } } } }",
            {"id": paper["id"]},
        )
        assert again["node"]["authors"] == paper["authors"]


RESEARCHER_STATS_PAGE = """query($id: String!) { researcher(id: $id) {
  name authorPositions { first totalPapers } citationSummary { total } mostCitedPaper { arxivId } } }"""


async def test_a_researchers_statistics_are_read_beside_the_row_not_after_it(g: Graph) -> None:
    """By a database id, the statistics (the page's longest chain: them, then their most cited paper) start with
    the researcher's row. Held up on a table only the row's statement reads, the request has its statistics read
    while the row is still waiting."""
    wumo = str(g.seeded.researcher_ids["wumo"])
    conn = await asyncpg.connect(g.seeded.dsn)
    try:
        async with conn.transaction():
            await conn.execute("LOCK TABLE researcher_redirects IN ACCESS EXCLUSIVE MODE")
            g.counter.reset()
            request = asyncio.create_task(g.data(RESEARCHER_STATS_PAGE, {"id": wumo}))
            async with asyncio.timeout(4):  # within the statement timeout the row waits under (5 s)
                while SELECT_RESEARCHER_STATS_AND_MOST_CITED not in g.counter.statements:  # noqa: ASYNC110 - a logger, no signal
                    await asyncio.sleep(0.01)
            assert not request.done()
        answer = await request
    finally:
        await conn.close()
    again, statements = await g.counted(RESEARCHER_STATS_PAGE, {"id": wumo})
    assert answer == again
    wumo_papers = [p for p in PAPERS if any(a.researcher == "wumo" for a in p.authors)]
    assert answer["researcher"]["authorPositions"]["totalPapers"] == len(wumo_papers)
    # The most cited paper comes with the statistics: the row and the statistics, no statement of its own.
    cited = [p for p in wumo_papers if p.cited_by_count is not None]
    top = max(cited, key=lambda p: (p.cited_by_count, p.published))
    assert answer["researcher"]["mostCitedPaper"] == {"arxivId": top.arxiv_id}
    assert statements == 2, g.counter.statements
    # Not found: the statistics started for nothing are not an error.
    assert (await g.data(RESEARCHER_STATS_PAGE, {"id": "987654321"}))["researcher"] is None


async def test_an_institutions_statistics_are_read_beside_its_row(g: Graph, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for an institution: with its row held back, its fields' statistics are read meanwhile."""
    document = "query($id: String!) { institution(id: $id) { name fields { category count } } }"
    mit = str(g.seeded.institution_ids["mit"])
    expected = await g.data(document, {"id": mit})
    gate = asyncio.Event()
    read_rows = loaders_module.fetch_institutions_by_ids

    async def held(conn: object, ids: list[int]) -> object:
        await gate.wait()
        return await read_rows(conn, ids)  # type: ignore[arg-type]

    monkeypatch.setattr(loaders_module, "fetch_institutions_by_ids", held)
    g.counter.reset()
    request = asyncio.create_task(g.data(document, {"id": mit}))
    try:
        async with asyncio.timeout(4):
            while SELECT_INSTITUTION_STATS not in g.counter.statements:  # noqa: ASYNC110 - a logger, no signal
                await asyncio.sleep(0.01)
        assert not request.done()
    finally:
        gate.set()
    assert await request == expected and expected["institution"]["fields"]


async def test_paper_page_and_paper_list_budgets(g: Graph) -> None:
    data, count = await g.counted(PAPER_PAGE, {"id": "2401.00006"})
    assert data["paper"]["arxivId"] == "2401.00006"
    assert count <= PAPER_PAGE_BUDGET
    counts = []
    for first in (1, 24):
        data, n = await g.counted(PAPER_LIST, {"first": first})
        assert len(data["papers"]["edges"]) == first
        counts.append(n)
    assert counts[0] == counts[1] <= PAPER_LIST_BUDGET


async def test_aliases_and_fragments_still_batch(g: Graph) -> None:
    query = """query {
      a: paper(id: "2401.00001") { ...P } b: paper(id: "2401.00002") { ...P } c: paper(id: "2401.00003") { ...P }
    }
    fragment P on Paper { arxivId authors { name researcher { name institutions { name } } institutions { name } } }"""
    data, count = await g.counted(query)
    assert [data[k]["arxivId"] for k in "abc"] == ["2401.00001", "2401.00002", "2401.00003"]
    # papers, authorships with their researchers, authorship institutions, researcher institutions: one batch each.
    assert count == 4


async def test_lookahead_sees_through_fragments(g: Graph) -> None:
    query = """query($id: String!) { researcher(id: $id) { papers(first: 24) { ...Page } } }
    fragment Page on PaperConnection { total: totalCount nodes { ... on Paper { authors { ...A } } } }
    fragment A on Authorship { name researcher { name } institutions { name } }"""
    data, count = await g.counted(query, {"id": "s2:2109311836"})
    assert data["researcher"]["papers"]["total"] > 24
    assert count == 4  # researcher, page with its count, authorships with researchers, institutions


async def test_total_count_is_not_computed_unless_asked(g: Graph) -> None:
    _, without = await g.counted("{ papers(first: 3) { nodes { arxivId } } }")
    _, with_total = await g.counted("{ papers(first: 3) { totalCount nodes { arxivId } } }")
    assert (without, with_total) == (1, 2)


async def test_a_pages_count_comes_with_it_or_from_it(g: Graph) -> None:
    """totalCount takes a statement of its own only where neither the page's statement counts it (an owner's papers
    by date: the listing counts them with the page) nor the page shows it (a first page holding the whole list, or
    a numbered page holding the list's last rows)."""
    q = """query($id: String!, $first: Int, $page: Int, $after: String, $filter: ResearcherPaperFilter) {
      researcher(id: $id) { papers(first: $first, page: $page, after: $after, sort: NEWEST, filter: $filter) {
        totalCount totalPages pageInfo { endCursor } nodes { arxivId } } } }"""
    wumo = str(g.seeded.researcher_ids["wumo"])
    n = sum(1 for p in PAPERS if any(a.researcher == "wumo" for a in p.authors))
    assert n >= 5
    pages = ((n, 1), (n + 5, 1), (n - 1, 1), (n - 2, 2), (n, 2), (1, n))
    for filtered in (False, True):
        # A filter the listing cannot serve (a date, here one before every paper) reads the page from the papers.
        where = {"publishedFrom": "1990-01-01"} if filtered else None
        counted: dict[tuple[int, int], int] = {}
        for first, page in pages:
            variables = {"id": wumo, "first": first, "page": page, "filter": where}
            data, counted[(first, page)] = await g.counted(q, variables)
            papers = data["researcher"]["papers"]
            assert (papers["totalCount"], papers["totalPages"]) == (n, -(-n // first)), (first, page, filtered)
        # The researcher's row and the page; a count of its own past the end, and where a filtered page ends
        # before the list does.
        shown = {(n, 1): 2, (n + 5, 1): 2, (n - 2, 2): 2, (n, 2): 3, (1, n): 2}
        assert counted == {**shown, (n - 1, 1): 3 if filtered else 2}, filtered
    # After a cursor the page does not know what came before it: counted.
    first_page = await g.data(q, {"id": wumo, "first": 2})
    cursor = first_page["researcher"]["papers"]["pageInfo"]["endCursor"]
    data, statements = await g.counted(q, {"id": wumo, "first": n, "after": cursor})
    assert data["researcher"]["papers"]["totalCount"] == n and statements == 3
    # A list read on its own (not an owner's) the same way.
    everything = (await g.data("{ papers(first: 1) { totalCount } }"))["papers"]["totalCount"]
    data, statements = await g.counted(f"{{ papers(first: {everything + 1}) {{ totalCount nodes {{ id }} }} }}")
    assert data["papers"]["totalCount"] == everything and statements == 1


NESTED = """query($n: Int) { researchers(first: $n, sort: NAME) { nodes { name
  papers(first: 5, sort: OLDEST) { totalCount nodes { arxivId authors { name researcher { name } } } }
} } }"""


async def test_nested_connections_batch_across_owners(g: Graph) -> None:
    """A list of researchers, each with a page of papers: one page statement for all of them."""
    counts = []
    for n in (1, 3):
        data, count = await g.counted(NESTED, {"n": n})
        assert len(data["researchers"]["nodes"]) == n
        counts.append(count)
    # Researchers, their pages with their counts (each paper written whole with its authors: db/queries/written.py).
    assert counts[0] == counts[1] == 2
    # Each researcher's page equals what the researcher's own query answers.
    for node in data["researchers"]["nodes"]:
        alone = await g.data(
            """query($q: String) { researchers(query: $q, first: 1) { nodes {
                 papers(first: 5, sort: OLDEST) { totalCount nodes { arxivId authors { name researcher { name } } } }
               } } }""",
            {"q": node["name"]},
        )
        assert alone["researchers"]["nodes"][0]["papers"] == node["papers"]
        expected = sum(1 for p in PAPERS for a in p.authors if a.researcher and a.name == node["name"])
        assert node["papers"]["totalCount"] == expected


async def test_authors_papers_under_a_paper_batch(g: Graph) -> None:
    query = """{ paper(id: "2401.00006") { authors { name researcher { name
        papers(first: 2, filter: {authorPosition: FIRST}) { nodes { arxivId } } } } } }"""
    data, count = await g.counted(query)
    matched = [a for a in data["paper"]["authors"] if a["researcher"]]
    assert len(matched) >= 2
    assert count == 3  # paper, authorships with their researchers, one batch of pages


async def test_institutions_with_their_papers_and_researchers(g: Graph) -> None:
    query = """{ institutions(first: 3, sort: NAME) { nodes { name
        papers(first: 2) { totalCount nodes { arxivId } } researchers(first: 5) { nodes { name } } } } }"""
    data, count = await g.counted(query)
    nodes = data["institutions"]["nodes"]
    assert len(nodes) == 3
    for node in nodes:
        expected = {p.arxiv_id for p in PAPERS if any(node["name"] in _names(a.institutions) for a in p.authors)}
        assert node["papers"]["totalCount"] == len(expected)
        assert {n["arxivId"] for n in node["papers"]["nodes"]} <= expected
        researchers = {r.name for r in RESEARCHERS if set(r.institutions) & _keys(node["name"])}
        assert {n["name"] for n in node["researchers"]["nodes"]} == researchers
    assert count == 3  # institutions; one batch of paper pages, one of researcher pages, each with their counts


def _names(keys: tuple[str, ...]) -> set[str]:
    return {i.name for i in INSTITUTIONS if i.key in keys}


def _keys(name: str) -> set[str]:
    return {i.key for i in INSTITUTIONS if i.name == name}


async def test_an_answered_request_leaves_no_reference_cycle_behind(g: Graph) -> None:
    """What a request read is freed by reference counting once it is answered, not by the collector's full passes,
    which stall every request in flight for as long as they take (tens of milliseconds on a busy worker)."""
    gc.collect()
    gc.disable()
    try:
        await g.data(RESEARCHER_PAGE, {"id": "s2:2109311836", "first": 24})
        await g.data(PAPER_PAGE, {"id": "2401.00005"})
        await g.data(PAPER_LIST, {"first": 10})
        await g.data(RESEARCHER_STATS_PAGE, {"id": str(g.seeded.researcher_ids["wumo"])})
        await g.data(RESEARCHER_STATS_PAGE, {"id": "987654321"})
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = [
            type(o).__name__ for o in gc.garbage if isinstance(o, Context | Loaders | DataLoader | Executor | PaperRow)
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert cyclic == []
