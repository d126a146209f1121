"""The site's operations: well formed, valid against the schema, and within their SQL budgets on demo data."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import OperationDefinitionNode, OperationType, build_schema, parse, validate
from strawberry import Info

from schema import build_schema as build_live_schema
from settings import Settings
from tests.contract.conftest import (
    CONTRACT,
    MUTATIONS,
    OPERATIONS,
    SITE_OPERATIONS,
    Api,
    budgets,
    operation_text,
    variables_for,
)


def test_one_file_per_site_operation_and_a_budget_for_each() -> None:
    files = {p.stem for p in OPERATIONS.glob("*.graphql")}
    assert files == set(SITE_OPERATIONS)
    assert set(budgets()) == set(SITE_OPERATIONS)
    # A read is at most 10 statements whatever the page; a correction writes in one transaction
    # (docs/architecture/readers.md, "Corrections").
    assert all(1 <= b <= (25 if name in MUTATIONS else 10) for name, b in budgets().items())


@pytest.mark.parametrize("name", SITE_OPERATIONS)
def test_file_holds_one_operation_named_after_it(name: str) -> None:
    document = parse(operation_text(name))
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    assert len(operations) == 1
    # The follow and correction buttons write; everything else the site sends reads.
    kind = OperationType.MUTATION if name in MUTATIONS else OperationType.QUERY
    assert operations[0].operation == kind
    assert operations[0].name is not None and operations[0].name.value == name


@pytest.mark.parametrize("name", SITE_OPERATIONS)
def test_operation_validates_against_live_and_committed_schema(name: str) -> None:
    document = parse(operation_text(name))
    live = build_live_schema(Settings())._schema
    committed = build_schema((CONTRACT / "schema.graphql").read_text())
    assert [e.message for e in validate(live, document)] == []
    assert [e.message for e in validate(committed, document)] == []


def _non_empty(name: str, data: dict[str, Any]) -> None:
    """Each busy page really holds what the site shows, so the budget is measured on real work."""
    if name == "ResearcherPage":
        papers = data["researcher"]["papers"]
        assert len(papers["nodes"]) == 24 and papers["totalCount"] > 24
        assert sum(len(p["authors"]) for p in papers["nodes"]) > 24
    elif name == "PaperPage":
        assert data["paper"]["authors"] and any(a["institutions"] for a in data["paper"]["authors"])
    elif name == "InstitutionPage":
        assert data["institution"]["papers"]["nodes"] and data["institution"]["researchers"]["nodes"]
    elif name in ("PaperList", "LatestPapers"):
        assert len(data["papers"]["nodes"]) == 24
    elif name == "ResearchersList":
        assert len(data["researchers"]["nodes"]) == 24
    elif name == "InstitutionsList":
        assert len(data["institutions"]["nodes"]) == 24
    elif name == "SitemapPage":
        assert len(data["sitemap"]["entries"]) > 900 and data["sitemap"]["chunkCount"] >= 2
    elif name == "ResolvePath":
        assert data["resolvePath"]["redirect"] is True
    elif name == "Search":
        assert len(data["search"]["edges"]) == 24 and data["search"]["facets"]["categories"]["values"]
        assert any(e["highlights"]["title"] for e in data["search"]["edges"])
    elif name == "Autocomplete":
        assert {s["type"] for s in data["autocomplete"]} >= {"RESEARCHER"}
    elif name == "ResearcherNetwork":
        network = data["researcher"]["network"]
        assert len(network["nodes"]) > 10 and {n["depth"] for n in network["nodes"]} >= {0, 1}
    elif name == "ViewerFeed":
        viewer = data["viewer"]
        assert len(viewer["feed"]["nodes"]) == 24 and viewer["feed"]["pageInfo"]["hasNextPage"]
        assert viewer["following"]["totalCount"] == 1 and viewer["followingInstitutions"]["totalCount"] == 1
    elif name == "FollowResearcher":
        assert data["followResearcher"]["researcher"]["viewerIsFollowing"] is True
    elif name == "UnfollowResearcher":
        assert data["unfollowResearcher"]["researcher"]["viewerIsFollowing"] is False
    elif name == "ResearcherCorrections":
        assert data["researcher"]["corrections"] == [] and data["researcher"]["claimed"] is False
    elif name == "ViewerResearcherState":
        assert data["researcher"]["viewerOwns"] is False and data["researcher"]["viewerIsFollowing"] is True
    elif name in ("ClaimResearcher", "ReportAuthorship"):
        field = data["claimResearcher" if name == "ClaimResearcher" else "reportAuthorship"]
        assert field["correction"]["status"] == "PENDING" and field["researcher"] is not None
    elif name == "ViewerCorrections":
        kinds = {n["kind"] for n in data["viewer"]["corrections"]["nodes"]}
        assert kinds <= {"CLAIM", "NOT_ME"}


@pytest.mark.parametrize("name", SITE_OPERATIONS)
async def test_operation_runs_on_demo_data_within_its_budget(api: Api, demo_ids: dict[str, Any], name: str) -> None:
    variables = variables_for(name, demo_ids)
    await api.run(name, variables)  # opens the pool's connections: their set-up is not the operation's
    body, statements = await api.run(name, variables)
    assert "errors" not in body, body["errors"]
    _non_empty(name, body["data"])
    assert len(statements) <= budgets()[name], "\n".join(statements)


@pytest.mark.parametrize("name", SITE_OPERATIONS)
async def test_no_resolver_converts_the_whole_selection(
    api: Api, demo_ids: dict[str, Any], name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Strawberry's `info.selected_fields` builds objects for every field and argument below a field on each call
    (it was several percent of a page's CPU): resolvers read the parsed document instead (resolvers/pagination.py
    Lookahead)."""

    def refuse(self: Info[Any, Any]) -> None:
        raise AssertionError(f"{self.field_name} converted its selection")

    monkeypatch.setattr(Info, "selected_fields", property(refuse))
    body, _ = await api.run(name, variables_for(name, demo_ids))
    assert "errors" not in body, body["errors"]


async def test_researcher_page_statements_do_not_grow_with_the_page(api: Api, demo_ids: dict[str, Any]) -> None:
    counts = {}
    for first in (1, 2, 24, 100):
        variables = {"id": demo_ids["researcher"], "first": first}
        await api.run("ResearcherPage", variables)
        body, statements = await api.run("ResearcherPage", variables)
        assert "errors" not in body, body["errors"]
        assert len(body["data"]["researcher"]["papers"]["nodes"]) == min(first, demo_ids["researcher_papers"])
        counts[first] = len(statements)
    # A larger page may only save a statement (the most cited paper can already be on it), never add one.
    assert counts[100] <= counts[24] <= counts[2] <= counts[1] <= budgets()["ResearcherPage"], counts


@pytest.mark.parametrize("first", [1, 24, 100])
async def test_paper_list_statements_do_not_grow_with_the_page(api: Api, first: int) -> None:
    await api.run("PaperList", {"first": first})
    body, statements = await api.run("PaperList", {"first": first})
    assert len(body["data"]["papers"]["nodes"]) == first
    assert len(statements) == budgets()["PaperList"], "\n".join(statements)


async def test_researcher_with_one_paper_costs_the_same(api: Api, demo_ids: dict[str, Any]) -> None:
    variables = {"id": demo_ids["one_paper_researcher"]}
    await api.run("ResearcherPage", variables)
    body, statements = await api.run("ResearcherPage", variables)
    assert body["data"]["researcher"]["papers"]["totalCount"] == 1
    assert len(statements) <= budgets()["ResearcherPage"], "\n".join(statements)


async def test_not_found_and_bad_input_are_answers_not_failures(api: Api) -> None:
    body, _ = await api.run("ResearcherPage", {"id": "999999999"})
    assert body == {"data": {"researcher": None}}
    body, _ = await api.run("PaperPage", {"id": "this is not an id"})
    assert body["data"] == {"paper": None}
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"
    body, _ = await api.run("ResolvePath", {"path": "/papers/2912.99999"})
    assert body == {"data": {"resolvePath": None}}
    body, _ = await api.run("PaperList", {"first": 0})
    assert body["errors"][0]["extensions"]["code"] == "BAD_USER_INPUT"


@pytest.mark.parametrize(
    ("name", "variables", "nulled"),
    [
        ("ResearcherPage", {"first": 0}, "papers"),
        ("ResearcherPage", {"filter": {"institution": "Nowhere In Particular"}}, "papers"),
        ("InstitutionPage", {"first": 500}, "papers"),
        ("InstitutionPage", {"researchersFirst": -1}, "researchers"),
    ],
)
async def test_a_bad_nested_argument_leaves_the_rest_of_the_site_s_page(
    api: Api, demo_ids: dict[str, Any], name: str, variables: dict[str, Any], nulled: str
) -> None:
    """The site renders every other field of the page: only the field whose argument is malformed is null."""
    good, _ = await api.run(name, variables_for(name, demo_ids))
    body, _ = await api.run(name, {**variables_for(name, demo_ids), **variables})
    root = "researcher" if name == "ResearcherPage" else "institution"
    assert [(e["path"], e["extensions"]["code"]) for e in body["errors"]] == [([root, nulled], "BAD_USER_INPUT")]
    page = body["data"][root]
    assert page[nulled] is None
    assert {k: v for k, v in page.items() if k != nulled} == {
        k: v for k, v in good["data"][root].items() if k != nulled
    }
