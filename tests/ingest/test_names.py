from __future__ import annotations

from db.records import AuthorRecord
from ingest.matching.links import Evidence, decide_paper
from ingest.matching.names import name_similarity
from ingest.parsers.names import is_collaboration, split_authors
from ingest.parsers.s2 import S2Author, S2Paper


def names(raw: str) -> list[tuple[str, str | None, bool]]:
    return [(a.name, a.affiliation, a.is_collaboration) for a in split_authors(raw)]


def test_split_commas_and_oxford_and() -> None:
    assert [n for n, _, _ in names("Zhaoxin Xu, Heping Ying, and Xin Wan")] == ["Zhaoxin Xu", "Heping Ying", "Xin Wan"]
    assert [n for n, _, _ in names("M. Cvetic, H. Lu and C.N. Pope")] == ["M. Cvetic", "H. Lu", "C.N. Pope"]


def test_split_affiliations_inline_and_numbered() -> None:
    assert names("J. Doe (Univ. of X and Y Lab), R. Roe") == [
        ("J. Doe", "Univ. of X and Y Lab", False),
        ("R. Roe", None, False),
    ]
    assert names("A. Smith (1), B. Jones (1 and 2) ((1) MIT, (2) Harvard University)") == [
        ("A. Smith", "MIT", False),
        ("B. Jones", "MIT; Harvard University", False),
    ]


def test_collaborations_are_flagged() -> None:
    assert names("ATLAS Collaboration: G. Aad, B. Abbott") == [
        ("ATLAS Collaboration", None, True),
        ("G. Aad", None, False),
        ("B. Abbott", None, False),
    ]
    assert is_collaboration("The LIGO Scientific Collaboration") and is_collaboration("Fermi-LAT Team")
    assert not is_collaboration("Ashish Vaswani")
    assert [n for n, _, _ in names("A. Author et al.")] == ["A. Author"]


def test_tex_in_names() -> None:
    assert names("Jakub L\\'ala, Odhran O'Donoghue")[0][0] == "Jakub Lála"


def test_similarity() -> None:
    assert name_similarity("Jakub Lála", "Jakub L'ala") >= 0.98  # the same letters
    assert name_similarity("A. Vaswani", "Ashish Vaswani") >= 0.7
    assert name_similarity("Bran, Andres M", "Andres M. Bran") >= 0.7
    assert name_similarity("Zhao-xin Xu", "Zhaoxin Xu") >= 0.98
    assert name_similarity("B. Smith", "A. Smith") == 0.0
    assert name_similarity("John Smith", "Jane Doe") == 0.0


def people(*raw: str) -> list[AuthorRecord]:
    return split_authors(", ".join(raw))


def align_authors(arxiv: list[AuthorRecord], source_names: list[str | None]) -> dict[int, int]:
    """arXiv position -> index in S2's list, for an S2 list whose every author has an id (their index)."""
    paper = S2Paper("p", None, [S2Author(str(i) if n else None, n or "") for i, n in enumerate(source_names)])
    links = decide_paper(arxiv, paper, [], Evidence())
    return {x.position: int(x.key) for x in links if x.key is not None}


def test_align_positional_when_lengths_and_names_agree() -> None:
    arxiv = people("Jakub L\\'ala", "Odhran O'Donoghue", "Sam Cox")
    assert align_authors(arxiv, ["Jakub L'ala", "Odhran O'Donoghue", "S. Cox"]) == {1: 0, 2: 1, 3: 2}


def test_align_with_missing_and_reordered_authors_by_name() -> None:
    arxiv = people("Zhaoxin Xu", "Heping Ying", "Xin Wan")
    # S2 lost one author and swapped the others: names decide, the missing one stays unmatched.
    assert align_authors(arxiv, ["X. Wan", "Zhaoxin Xu"]) == {1: 1, 3: 0}


def test_align_leaves_mismatches_unmatched_rather_than_guessing() -> None:
    arxiv = people("Zhaoxin Xu", "Heping Ying")
    assert align_authors(arxiv, ["Completely Different", "Other Person"]) == {}
    # Two equally good candidates: no guess.
    assert align_authors(people("J. Smith", "A. Jones"), ["John Smith", "Jane Smith", "Bob Miller"]) == {}


def test_align_never_matches_collaborations() -> None:
    arxiv = split_authors("ATLAS Collaboration: G. Aad, B. Abbott")
    matched = align_authors(arxiv, ["ATLAS Collaboration", "G. Aad", "B. Abbott"])
    assert matched == {2: 1, 3: 2}


def test_align_with_null_names() -> None:
    arxiv = people("Zhaoxin Xu", "Heping Ying", "Xin Wan")
    assert align_authors(arxiv, ["Zhaoxin Xu", None, "Xin Wan"]) == {1: 0, 3: 2}
