"""The operation a request ran, named in its log line and metrics when the client sends the document alone."""

from __future__ import annotations

import pytest

from schema import _first_operation_name
from tests.unit.test_cost import OPERATIONS


@pytest.mark.parametrize(
    ("document", "name"),
    [
        ("query ResearcherPage($id: String!) { researcher(id: $id) { name } }", "ResearcherPage"),
        ("# /papers/<slug>: the paper page\n\nquery PaperPage { paper(id: 1) { title } }", "PaperPage"),
        ("\ufeff , \n# a\r\n# b\nmutation Follow { follow(id: 1) { id } }", "Follow"),
        ("{ papers { totalCount } }", None),
        ("query { papers { totalCount } }", None),
        ("# query Hidden\n{ papers { totalCount } }", None),
        # Hostile shapes end at once: nothing here backtracks.
        ("#" * 64 + "!", None),
        ("# c\n" * 10_000 + "{ a }", None),
    ],
)
def test_the_first_operation_is_named_past_comments(document: str, name: str | None) -> None:
    assert _first_operation_name(document) == name


def test_every_operation_of_the_site_is_named() -> None:
    for path in sorted(OPERATIONS.glob("*.graphql")):
        assert _first_operation_name(path.read_text()) == path.stem, path.name
