"""The filter registry: fragments compose with renumbered parameters and cover every filter."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from db.filters import (
    PAPER_FILTERS,
    PAPER_SORTS,
    Clause,
    Fragment,
    PaperFilterSpec,
    compose,
    escape_like,
    paper_filter_clauses,
)


def test_compose_renumbers_after_an_offset() -> None:
    clauses = [Clause(Fragment("a = $1 AND b < $2", 2), (1, 2)), Clause(Fragment("c = $1", 1), ("x",))]
    assert compose(clauses) == ("a = $1 AND b < $2 AND c = $3", [1, 2, "x"])
    assert compose(clauses, offset=2) == ("a = $3 AND b < $4 AND c = $5", [1, 2, "x"])
    assert compose([]) == ("true", [])


def test_renumbering_handles_two_digit_parameters() -> None:
    clauses = [Clause(Fragment("x = $1", 1), (i,)) for i in range(12)]
    sql, args = compose(clauses, offset=3)
    assert re.findall(r"\$\d+", sql) == [f"${i}" for i in range(4, 16)]
    assert args == list(range(12))


def test_every_fragment_declares_its_parameters() -> None:
    for key, fragment in PAPER_FILTERS.items():
        found = {int(n) for n in re.findall(r"\$(\d+)", fragment.sql)}
        assert found == set(range(1, fragment.arity + 1)), key
    for sort in PAPER_SORTS.values():
        assert {int(n) for n in re.findall(r"\$(\d+)", sort.after.sql)} == set(range(1, sort.after.arity + 1))


def test_spec_to_clauses() -> None:
    spec = PaperFilterSpec(
        category="cs.DC",
        primary_only=True,
        published_from=datetime(2024, 1, 1, tzinfo=UTC),
        researcher_id=7,
        author_position="LAST",
        institution_ids=(3, 4),
    )
    clauses = paper_filter_clauses(spec)
    assert [c.fragment for c in clauses] == [
        PAPER_FILTERS["not_withdrawn"],
        PAPER_FILTERS["primary_category"],
        PAPER_FILTERS["published_from"],
        PAPER_FILTERS["position_last"],
        PAPER_FILTERS["institution"],
        PAPER_FILTERS["institution"],
    ]
    sql, args = compose(clauses)
    assert args == ["cs.DC", datetime(2024, 1, 1, tzinfo=UTC), 7, 3, 4]
    assert "$5" in sql and "$6" not in sql
    assert paper_filter_clauses(PaperFilterSpec(category="cs.DC"))[1].fragment is PAPER_FILTERS["category"]
    # Withdrawn papers are left out unless the filter asks for them.
    assert paper_filter_clauses(PaperFilterSpec(withdrawn="INCLUDE")) == []
    assert paper_filter_clauses(PaperFilterSpec(withdrawn="ONLY")) == [Clause(PAPER_FILTERS["withdrawn"], ())]
    assert paper_filter_clauses(PaperFilterSpec(matches_nothing=True, category="x")) == [
        Clause(PAPER_FILTERS["nothing"], ())
    ]


def test_registry_is_immutable() -> None:
    with pytest.raises(TypeError):
        PAPER_FILTERS["evil"] = Fragment("true", 0)  # type: ignore[index]


@pytest.mark.parametrize(("text", "escaped"), [("50%", "50\\%"), ("a_b", "a\\_b"), ("back\\slash", "back\\\\slash")])
def test_escape_like(text: str, escaped: str) -> None:
    assert escape_like(text) == escaped
