"""Looking up papers, researchers and institutions by every id form; malformed and unknown ids; nodes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from db.slugs import entity_slug, slugify
from tests.integration.graph_support import INSTITUTIONS, PAPERS, RESEARCHERS, Graph, graph, seeded_database


@pytest.fixture
async def g(make_database) -> AsyncIterator[Graph]:
    seeded = await seeded_database(make_database)
    async with graph(seeded) as g:
        yield g


PAPER_Q = """query($id: String!) { paper(id: $id) {
  id databaseId arxivId version slug title absUrl pdfUrl primaryCategory categories published citedByCount
  authorsText summary analysed
} }"""
OLD = next(p for p in PAPERS if p.arxiv_id == "astro-ph/9901001")
NEW = next(p for p in PAPERS if p.arxiv_id == "2401.00005")


@pytest.mark.parametrize(
    "given",
    [
        "2401.00005",
        "2401.00005v2",
        "2401.00005V9",
        "arXiv:2401.00005",
        "ARXIV:2401.00005v1",
        "https://arxiv.org/abs/2401.00005",
        "https://arxiv.org/abs/2401.00005v3",
        "http://export.arxiv.org/pdf/2401.00005v1.pdf",
        "https://arxiv.org/pdf/2401.00005",
        "10.48550/arXiv.2401.00005",
        "10.48550/ARXIV.2401.00005",
        "https://doi.org/10.48550/arxiv.2401.00005",
        NEW.slug,
        "2401.00005-a-stale-title",
        "  2401.00005  ",
    ],
)
async def test_paper_by_every_new_style_form(g: Graph, given: str) -> None:
    paper = (await g.data(PAPER_Q, {"id": given}))["paper"]
    assert paper["arxivId"] == NEW.arxiv_id
    assert paper["databaseId"] == g.seeded.paper_ids[NEW.arxiv_id]
    assert paper["slug"] == NEW.slug
    assert paper["version"] == NEW.version
    assert paper["absUrl"] == f"https://arxiv.org/abs/{NEW.arxiv_id}"
    assert paper["pdfUrl"] == f"https://arxiv.org/pdf/{NEW.arxiv_id}"


@pytest.mark.parametrize(
    "given",
    [
        "astro-ph/9901001",
        "astro-ph/9901001v3",
        "arXiv:astro-ph/9901001",
        "https://arxiv.org/abs/astro-ph/9901001v2",
        "10.48550/arXiv.astro-ph/9901001",
        OLD.slug,
        "astro-ph-9901001",
    ],
)
async def test_paper_by_old_style_forms(g: Graph, given: str) -> None:
    paper = (await g.data(PAPER_Q, {"id": given}))["paper"]
    assert paper["arxivId"] == "astro-ph/9901001"
    assert paper["slug"] == OLD.slug
    assert paper["absUrl"] == "https://arxiv.org/abs/astro-ph/9901001"


async def test_paper_fields_come_from_the_row(g: Graph) -> None:
    paper = (await g.data(PAPER_Q, {"id": "2401.00005"}))["paper"]
    assert paper["title"] == NEW.title
    assert paper["categories"] == list(NEW.categories)
    assert paper["primaryCategory"] == NEW.categories[0]
    assert paper["citedByCount"] == NEW.cited_by_count
    assert paper["authorsText"] == ", ".join(a.name for a in NEW.authors)
    assert paper["published"].startswith(NEW.published.date().isoformat())
    assert paper["summary"] == NEW.summary
    assert paper["analysed"] is (NEW.summary is not None)


@pytest.mark.parametrize("given", ["2401.99999", "2401.99999v2", "hep-th/0000001", "2401.99999-no-such-paper"])
async def test_unknown_paper_is_null_not_an_error(g: Graph, given: str) -> None:
    assert (await g.data(PAPER_Q, {"id": given})) == {"paper": None}


@pytest.mark.parametrize(
    "given", ["", "   ", "hello world", "2401.1", "12345", "https://example.com/abs/2401.00005", "x" * 400]
)
async def test_malformed_paper_id_is_bad_user_input_naming_the_forms(g: Graph, given: str) -> None:
    body = await g.query(PAPER_Q, {"id": given})
    assert body["data"] == {"paper": None}
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "arXiv id" in error["message"] and "slug" in error["message"] and "DOI" in error["message"]
    assert error["path"] == ["paper"]


RESEARCHER_Q = """query($id: String!) { researcher(id: $id) {
  id databaseId slug name externalIds { semanticScholar openAlex orcid } institutions { name rorId }
} }"""


async def test_researcher_by_every_form(g: Graph) -> None:
    wumo = RESEARCHERS[0]
    db_id = g.seeded.researcher_ids["wumo"]
    slug = entity_slug(db_id, slugify(wumo.name))
    forms = [
        str(db_id),
        slug,
        slug.upper(),
        f"{db_id}-an-old-name",
        f"s2:{wumo.s2}",
        f"S2:{wumo.s2}",
        str(wumo.openalex),
        f"https://openalex.org/{wumo.openalex}",
        str(wumo.openalex).lower(),
        str(wumo.orcid),
        f"https://orcid.org/{wumo.orcid}",
    ]
    for form in forms:
        researcher = (await g.data(RESEARCHER_Q, {"id": form}))["researcher"]
        assert researcher is not None, form
        assert researcher["databaseId"] == db_id
        assert researcher["slug"] == slug
        assert researcher["name"] == wumo.name
        assert researcher["externalIds"] == {
            "semanticScholar": wumo.s2,
            "openAlex": wumo.openalex,
            "orcid": wumo.orcid,
        }
        assert [i["name"] for i in researcher["institutions"]] == ["Université de Montréal"]


@pytest.mark.parametrize("given", ["999999", "999999-nobody", "s2:424242", "A999", "0000-0001-2345-678X"])
async def test_unknown_researcher_is_null(g: Graph, given: str) -> None:
    assert (await g.data(RESEARCHER_Q, {"id": given})) == {"researcher": None}


@pytest.mark.parametrize("given", ["", "Wumo Yan", "s2:", "I27837315", "0", "-5", "0000-0002-1825"])
async def test_malformed_researcher_id(g: Graph, given: str) -> None:
    body = await g.query(RESEARCHER_Q, {"id": given})
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "ORCID" in error["message"] and "s2:" in error["message"]


INSTITUTION_Q = """query($id: String!) { institution(id: $id) {
  id databaseId slug rorId name country type aliases
} }"""


async def test_institution_by_every_form(g: Graph) -> None:
    udem = INSTITUTIONS[0]
    db_id = g.seeded.institution_ids["umontreal"]
    slug = entity_slug(db_id, slugify(udem.name))
    forms = [
        str(db_id),
        slug,
        udem.ror_id,
        f"https://ror.org/{udem.ror_id}",
        udem.ror_id.upper(),
        "Université de Montréal",
        "universite de montreal",
        "Universite de Montréal",
        "UNIVERSITÉ DE MONTRÉAL",
        "Universite de Montreal",
        "UdeM",  # an alias
        "UDEM",
    ]
    for form in forms:
        institution = (await g.data(INSTITUTION_Q, {"id": form}))["institution"]
        assert institution is not None, form
        assert institution["databaseId"] == db_id, form
        assert institution["slug"] == slug
        assert institution["rorId"] == udem.ror_id
        assert institution["country"] == udem.country
        assert institution["aliases"] == list(udem.aliases)


async def test_institution_name_matches_exactly_never_by_similarity(g: Graph) -> None:
    mit = (await g.data(INSTITUTION_Q, {"id": "massachusetts institute of technology"}))["institution"]
    assert mit["databaseId"] == g.seeded.institution_ids["mit"]
    # A typo is not another spelling of a name: no guess behind the caller's back.
    for typo in ("University of Tokio", "Université de Montreal (Canada)", "Universite Montreal"):
        assert (await g.data(INSTITUTION_Q, {"id": typo})) == {"institution": None}, typo


@pytest.mark.parametrize("given", ["999999", "0abcdef12", "Zzyzx Qwv Institute of Nothing"])
async def test_unknown_institution_is_null(g: Graph, given: str) -> None:
    assert (await g.data(INSTITUTION_Q, {"id": given})) == {"institution": None}


@pytest.mark.parametrize("given", ["", "   ", "y" * 400])
async def test_malformed_institution_id(g: Graph, given: str) -> None:
    body = await g.query(INSTITUTION_Q, {"id": given})
    [error] = body["errors"]
    assert error["extensions"]["code"] == "BAD_USER_INPUT"
    assert "ROR" in error["message"]


NODE_Q = """query($id: ID!) { node(id: $id) { __typename id
  ... on Paper { arxivId } ... on Researcher { name } ... on Institution { rorId } } }"""


async def test_node_round_trips_every_type(g: Graph) -> None:
    ids = await g.data(
        """{ paper(id: "2401.00005") { id } researcher(id: "s2:2109311836") { id }
             institution(id: "0161xgx34") { id } }"""
    )
    paper = (await g.data(NODE_Q, {"id": ids["paper"]["id"]}))["node"]
    assert paper == {"__typename": "Paper", "id": ids["paper"]["id"], "arxivId": "2401.00005"}
    researcher = (await g.data(NODE_Q, {"id": ids["researcher"]["id"]}))["node"]
    assert researcher == {"__typename": "Researcher", "id": ids["researcher"]["id"], "name": "Wumo Yan"}
    institution = (await g.data(NODE_Q, {"id": ids["institution"]["id"]}))["node"]
    assert institution == {"__typename": "Institution", "id": ids["institution"]["id"], "rorId": "0161xgx34"}
    # Global ids are distinct across types even when database ids coincide.
    assert len({ids["paper"]["id"], ids["researcher"]["id"], ids["institution"]["id"]}) == 3


async def test_nodes_keep_order_null_for_missing_in_one_batch_per_type(g: Graph) -> None:
    ids = await g.data(
        '{ a: paper(id: "2401.00001") { id } b: paper(id: "2401.00002") { id } r: researcher(id: "s2:1741101") { id } }'
    )
    from db.paging import paper_global_id

    missing = paper_global_id("2912.99999")
    wanted = [ids["b"]["id"], missing, ids["r"]["id"], ids["a"]["id"]]
    g.counter.reset()
    data = await g.data(
        "query($ids: [ID!]!) { nodes(ids: $ids) { id ... on Paper { arxivId } ... on Researcher { name } } }",
        {"ids": wanted},
    )
    assert [n and n["id"] for n in data["nodes"]] == [wanted[0], None, wanted[2], wanted[3]]
    assert data["nodes"][0]["arxivId"] == "2401.00002"
    assert data["nodes"][2]["name"] == "Ada Lovelace"
    assert g.counter.count == 2, g.counter.statements  # one batch of papers, one of researchers


async def test_paper_ids_name_arxiv_ids_and_old_database_id_ids_still_resolve(g: Graph) -> None:
    from db.paging import decode_global_id, encode_global_id

    paper = (await g.data('{ paper(id: "astro-ph/9901001") { id databaseId } }'))["paper"]
    # The id names the arXiv id, so it survives a rebuild that renumbers the rows.
    assert decode_global_id(paper["id"]) == ("Paper", "astro-ph/9901001")
    legacy = encode_global_id("Paper", paper["databaseId"])
    node = (await g.data(NODE_Q, {"id": legacy}))["node"]
    assert node == {"__typename": "Paper", "id": paper["id"], "arxivId": "astro-ph/9901001"}


async def test_nodes_answer_null_with_an_error_for_a_malformed_id_only(g: Graph) -> None:
    paper = (await g.data('{ paper(id: "2401.00001") { id } }'))["paper"]["id"]
    body = await g.query(
        "query($ids: [ID!]!) { nodes(ids: $ids) { id } }", {"ids": [paper, "not-a-node", paper, "UGFwZXI6"]}
    )
    assert body["data"] == {"nodes": [{"id": paper}, None, {"id": paper}, None]}
    assert [(e["path"], e["extensions"]["code"]) for e in body["errors"]] == [
        (["nodes", 1], "BAD_USER_INPUT"),
        (["nodes", 3], "BAD_USER_INPUT"),
    ]


@pytest.mark.parametrize("given", ["not-a-node", "UGFwZXI6", "Zm9vOjE", "@@@"])
async def test_malformed_node_id(g: Graph, given: str) -> None:
    body = await g.query(NODE_Q, {"id": given})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


async def test_nodes_refuses_more_than_100_ids(g: Graph) -> None:
    from db.paging import encode_global_id

    body = await g.query(
        "query($ids: [ID!]!) { nodes(ids: $ids) { id } }",
        {"ids": [encode_global_id("Paper", i) for i in range(1, 102)]},
    )
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    assert "100" in body["errors"][0]["message"]


PATH_Q = "query($p: String!) { resolvePath(path: $p) { path redirect node { __typename id } } }"


async def test_resolve_path_guesses_an_institution_and_says_so(g: Graph) -> None:
    query = "query($p: String!) { resolvePath(path: $p) { path redirect matchedBy node { id } } }"
    tokyo = (await g.data(query, {"p": "/institutions/University of Tokio"}))["resolvePath"]
    assert tokyo["matchedBy"] == "SIMILAR_NAME" and tokyo["redirect"] is True
    assert tokyo["path"] == f"/institutions/{entity_slug(g.seeded.institution_ids['tokyo'], 'university-of-tokyo')}"
    alias = (await g.data(query, {"p": "/institutions/udem"}))["resolvePath"]
    assert alias["matchedBy"] == "NAME"
    canonical = (await g.data(query, {"p": alias["path"]}))["resolvePath"]
    assert (canonical["matchedBy"], canonical["redirect"]) == ("CANONICAL", False)
    by_id = (await g.data(query, {"p": "/papers/2401.00005"}))["resolvePath"]
    assert by_id["matchedBy"] == "ID"


async def test_resolve_path(g: Graph) -> None:
    wumo_id = g.seeded.researcher_ids["wumo"]
    udem_id = g.seeded.institution_ids["umontreal"]
    wumo_slug = entity_slug(wumo_id, "wumo-yan")
    udem_slug = entity_slug(udem_id, "universite-de-montreal")
    cases = [
        (f"/papers/{NEW.slug}", f"/papers/{NEW.slug}", False, "Paper"),
        ("/papers/2401.00005", f"/papers/{NEW.slug}", True, "Paper"),
        ("/papers/2401.00005v2", f"/papers/{NEW.slug}", True, "Paper"),
        ("/papers/2401.00005-old-title-words", f"/papers/{NEW.slug}", True, "Paper"),
        ("/papers/astro-ph/9901001", f"/papers/{OLD.slug}", True, "Paper"),
        ("/papers/astro-ph/9901001v3", f"/papers/{OLD.slug}", True, "Paper"),
        (f"/papers/{OLD.slug}", f"/papers/{OLD.slug}", False, "Paper"),
        (f"/papers/{NEW.slug}?tab=authors", f"/papers/{NEW.slug}", False, "Paper"),
        (f"/researchers/{wumo_slug}", f"/researchers/{wumo_slug}", False, "Researcher"),
        (f"/researchers/{wumo_id}", f"/researchers/{wumo_slug}", True, "Researcher"),
        (f"/researchers/{wumo_slug}/", f"/researchers/{wumo_slug}", True, "Researcher"),
        (f"/institutions/{udem_slug}", f"/institutions/{udem_slug}", False, "Institution"),
        ("/institutions/0161xgx34", f"/institutions/{udem_slug}", True, "Institution"),
        ("/institutions/Universit%C3%A9%20de%20Montr%C3%A9al", f"/institutions/{udem_slug}", True, "Institution"),
        ("/institutions/universite de montreal", f"/institutions/{udem_slug}", True, "Institution"),
    ]
    for given, path, redirect, typename in cases:
        data = (await g.data(PATH_Q, {"p": given}))["resolvePath"]
        assert (data["path"], data["redirect"], data["node"]["__typename"]) == (path, redirect, typename), given


@pytest.mark.parametrize(
    "given",
    [
        "/papers/2401.99999",
        "/papers/not an id",
        "/researchers/999999",
        "/researchers/Wumo",
        "/institutions/",
        "/institutions/999999",
        "/authors/1",
        "/",
        "",
        "/papers",
        "/institutions/a%00b",
        "/researchers/1%0A",
    ],
)
async def test_resolve_path_not_found_is_null(g: Graph, given: str) -> None:
    # A missing page is null, as `paper(id:)` and `researcher(id:)` answer: not an error, and not a null `data`.
    body = await g.query(PATH_Q, {"p": given})
    assert body == {"data": {"resolvePath": None}}
