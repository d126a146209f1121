"""Query cost and limits: GitHub's node and point rules, fragments measured once, the contract's price."""

from __future__ import annotations

from pathlib import Path

from graphql import parse

from edge.persisted import operation_documents
from schema import build_schema
from schema.cost import FIGURE_CAP, measure

SCHEMA = build_schema()._schema
OPERATIONS = Path(__file__).resolve().parents[2] / "frontend_contract" / "operations"


def m(document: str, **variables: object):
    return measure(SCHEMA, parse(document), variables=variables)


def test_nodes_multiply_along_paths_and_calls_make_points() -> None:
    # GitHub's example: 1 + 100 + 5,000 calls are 51 points.
    doc = "{ researchers(first: 100) { nodes { papers(first: 50) { nodes { similarPapers(first: 1) { id } } } } } }"
    got = m(doc)
    assert got.node_count == 100 + 100 * 50 + 100 * 50 * 1
    assert got.calls == 1 + 100 + 100 * 50 * 5  # similarPapers weighs 5
    assert got.cost == 252
    # A list without a size argument (authors, estimated 10 a paper) adds nodes, not calls: it is batched.
    authors = m("{ papers(first: 50) { nodes { authors { name } } } }")
    assert (authors.node_count, authors.calls) == (50 + 500, 1)
    assert m("{ __typename }").cost == 1


def test_defaults_variables_and_weights() -> None:
    assert m("{ papers { nodes { id } } }").node_count == 24
    assert m("query($n: Int) { papers(first: $n) { nodes { id } } }", n=7).node_count == 7
    assert m("{ sitemap(kind: PAPER) { entries { slug } } }").node_count == 1000
    assert m('{ nodes(ids: ["a", "b", "c"]) { id } }').node_count == 3
    one = m('{ researcher(id: "1") { network { nodes { depth } } } }')
    two = m('{ researcher(id: "1") { network(depth: 2) { nodes { depth } } } }')
    assert (one.node_count, one.calls, two.calls) == (100, 10, 50)
    # The statistics fields share one statement per researcher.
    stats = m('{ researcher(id: "1") { hIndexInArchive fields { count } citationSummary { total } } }')
    assert stats.calls == 5


def test_a_size_sent_as_a_whole_float_is_measured_as_graphql_runs_it() -> None:
    """JSON's `100.0` is the Int 100 to GraphQL: measured as no size at all, it priced 100 items as the default 24."""
    assert m("query($n: Int) { papers(first: $n) { nodes { id } } }", n=100.0).node_count == 100
    assert m("query($n: Int) { papers(first: $n) { nodes { id } } }", n=7.5).node_count == 24  # GraphQL refuses it


def test_fragments_count_per_spread_and_measure_once() -> None:
    doc = "query { ...A ...A } fragment A on Query { x: __typename papers(first: 3) { nodes { id } } }"
    got = m(doc)
    assert (got.aliases, got.node_count, got.fields) == (2, 6, 8)
    chain = (
        " ".join(["query Q { ...F0 }"] + [f"fragment F{i} on Query {{ ...F{i + 1} ...F{i + 1} }}" for i in range(60)])
        + " fragment F60 on Query { a: __typename }"
    )
    huge = m(chain)
    assert huge.aliases == huge.fields == FIGURE_CAP  # 2^60, saturated
    cyclic = m("query { ...A } fragment A on Query { ...B } fragment B on Query { ...A __typename }")
    assert cyclic.fields == 1


def test_every_site_operation_costs_one_point_and_passes_the_limits() -> None:
    for name, document in operation_documents(OPERATIONS).items():
        got = m(document)
        assert got.cost == 1, (name, got)
        assert got.node_count <= 50_000 and got.depth <= 10 and got.aliases <= 15 and got.fields <= 2000, name


def test_figures_saturate_at_a_graphql_int() -> None:
    """Nested lists of 2^31 multiply past 64 bits; the figures stay printable as JSON and as `Int`."""
    big = 2**31 - 1
    nested = "{ totalCount }"
    for _ in range(3):
        nested = f"{{ nodes {{ papers(first: {big}) {nested} }} }}"
    got = m(f"{{ researchers(first: {big}) {nested} }}")
    assert got.node_count == FIGURE_CAP and got.calls <= FIGURE_CAP * 100 and got.cost <= FIGURE_CAP
