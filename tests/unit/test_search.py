"""Pure parts of search: prefix queries, facet cuts, match estimates, embedding text and errors."""

from __future__ import annotations

import hashlib

import pytest

import semantic
from db.queries.embeddings import vector_literal
from db.queries.search.estimate import Scanned, estimate_matches
from db.queries.search.papers import Facets, FacetValue, _facets_from_json
from db.queries.search.statement import has_phrase
from db.queries.search.suggest import prefix_tsquery
from resolvers.errors import BadUserInput
from resolvers.search import SearchConnection, resolve_facets


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("graph neu", "'graph' & 'neu':*"),
        ("deep learni", "'deep' & 'lear':*"),
        ("qu", "'qu'"),
        ("  ", None),
        ("it's a (test)", "'its' & 'a' & 'tes':*"),
        ("o'brien", "'obri':*"),
    ],
)
def test_prefix_tsquery(typed: str, expected: str | None) -> None:
    assert prefix_tsquery(typed) == expected


def test_prefix_tsquery_never_passes_tsquery_syntax() -> None:
    q = prefix_tsquery("a&b | !c <-> d:* 'e'")
    assert q is not None
    body = q.replace(" & ", "").replace("':*", "").replace("'", "")
    assert body.isalnum()


def test_facets_sorted_by_count_then_value() -> None:
    facets = _facets_from_json(
        '[["category","cs.LG",3],["category","astro-ph",3],["category","hep-th",5],["year","2020",1]]'
    )
    assert [(f.value, f.count) for f in facets.categories] == [("hep-th", 5), ("astro-ph", 3), ("cs.LG", 3)]
    assert [f.value for f in facets.years] == ["2020"] and facets.primary_categories == []
    assert _facets_from_json(None) == Facets([], [], [])


def test_facet_limit_and_other_count() -> None:
    conn = SearchConnection.__new__(SearchConnection)
    conn.facets_all = Facets([FacetValue(v, c) for v, c in [("a", 5), ("b", 4), ("c", 2), ("d", 1)]], [], [])
    cut = resolve_facets(conn, 2)
    assert [v.value for v in cut.categories.values] == ["a", "b"]
    assert cut.categories.other_count == 3 and cut.categories.other_values == 2
    whole = resolve_facets(conn, 100)
    assert whole.categories.other_count == 0 and len(whole.categories.values) == 4
    for bad in (0, 101):
        with pytest.raises(BadUserInput):
            resolve_facets(conn, bad)


def _matches(total: int, capped: int, scanned: Scanned) -> tuple[int, bool]:
    return estimate_matches(total, capped, scanned, cap=100)


def test_match_estimate_only_past_the_cap() -> None:
    # No tier: 0 cited matches kept, the scan of the other papers reached block `rest` of 1,000.
    plain = lambda rest: Scanned(0, None, rest, 1000, 0.1)  # noqa: E731
    assert _matches(40, 40, plain(10.0)) == (40, False)
    # 101 matches found in the first quarter of the table: about 404 in all.
    assert _matches(100, 101, plain(249.0)) == (404, True)
    # Never below what was found, even when the scan read the whole table.
    assert _matches(100, 101, plain(999.0)) == (101, True)
    assert _matches(100, 101, plain(None)) == (100, False)
    # The cited tier alone (a tenth of all papers) filled the cap within a quarter of the table: ten times more.
    assert _matches(100, 101, Scanned(101, 249.0, None, 1000, 0.1)) == (4040, True)
    # An index never analysed reports -1 rows: the tier's share is unknown and ignored.
    assert _matches(100, 101, Scanned(101, 249.0, None, 1000, -1.0)) == (404, True)
    # All 40 cited matches kept, then 61 others found in the first half of the table: 40 + 122.
    assert _matches(100, 101, Scanned(40, 990.0, 499.0, 1000, 0.1)) == (162, True)
    # Sorted by date or citations: estimated from the cited tier read apart. All 50 of its matches, a tenth of all
    # papers: 500. Its scan stopped at the cap a quarter through the table: 4,040. Nothing in the tier: at least 101.
    ordered = lambda found, block: Scanned(0, None, 3.0, 1000, 0.1, True, found, block)  # noqa: E731
    assert _matches(100, 101, ordered(50, 990.0)) == (500, True)
    assert _matches(100, 101, ordered(101, 249.0)) == (4040, True)
    assert _matches(100, 101, ordered(0, None)) == (101, True)


def test_embedding_text_and_its_hash() -> None:
    assert semantic.paper_text("T", "A") == "T\nA"
    assert len(semantic.paper_text("T", "x" * 10_000)) == semantic.MAX_TEXT_CHARS
    # The same md5 SQL computes as md5(title || E'\n' || abstract): the whole text, not the clipped one.
    assert semantic.source_md5("T", "x" * 10_000) == hashlib.md5(("T\n" + "x" * 10_000).encode()).hexdigest()


def test_vector_literal_round_trips_floats() -> None:
    text = vector_literal([0.1, -2.5e-07, 1.0])
    assert text == "[0.1,-2.5e-07,1.0]"
    assert [float(x) for x in text.strip("[]").split(",")] == [0.1, -2.5e-07, 1.0]


def test_missing_extra_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(semantic.service, "missing_modules", lambda: ["onnxruntime"])
    assert not semantic.is_available()
    with pytest.raises(semantic.EmbeddingsUnavailable, match=r"semantic.*onnxruntime"):
        semantic.load_embedder()


@pytest.mark.parametrize(
    ("text", "phrase"),
    [('"graph neural"', True), ("state-of-the-art", True), ("graph neural", False), ("graph -neural", False)],
)
def test_has_phrase(text: str, phrase: bool) -> None:
    assert has_phrase(text) is phrase
