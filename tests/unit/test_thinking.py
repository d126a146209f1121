"""A reasoning model's leading `<think>...</think>` is dropped from its answer, however the text is cut."""

from __future__ import annotations

import pytest

from llm.thinking import LeadingThought, without_leading_thought

THOUGHT = "<think>\nThe reader asks about transformers; cite [arXiv:1706.03762]. </thin no, not yet.\n</think>\n\n"


def fed(text: str, *cuts: int) -> str:
    thought, out, start = LeadingThought(), [], 0
    for cut in (*cuts, len(text)):
        out.append(thought.feed(text[start:cut]))
        start = cut
    return "".join(out) + thought.flush()


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        (THOUGHT + "Transformers attend.", "Transformers attend."),
        ("  " + THOUGHT + "Indented.", "Indented."),
        ("Transformers attend. <think>kept</think>", "Transformers attend. <think>kept</think>"),
        ("<thinking> is a word here.", "<thinking> is a word here."),
        ("<th", "<th"),
        ("", ""),
        ("<think>all thought, cut off by the token limit", ""),
    ],
)
def test_every_cut_gives_the_same_answer(text: str, answer: str) -> None:
    assert without_leading_thought(text) == answer
    for a in range(len(text) + 1):
        assert fed(text, a) == answer, a
        for b in range(a, len(text) + 1, 5):
            assert fed(text, a, b) == answer, (a, b)


def test_a_long_thought_is_not_held() -> None:
    thought = LeadingThought()
    thought.feed("<think>")
    for _ in range(10_000):
        assert thought.feed("more thinking ") == ""
    assert len(thought._held) < len("</think>")
    assert thought.feed("</think>The answer.") == "The answer."
