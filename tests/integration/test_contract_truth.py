"""What the site and partners read is all there, consistent and right: each case of the contract's review.

The data is graph_support's hand-made archive plus what it lacked (aliases and acronyms, external ids, versions,
a withdrawn paper, arXiv's affiliation texts), in a database of this module's own. Expected values come from those
definitions, never from responses.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from db.paging import paper_global_id
from db.queries.figures import refresh_institution_figures, refresh_researcher_figures
from db.slugs import entity_slug, slugify
from tests.integration.graph_support import (
    PAPERS,
    AuthorSeed,
    Graph,
    PaperSeed,
    Seeded,
    graph,
    insert_paper,
    seeded_database,
)

MIT_ROR = "042nb2s44"
MIT_NAME = "Massachusetts Institute of Technology"
MADRID_ROR = "02p0gd045"  # a valid checksum
WITHDRAWN = PaperSeed(
    "2402.00077",
    "A withdrawn claim about distributed learning",
    ("cs.LG", "cs.DC"),
    datetime(2024, 2, 20, tzinfo=UTC),
    (AuthorSeed("Wumo Yan", "wumo", ("umontreal",)), AuthorSeed("Ada Lovelace", "ada", ("mit",))),
    cited_by_count=3,
)
S2_PAPER_ID = "c4a6a4b5bd02d3b9fcfad1b1aaa5f1bb5d2bd8d3"
RICH = "2401.00003"  # the paper given every external id


async def _enrich(seeded: Seeded) -> None:
    conn = await asyncpg.connect(seeded.dsn)
    try:
        async with conn.transaction():
            await conn.execute(
                "UPDATE institutions SET aliases = ARRAY['MIT', 'M.I.T.'], openalex_id = 'I63966007' WHERE ror_id = $1",
                MIT_ROR,
            )
            await conn.execute(
                "INSERT INTO institutions (ror_id, name, name_slug, country) VALUES ($1, 'Madrid Research Institute',"
                " 'madrid-research-institute', 'ES')",
                MADRID_ROR,
            )
            await insert_paper(conn, seeded, WITHDRAWN)
            await conn.execute("UPDATE papers SET withdrawn = true WHERE arxiv_id = $1", WITHDRAWN.arxiv_id)
            rich = seeded.paper_ids[RICH]
            await conn.execute(
                """UPDATE papers SET license = 'http://creativecommons.org/licenses/by/4.0/', s2_paper_id = $2,
                   s2_corpus_id = 258059792, openalex_id = 'W4365597205', doi = '10.1038/s42256-024-00832-8'
                   WHERE id = $1""",
                rich,
                S2_PAPER_ID,
            )
            await conn.execute(
                """INSERT INTO paper_versions (paper_id, version, submitted_at, size_kb, source_type)
                   VALUES ($1, 1, '2024-01-03T10:00:00Z', 120, 'D'), ($1, 2, '2024-01-04T11:00:00Z', 0, 'I')""",
                rich,
            )
            await conn.execute(
                "UPDATE authorships SET affiliation = 'Mila, Montreal' WHERE paper_id = $1 AND position = 1", rich
            )
            await conn.execute(
                "UPDATE researcher_institutions SET first_year = 2019, last_year = 2024 WHERE researcher_id = $1",
                seeded.researcher_ids["wumo"],
            )
            await refresh_researcher_figures(conn, None)
            await refresh_institution_figures(conn, None)
    finally:
        await conn.close()


_ENRICHED: set[str] = set()


@pytest.fixture
async def g(make_database) -> AsyncIterator[Graph]:
    seeded = await seeded_database(make_database, "truth")
    if seeded.dsn not in _ENRICHED:
        await _enrich(seeded)
        _ENRICHED.add(seeded.dsn)
    async with graph(seeded) as g:
        yield g


def _live_papers() -> list[PaperSeed]:
    return list(PAPERS)  # WITHDRAWN is not among them


def _codes(body: dict[str, Any]) -> list[str]:
    return [e["extensions"]["code"] for e in body.get("errors", [])]


# -- institutions: exact look-ups, never a guess --------------------------------------------------------------------

INSTITUTION_Q = "query($id: String!) { institution(id: $id) { databaseId name aliases externalIds { ror openAlex } } }"


async def test_a_typo_is_no_institution_and_acronyms_and_aliases_are(g: Graph) -> None:
    mit = g.seeded.institution_ids["mit"]
    assert (await g.data(INSTITUTION_Q, {"id": "Massachusets Institute"})) == {"institution": None}
    for form in ("MIT", "mit", "M.I.T.", "massachusetts institute of technology", "I63966007", MIT_ROR):
        found = (await g.data(INSTITUTION_Q, {"id": form}))["institution"]
        assert found is not None and found["databaseId"] == mit, form
    found = (await g.data(INSTITUTION_Q, {"id": "https://openalex.org/I63966007"}))["institution"]
    assert found["externalIds"] == {"ror": MIT_ROR, "openAlex": "I63966007"}
    assert found["aliases"] == ["MIT", "M.I.T."]


async def test_an_institution_filter_reports_a_typo_with_the_closest_names(g: Graph) -> None:
    query = "query($f: PaperFilter) { papers(filter: $f) { totalCount } }"
    body = await g.query(query, {"f": {"institution": "Massachusets Institute"}})
    assert body["data"] is None and _codes(body) == ["BAD_USER_INPUT"]
    assert repr(MIT_NAME) in body["errors"][0]["message"]
    by_acronym = (await g.data(query, {"f": {"institution": "MIT"}}))["papers"]["totalCount"]
    assert by_acronym == sum(1 for p in _live_papers() if any("mit" in a.institutions for a in p.authors))


# -- nested arguments: a bad one blanks its own field only -----------------------------------------------------------

RESEARCHER_PAGE_PAST_END = """query($id: String!, $page: Int!) { researcher(id: $id) {
  name paperCount
  papers(page: $page) { totalCount totalPages pageInfo { page hasNextPage hasPreviousPage } nodes { arxivId } }
} }"""


@pytest.mark.parametrize("page", [3, 5000, 2_000_000])
async def test_a_page_past_the_end_is_empty_with_the_true_totals(g: Graph, page: int) -> None:
    wumo = str(g.seeded.researcher_ids["wumo"])
    data = (await g.data(RESEARCHER_PAGE_PAST_END, {"id": wumo, "page": page}))["researcher"]
    total = sum(1 for p in _live_papers() if any(a.researcher == "wumo" for a in p.authors))
    assert data["name"] == "Wumo Yan" and data["paperCount"] == total
    assert data["papers"] == {
        "totalCount": total,
        "totalPages": -(-total // 24),
        "pageInfo": {"page": page, "hasNextPage": False, "hasPreviousPage": True},
        "nodes": [],
    }


async def test_a_malformed_nested_argument_leaves_the_parent_s_other_fields(g: Graph) -> None:
    wumo = str(g.seeded.researcher_ids["wumo"])
    body = await g.query(
        """query($id: String!) { researcher(id: $id) {
             name hIndex fields { category }
             papers(first: 0) { totalCount }
             coauthors(first: 500) { sharedPapers }
             network(depth: 7) { edges { sharedPapers } }
             institutions { name }
           } }""",
        {"id": wumo},
    )
    r = body["data"]["researcher"]
    assert r["name"] == "Wumo Yan" and r["fields"] and r["institutions"]
    assert (r["papers"], r["coauthors"], r["network"]) == (None, None, None)
    assert sorted((tuple(e["path"]), e["extensions"]["code"]) for e in body["errors"]) == [
        (("researcher", "coauthors"), "BAD_USER_INPUT"),
        (("researcher", "network"), "BAD_USER_INPUT"),
        (("researcher", "papers"), "BAD_USER_INPUT"),
    ]
    body = await g.query(
        """{ institution(id: "MIT") { name papers(filter: {institution: "Nowhere At All"}) { totalCount }
             researchers(after: "tampered") { totalCount } topResearchers(first: 0) { name } } }"""
    )
    assert body["data"]["institution"] == {
        "name": MIT_NAME,
        "papers": None,
        "researchers": None,
        "topResearchers": None,
    }
    assert _codes(body) == ["BAD_USER_INPUT"] * 3


# -- one definition of a field's count -------------------------------------------------------------------------------

FIELDS_Q = """query($id: String!) { researcher(id: $id) {
  paperCount fields { category count primaryCount } papers { totalCount }
} }"""
COUNT_Q = "query($f: PaperFilter) { papers(filter: $f) { totalCount } }"


async def test_the_count_beside_a_category_link_is_what_the_link_lists(g: Graph) -> None:
    for key in ("wumo", "ada", "jose"):
        rid = g.seeded.researcher_ids[key]
        r = (await g.data(FIELDS_Q, {"id": str(rid)}))["researcher"]
        mine = [p for p in _live_papers() if any(a.researcher == key for a in p.authors)]
        assert r["paperCount"] == r["papers"]["totalCount"] == len(mine)
        expected = {c: sum(1 for p in mine if c in p.categories) for p in mine for c in p.categories}
        assert {f["category"]: f["count"] for f in r["fields"]} == expected
        assert sum(f["primaryCount"] for f in r["fields"]) == len(mine)
        for f in r["fields"]:
            for primary_only, count in ((False, f["count"]), (True, f["primaryCount"])):
                link = {"researcher": str(rid), "category": f["category"], "primaryOnly": primary_only}
                assert (await g.data(COUNT_Q, {"f": link}))["papers"]["totalCount"] == count, (key, link)
    # The same for an institution's fields and its papers list.
    inst = (
        await g.data(
            """{ institution(id: "0161xgx34") { paperCount fields { category count primaryCount }
                 papers { totalCount } } }"""
        )
    )["institution"]
    assert inst["paperCount"] == inst["papers"]["totalCount"]
    for f in inst["fields"]:
        link = {"institution": "0161xgx34", "category": f["category"]}
        assert (await g.data(COUNT_Q, {"f": link}))["papers"]["totalCount"] == f["count"]


# -- one name matching rule whatever the sort ------------------------------------------------------------------------


@pytest.mark.parametrize("query", ["wumo", "Ada Lovelace", "nunez", "lovelac", "jo"])
async def test_researchers_by_name_are_the_same_set_whatever_the_sort(g: Graph, query: str) -> None:
    q = "query($q: String, $s: ResearcherSort, $f: ResearcherFilter) { researchers(query: $q, sort: $s, filter: $f)"
    q += " { totalCount nodes { databaseId } } }"
    sets = {}
    for sort in (None, "RELEVANCE", "PAPER_COUNT", "NAME", "H_INDEX", "CITATIONS"):
        found = (await g.data(q, {"q": query, "s": sort}))["researchers"]
        assert found["totalCount"] == len(found["nodes"])
        sets[sort] = {n["databaseId"] for n in found["nodes"]}
    assert len({frozenset(s) for s in sets.values()}) == 1, sets
    assert sets[None], query
    # A filter narrows the same set, it does not change the rule.
    narrowed = (await g.data(q, {"q": query, "s": "NAME", "f": {"maxHIndex": 0}}))["researchers"]["nodes"]
    assert {n["databaseId"] for n in narrowed} <= sets[None]


@pytest.mark.parametrize("query", ["university", "Universite de Montreal", "Univrsity of Tokyo"])
async def test_institutions_by_name_are_the_same_set_whatever_the_sort(g: Graph, query: str) -> None:
    q = "query($q: String, $s: InstitutionSort) { institutions(query: $q, sort: $s) { nodes { databaseId } } }"
    sets = [
        {n["databaseId"] for n in (await g.data(q, {"q": query, "s": s}))["institutions"]["nodes"]}
        for s in (None, "RELEVANCE", "PAPER_COUNT", "NAME")
    ]
    assert sets[0] and all(s == sets[0] for s in sets), sets


# -- text PostgreSQL cannot store, and tampered cursors: BAD_USER_INPUT at the resolvers' edge ---------------------


def _cursor(sort: str, *key: object) -> str:
    """A cursor as the API spells them, holding whatever a tamperer put in (json: integers of any width)."""
    return base64.urlsafe_b64encode(json.dumps([sort, *key]).encode()).decode().rstrip("=")


BAD_INPUTS = [
    ('{ search(query: "a\\u0000") { totalCount } }', "search"),
    ('{ autocomplete(query: "ab\\u0000") { label } }', "autocomplete"),
    ('{ papers(filter: {category: "cs\\u0000"}) { totalCount } }', "papers"),
    ('{ papers(filter: {researcher: "1\\u0000"}) { totalCount } }', "papers"),
    ('{ institution(id: "\\u0000") { name } }', "institution"),
    ('{ institutions(query: "uni\\u0000") { totalCount } }', "institutions"),
    ('{ researcher(id: "\\u0000") { name } }', "researcher"),
    ('{ paper(id: "2401.00001\\u0000") { title } }', "paper"),
    ('{ resolvePath(path: "/institutions/a\\u0000b") { path } }', "resolvePath"),
    (f'{{ papers(after: "{_cursor("NEWEST", 2**70, 1)}") {{ totalCount }} }}', "papers"),
    (f'{{ papers(after: "{_cursor("NEWEST", 9 * 10**18, 1)}") {{ totalCount }} }}', "papers"),
    (f'{{ papers(after: "{_cursor("NEWEST", -(9 * 10**18), 1)}") {{ totalCount }} }}', "papers"),
    (f'{{ papers(sort: MOST_CITED, after: "{_cursor("MOST_CITED", 2**40, 1)}") {{ totalCount }} }}', "papers"),
    (f'{{ papers(after: "{_cursor("NEWEST", 1, 2**64)}") {{ totalCount }} }}', "papers"),
    (
        f'{{ search(query: "learning", after: "{_cursor("search-KEYWORD-RELEVANCE", "abc", 1)}") {{ totalCount }} }}',
        "search",
    ),
    (
        f'{{ search(query: "learning", after: "{_cursor("search-KEYWORD-RELEVANCE", "nan", 1)}") {{ totalCount }} }}',
        "search",
    ),
    (
        f'{{ researchers(query: "wumo", after: "{_cursor("NAME_RELEVANCE", "inf", 1, 1)}") {{ totalCount }} }}',
        "researchers",
    ),
    (f'{{ researchers(sort: NAME, after: "{_cursor("NAME", "x", 2**63)}") {{ totalCount }} }}', "researchers"),
    (f'{{ sitemap(kind: PAPER, after: "{_cursor("sitemap:PAPER", 9 * 10**18, 1)}") {{ hasNextPage }} }}', "sitemap"),
    (
        f'{{ changes(since: "2020-01-01T00:00:00Z", after: "{_cursor("changes", 9 * 10**18, 0, 1)}") '
        "{ nodes { id } } }",
        "changes",
    ),
]


async def test_text_that_is_no_unicode_is_refused_before_postgresql(g: Graph) -> None:
    # JSON carries an unpaired surrogate where a GraphQL string literal cannot: through a variable. Over HTTP the
    # edge refuses the body (BAD_REQUEST); run in-process, the arguments' check refuses it (BAD_USER_INPUT).
    from resolvers.context import Context
    from schema import build_schema
    from settings import Settings

    schema = build_schema(Settings())
    pool = await asyncpg.create_pool(g.seeded.dsn, min_size=1, max_size=1)
    try:
        for query, variables in (
            ("query($q: String!) { search(query: $q) { totalCount } }", {"q": "graph \ud800"}),
            ("query($f: PaperFilter) { papers(filter: $f) { totalCount } }", {"f": {"category": "cs.\udfff"}}),
        ):
            payload = json.dumps({"query": query, "variables": variables})  # ASCII: the surrogate as \\ud800
            response = await g.client.post("/graphql", content=payload, headers={"content-type": "application/json"})
            assert _codes(response.json()) == ["BAD_REQUEST"], response.text
            result = await schema.execute(
                query, variable_values=variables, context_value=Context.create(pool, Settings())
            )
            assert result.errors and result.errors[0].extensions == {"code": "BAD_USER_INPUT"}
            assert "Unicode" in result.errors[0].message
    finally:
        await pool.close()


@pytest.mark.parametrize(("query", "field"), BAD_INPUTS)
async def test_text_and_numbers_postgresql_refuses_are_bad_user_input(g: Graph, query: str, field: str) -> None:
    body = await g.query(query)
    assert _codes(body) == ["BAD_USER_INPUT"], body
    assert body["errors"][0]["path"] == [field]


# -- stored and now served -------------------------------------------------------------------------------------------

PAPER_FULL_Q = """query($id: String!) { paper(id: $id) {
  id arxivId withdrawn license modifiedAt
  versions { version submittedAt sizeKb sourceType }
  externalIds { arxiv semanticScholar semanticScholarCorpusId openAlex doi journalDoi }
  authors { position name affiliation isCollaboration institutions { name } }
} }"""


@pytest.mark.parametrize(
    "form",
    [
        RICH,
        "10.1038/s42256-024-00832-8",
        "https://doi.org/10.1038/S42256-024-00832-8",
        f"s2:{S2_PAPER_ID}",
        "CorpusId:258059792",
        "W4365597205",
        "https://openalex.org/W4365597205",
    ],
)
async def test_a_paper_by_every_id_partners_hold_with_its_stored_fields(g: Graph, form: str) -> None:
    paper = (await g.data(PAPER_FULL_Q, {"id": form}))["paper"]
    assert paper["arxivId"] == RICH and paper["id"] == paper_global_id(RICH)
    assert (paper["withdrawn"], paper["license"]) == (False, "http://creativecommons.org/licenses/by/4.0/")
    assert paper["externalIds"] == {
        "arxiv": RICH,
        "semanticScholar": S2_PAPER_ID,
        "semanticScholarCorpusId": "258059792",
        "openAlex": "W4365597205",
        "doi": f"10.48550/arXiv.{RICH}",
        "journalDoi": "10.1038/s42256-024-00832-8",
    }
    assert paper["versions"] == [
        {"version": 1, "submittedAt": "2024-01-03T10:00:00+00:00", "sizeKb": 120, "sourceType": "D"},
        {"version": 2, "submittedAt": "2024-01-04T11:00:00+00:00", "sizeKb": 0, "sourceType": "I"},
    ]
    assert paper["authors"][0]["affiliation"] == "Mila, Montreal"
    assert all(a["isCollaboration"] is False for a in paper["authors"])
    assert datetime.fromisoformat(paper["modifiedAt"]) <= datetime.now(UTC)


async def test_researcher_affiliations_and_modification_times(g: Graph) -> None:
    wumo = g.seeded.researcher_ids["wumo"]
    r = (
        await g.data(
            """query($id: String!) { researcher(id: $id) { modifiedAt mergedIds
                 affiliations { institution { name } firstYear lastYear } institutions { name } } }""",
            {"id": str(wumo)},
        )
    )["researcher"]
    assert r["affiliations"] == [
        {"institution": {"name": "Université de Montréal"}, "firstYear": 2019, "lastYear": 2024}
    ]
    assert [i["name"] for i in r["institutions"]] == ["Université de Montréal"]
    assert r["mergedIds"] == [] and r["modifiedAt"]
    inst = (await g.data('{ institution(id: "MIT") { modifiedAt } }'))["institution"]
    assert datetime.fromisoformat(inst["modifiedAt"]) <= datetime.now(UTC)


# -- withdrawn papers: reachable by id, flagged, left out of lists and counts ---------------------------------------


async def test_withdrawn_papers_are_found_by_id_and_left_out_of_lists_unless_asked(g: Graph) -> None:
    found = (await g.data(PAPER_FULL_Q, {"id": WITHDRAWN.arxiv_id}))["paper"]
    assert found["withdrawn"] is True
    path = await g.data("query($p: String!) { resolvePath(path: $p) { path } }", {"p": f"/papers/{WITHDRAWN.arxiv_id}"})
    assert path["resolvePath"]["path"] == f"/papers/{WITHDRAWN.slug}"
    q = "query($f: PaperFilter) { papers(filter: $f, first: 100) { totalCount nodes { arxivId withdrawn } } }"
    default = (await g.data(q))["papers"]
    assert WITHDRAWN.arxiv_id not in {n["arxivId"] for n in default["nodes"]}
    assert default["totalCount"] == len(_live_papers())
    everything = (await g.data(q, {"f": {"withdrawn": "INCLUDE"}}))["papers"]
    assert everything["totalCount"] == len(_live_papers()) + 1
    only = (await g.data(q, {"f": {"withdrawn": "ONLY"}}))["papers"]
    assert [(n["arxivId"], n["withdrawn"]) for n in only["nodes"]] == [(WITHDRAWN.arxiv_id, True)]
    ada = str(g.seeded.researcher_ids["ada"])
    r = (
        await g.data(
            """query($id: String!) { researcher(id: $id) { paperCount authorPositions { totalPapers }
                 papers(first: 100) { totalCount } mine: papers(filter: {withdrawn: ONLY}) { totalCount } } }""",
            {"id": ada},
        )
    )["researcher"]
    ada_live = sum(1 for p in _live_papers() if any(a.researcher == "ada" for a in p.authors))
    assert r["paperCount"] == r["papers"]["totalCount"] == r["authorPositions"]["totalPapers"] == ada_live
    assert r["mine"]["totalCount"] == 1
    hits = (await g.data('{ search(query: "withdrawn claim") { totalCount } }'))["search"]["totalCount"]
    assert hits == 0
    included = await g.data('{ search(query: "withdrawn claim", filter: {withdrawn: INCLUDE}) { totalCount } }')
    assert included["search"]["totalCount"] == 1


# -- sitemap chunks ----------------------------------------------------------------------------------------------------

SITEMAP_Q = """query($kind: SitemapKind!, $chunk: Int, $size: Int) {
  sitemap(kind: $kind, chunk: $chunk, chunkSize: $size) { totalCount chunkCount chunk entries { id databaseId path } }
}"""


async def test_sitemap_chunks_are_addressed_directly_and_leave_withdrawn_papers_out(g: Graph) -> None:
    first = (await g.data(SITEMAP_Q, {"kind": "PAPER", "chunk": 0, "size": 10}))["sitemap"]
    live = len(_live_papers())
    withdrawn_id = g.seeded.paper_ids[WITHDRAWN.arxiv_id]
    assert first["totalCount"] == live
    assert first["chunkCount"] == -(-max(g.seeded.paper_ids.values()) // 10)
    seen: list[int] = []
    for chunk in range(first["chunkCount"]):
        page = (await g.data(SITEMAP_Q, {"kind": "PAPER", "chunk": chunk, "size": 10}))["sitemap"]
        ids = [e["databaseId"] for e in page["entries"]]
        assert all(chunk * 10 < i <= (chunk + 1) * 10 for i in ids) and ids == sorted(ids)
        seen += ids
    assert sorted(seen) == sorted(i for i in g.seeded.paper_ids.values() if i != withdrawn_id)
    slugs = {g.seeded.paper_ids[p.arxiv_id]: p.slug for p in PAPERS}
    assert all(e["path"] == f"/papers/{slugs[e['databaseId']]}" for e in first["entries"])
    assert all(
        e["id"] == paper_global_id(next(p.arxiv_id for p in PAPERS if p.slug == e["path"][8:]))
        for e in first["entries"]
    )
    people = (await g.data(SITEMAP_Q, {"kind": "RESEARCHER", "chunk": 0}))["sitemap"]
    wumo = g.seeded.researcher_ids["wumo"]
    assert f"/researchers/{entity_slug(wumo, slugify('Wumo Yan'))}" in {e["path"] for e in people["entries"]}
    body = await g.query("{ sitemap(kind: PAPER, chunk: 0, first: 5) { chunk } }")
    assert _codes(body) == ["BAD_USER_INPUT"]
