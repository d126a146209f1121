"""The name score and the assignment behind author matching, on their own."""

from __future__ import annotations

import pytest

from ingest.matching.assignment import assign
from ingest.matching.names import EXACT, FOLDED, THRESHOLD, name_similarity, parse_name, phonetic


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Maksim Ivanov", "Maxim Ivanov"),
        ("Yuri Gagarin", "Iurii Gagarin"),
        ("Sergei Brin", "Sergey Brin"),
        ("Aleksandr Petrov", "Alexander Petrov"),
        ("Jürgen Müller", "Juergen Mueller"),
        ("Jürgen Müller", "Jurgen Muller"),
        ("Anna Campbell-White", "Anna Campbell"),
        ("Anna Campbell-White", "A. Campbell-White"),
        ("María García López", "Maria Garcia"),
        ("Fu Haoran", "H. Fu"),
        ("Fu Haoran", "Haoran Fu"),
        ("LI Wei", "Wei Li"),
        ("Zhi-wei Du", "Z. Du"),
        ("Z.-W. Du", "Zhiwei Du"),
        ("Jean-Pierre Dupont", "J.-P. Dupont"),
        ("Ludwig van Beethoven", "Ludwig Beethoven"),
        ("Bran, Andres M", "Andres M. Bran"),
        ('M. M{\\"u}ller', "M. Müller"),
        ("Andrew D. White", "Andrew Dickson White"),
    ],
)
def test_forms_of_one_name_agree(a: str, b: str) -> None:
    assert name_similarity(a, b) >= THRESHOLD
    assert name_similarity(b, a) == name_similarity(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("John Smith", "James Smith"),
        ("B. Smith", "A. Smith"),
        ("Xiaoming Yang", "Xin Yang"),
        ("Wei Zhang", "Wei Wang"),
        ("Wei Zhang", "Wei Zhan"),
        ("Anna Campbell-White", "Anna Campbell-Brown"),
        ("J. A. Smith", "J. B. Smith"),
        ("John Smith", "Jane Doe"),
    ],
)
def test_different_people_do_not(a: str, b: str) -> None:
    assert name_similarity(a, b) < THRESHOLD


def test_the_closer_form_scores_higher() -> None:
    # The same text, then the same letters, then a variant: a namesake beside the person is not taken for them.
    assert name_similarity("Zhi-wei Du", "Zhi-wei Du") == EXACT
    assert name_similarity("Zhi-wei Du", "Zhiwei Du") == FOLDED
    assert name_similarity("Maksim Ivanov", "Maxim Ivanov") < FOLDED
    assert name_similarity("Haoran Fu", "Haoran Fu") > name_similarity("Haoran Fu", "Fu Haoran")


def test_phonetic_keys_of_transliterations() -> None:
    assert phonetic("maksim") == phonetic("maxim")
    assert phonetic("iurii") == phonetic("yuri") == phonetic("jurij")
    assert phonetic("mueller") == phonetic("muller")
    assert phonetic("yevgeny") == phonetic("evgenii")


def test_parsed_names_are_shared_and_bounded() -> None:
    assert parse_name("Ada Lovelace") is parse_name("Ada Lovelace")
    long = "Ada " * 100 + "Lovelace"
    assert parse_name(long) is not parse_name(long)  # too long to keep
    # An upstream's runaway string is cut to a name's size: comparing it costs what comparing a name does.
    runaway = parse_name("-".join(["x"] * 50_000) + " " + "y " * 50_000)
    assert len(runaway.toks) <= 12 * 12 and name_similarity("x" * 10_000, "Ada Lovelace") == 0.0


def test_assignment_decides_clear_pairs_and_reports_ties() -> None:
    clear = assign({(0, 0): 1.0, (0, 1): 0.9, (1, 1): 1.0}, margin=0.01)
    assert clear.pairs == {0: 0, 1: 1} and not clear.ambiguous
    # Two rows that fit two columns alike: neither is decided, each lists both.
    tie = assign({(0, 0): 0.9, (0, 1): 0.9, (1, 0): 0.9, (1, 1): 0.9, (2, 2): 1.0}, margin=0.01)
    assert tie.pairs == {2: 2}
    assert tie.ambiguous == {0: [0, 1], 1: [0, 1]}
    # One column two rows fit alike: the row left out is as undecided as the one taken.
    one = assign({(0, 0): 0.9, (1, 0): 0.9}, margin=0.01)
    assert one.pairs == {} and one.ambiguous == {0: [0], 1: [0]}
    # A tie-breaker in the scores decides when the margin allows it.
    ordered = assign({(0, 0): 0.9 + 1e-5, (0, 1): 0.9, (1, 0): 0.9, (1, 1): 0.9 + 1e-5}, margin=1e-7)
    assert ordered.pairs == {0: 0, 1: 1}
