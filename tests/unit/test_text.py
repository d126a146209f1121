from __future__ import annotations

import pytest

from ingest.parsers.text import collapse, detex


@pytest.mark.parametrize(
    "text",
    [
        "  One line with single spaces, as the current server sends abstracts.",
        "Hard-wrapped\n  legacy abstract\nlines  ",
        "tabs\tand\r\nCRLF",
        "double  space inside",
        "no-break\u00a0space and em\u2003space",
        "form\x0cfeed, separators\x1c\x1f, next line\x85 and line\u2028separator",
        "Ünïcödé  words\nwrapped",
        " ",
        "",
    ],
)
def test_collapse_leaves_single_spaces_between_words(text: str) -> None:
    assert collapse(text) == " ".join(text.split())


def test_collapse_of_nothing_is_empty() -> None:
    assert collapse(None) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Only math commands: nothing to turn into letters, math kept verbatim.
        (
            "We bound $\\mathcal{N}=4$ by $\\omega \\times \\sqrt{s}$.",
            "We bound $\\mathcal{N}=4$ by $\\omega \\times \\sqrt{s}$.",
        ),
        # Commands outside math that are no accents stay as they are.
        ("See \\cite{x} and \\emph{this}.", "See \\cite{x} and \\emph{this}."),
        ('Schr\\"odinger with $\\omega$', "Schrödinger with $\\omega$"),
        ('{\\o}ksendal and \\AA{}ngstr\\"om', "øksendal and Ångström"),
        ("Erd\\H{o}s, Ca\\~{n}as, \\c{C}elik", "Erdős, Cañas, Çelik"),
        ('$\\"a$ stays in math', '$\\"a$ stays in math'),
    ],
)
def test_detex_turns_accents_outside_math_into_letters(text: str, expected: str) -> None:
    assert detex(text) == expected
