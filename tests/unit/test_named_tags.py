"""Where an answer shows a researcher or an institution only by what names it, and how it is tagged there."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphql import GraphQLSchema

from db.cache.invalidation import purge_tags
from db.cache.store import EntityRef
from db.paging import encode_global_id, paper_global_id
from db.records import Touched
from edge.cache_tags import entity_refs, response_tags
from edge.cacheable import NAMED, cacheable_operation, cacheable_operations
from edge.persisted import build_manifest
from schema import build_schema
from settings import Settings

OPERATIONS = Path(__file__).resolve().parents[2] / "frontend_contract" / "operations"


@pytest.fixture(scope="module")
def schema() -> GraphQLSchema:
    return build_schema(Settings(DATABASE_URL="postgresql://unused/none"))._schema


def named(schema: GraphQLSchema, document: str) -> object:
    op = cacheable_operation(document, schema)
    assert op is not None
    return op.named


def test_the_site_s_pages_name_authors_and_affiliations_only(schema: GraphQLSchema) -> None:
    ops = {op.name: op.named for op in cacheable_operations(build_manifest(OPERATIONS).values(), schema)}
    assert ops["PaperPage"] == {"paper": {"authors": {"researcher": NAMED, "institutions": NAMED}}}
    assert ops["ResearcherPage"] == {
        "researcher": {
            "affiliations": {"institution": NAMED},
            "papers": {"nodes": {"authors": {"researcher": NAMED, "institutions": NAMED}}},
        }
    }
    # An institution's researchers stand in the order of their figures: shown in full.
    assert ops["InstitutionPage"] == {"institution": {"papers": {"nodes": {"authors": {"researcher": NAMED}}}}}
    # Without the schema nothing is known: every entity counts as shown in full.
    assert cacheable_operation((OPERATIONS / "PaperPage.graphql").read_text()) is not None
    assert cacheable_operation((OPERATIONS / "PaperPage.graphql").read_text()).named == {}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("selection", "expected"),
    [
        ("authors { researcher { id name } }", {"p": {"authors": {"researcher": NAMED}}}),
        # Aliases name the response's keys; the fields are what count.
        ("a: authors { r: researcher { id n: name } }", {"p": {"a": {"r": NAMED}}}),
        ("authors { researcher { ...Named } }", {"p": {"authors": {"researcher": NAMED}}}),
        # A figure beside the name, however it is spelt, and the researcher is shown in full.
        ("authors { researcher { id name hIndex } }", {}),
        ("authors { researcher { id name: paperCount } }", {}),
        ("authors { researcher { id ... on Researcher { citationCount } } }", {}),
        ("authors { researcher { id name } researcher { paperCount } }", {}),
        ("authors { researcher { id name @skip(if: true) hIndex @include(if: false) } }", {}),
        ("authors { researcher { id name papers(first: 1) { totalCount } } }", {}),
        # A paper's fields are its own, whatever they are called.
        ("mostCited: authors { researcher { mostCitedPaper { id title } } }", {}),
    ],
)
def test_a_place_names_only_when_every_field_merged_there_names(
    schema: GraphQLSchema, selection: str, expected: object
) -> None:
    document = f"""
    query Q($id: String!) {{ p: paper(id: $id) {{ id {selection} }} }}
    fragment Named on Researcher {{ id slug name }}
    """
    assert named(schema, document) == expected


def test_an_answer_is_tagged_by_name_where_it_only_names(schema: GraphQLSchema) -> None:
    op = cacheable_operation((OPERATIONS / "ResearcherPage.graphql").read_text(), schema)
    assert op is not None
    ada, bob = encode_global_id("Researcher", 7), encode_global_id("Researcher", 8)
    mit = encode_global_id("Institution", 3)
    card = {"id": paper_global_id("2401.00001"), "authors": [{"researcher": {"id": ada}}, {"researcher": {"id": bob}}]}
    data = {"researcher": {"id": ada, "affiliations": [{"institution": {"id": mit}}], "papers": {"nodes": [card]}}}
    full, names = entity_refs(data, op.named)
    # Ada's page shows her in full; Bob and MIT only by name.
    assert full == {EntityRef("researcher", 7), EntityRef("paper", "2401.00001")}
    assert names == {EntityRef("researcher", 8), EntityRef("institution", 3)}
    assert response_tags(data, op, {"id": "7"}) == [
        "paper:2401.00001",
        "researcher:7",
        "name:institution:3",
        "name:researcher:8",
    ]
    # Without the operation's places, everyone is shown in full.
    assert entity_refs(data) == (full | names, set())


def test_a_write_purges_name_tags_only_of_those_it_may_have_renamed() -> None:
    touched = Touched(researchers={1}, researcher_figures={1, 2}, institution_figures={3})
    assert purge_tags("wp", touched) == [
        "lists",
        "missing:researcher:any",
        "missing:institution:any",
        "researcher:1",
        "name:researcher:1",
        "researcher:2",
        "institution:3",
    ]
