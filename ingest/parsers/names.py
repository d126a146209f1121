"""Author names: splitting arXiv's author string, spotting collaborations, and aligning author lists.

Alignment never guesses: an arXiv author is matched to a source's author only when their names are
compatible, and an author with two equally good candidates stays unmatched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from anyascii import anyascii

from db.records import AuthorRecord
from ingest.parsers.text import detex

# Matched against the lowercased name: twice as fast as re.IGNORECASE, and this runs for every author.
_COLLAB_RE = re.compile(
    r"\b(collaborations?|consortium|consortia|collab\.?|team|working group|group|groups|"
    r"observatory|telescope|experiment|project|survey|network|initiative|alliance)\b"
)
_AND_RE = re.compile(r"\s+(?:and|&)\s+|^and\s+", re.IGNORECASE)
_LABELS_RE = re.compile(r"^\s*(?:\d+|[a-z]|\*)(?:\s*(?:,|and|&)\s*(?:\d+|[a-z]|\*))*\s*$", re.IGNORECASE)
_FOOTNOTE_RE = re.compile(r"\(\s*(\d+|[a-z]|\*)\s*\)\s*")
_ETAL_RE = re.compile(r"^et\.?\s*al\.?$", re.IGNORECASE)
_TRAILING_ETAL_RE = re.compile(r"\s+et\.?\s*al\.?$", re.IGNORECASE)
_MATCH_THRESHOLD = 0.7


def is_collaboration(name: str) -> bool:
    """`ATLAS Collaboration`, `the LIGO Scientific Collaboration`, `Fermi-LAT team`: never a researcher."""
    return bool(_COLLAB_RE.search(name.lower())) or name.strip().startswith(("for the ", "For the ", "on behalf of "))


_SIMPLE_SPLIT_RE = re.compile(r"\s*[,;]\s*(?:(?:and|&)\s+)?|\s+(?:and|&)\s+", re.IGNORECASE)


def _top_level_split(text: str) -> list[str]:
    """Split at commas and `and` outside parentheses."""
    if "(" not in text:
        # The usual case, no affiliations: one regex split.
        return [p for p in (s.strip() for s in _SIMPLE_SPLIT_RE.split(text)) if p]
    pieces: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif ch in ",;" and depth == 0:
            pieces.append(text[start:i])
            start = i + 1
    pieces.append(text[start:])
    out: list[str] = []
    for piece in pieces:
        out.extend(_split_and_outside_parens(piece))
    return [p.strip() for p in out if p.strip()]


def _split_and_outside_parens(piece: str) -> list[str]:
    if "(" not in piece:
        return _AND_RE.split(piece)
    # Replace parenthesised spans by placeholders so `and` inside an affiliation does not split.
    spans: list[str] = []

    def hide(m: re.Match[str]) -> str:
        spans.append(m.group(0))
        return f"\x00{len(spans) - 1}\x00"

    hidden = re.sub(r"\((?:[^()]|\([^()]*\))*\)", hide, piece)
    return [re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], p) for p in _AND_RE.split(hidden)]


def _trailing_parenthetical(piece: str) -> tuple[str, str | None]:
    """`Jane Doe (MIT)` -> (`Jane Doe`, `MIT`); balanced parentheses only."""
    if not piece.endswith(")"):
        return piece, None
    depth = 0
    for i in range(len(piece) - 1, -1, -1):
        if piece[i] == ")":
            depth += 1
        elif piece[i] == "(":
            depth -= 1
            if depth == 0:
                return piece[:i].strip(), piece[i + 1 : -1].strip()
    return piece, None


def _footnotes(block: str) -> dict[str, str]:
    """`(1) MIT, (2) Harvard` -> {'1': 'MIT', '2': 'Harvard'}."""
    parts = _FOOTNOTE_RE.split(block)
    # parts: [before, label1, text1, label2, text2, ...]
    notes: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        notes[parts[i].lower()] = parts[i + 1].strip().rstrip(",;").strip()
    return notes


def split_authors(raw: str | None) -> list[AuthorRecord]:
    """arXivRaw's one-string author list (`A, B and C`, with `(MIT)` or numbered footnote affiliations)."""
    text = detex(raw)
    if not text:
        return []
    notes: dict[str, str] = {}
    # A trailing footnote block: `A (1), B (2) ((1) MIT, (2) Harvard)`.
    head, tail = _trailing_parenthetical(text)
    if tail is not None and _FOOTNOTE_RE.match(tail):
        notes = _footnotes(tail)
        text = head
    authors: list[AuthorRecord] = []
    for piece in _top_level_split(text):
        collab_prefix = None
        if ":" in piece and "(" not in piece.split(":", 1)[0]:  # rare: checked before splitting
            # `The ATLAS Collaboration: A. Author` names the collaboration, then an author.
            before, after = (s.strip() for s in piece.split(":", 1))
            if is_collaboration(before):
                collab_prefix, piece = before, after
        if collab_prefix:
            authors.append(AuthorRecord(len(authors) + 1, collab_prefix, None, True))
        if "al" in piece[-3:].lower():  # the regex only where `et al.` can end the piece
            piece = _TRAILING_ETAL_RE.sub("", piece)
        if not piece or _ETAL_RE.match(piece):
            continue
        name, paren = _trailing_parenthetical(piece)
        affiliation: str | None = None
        if paren is not None:
            if _LABELS_RE.match(paren):
                labels = re.split(r"\s*(?:,|and|&)\s*", paren.lower())
                found = [notes[label] for label in labels if label in notes]
                affiliation = "; ".join(found) or None
            else:
                affiliation = paren or None
        name = name.strip().strip(",;").strip()
        if not name:
            continue
        authors.append(AuthorRecord(len(authors) + 1, name, affiliation, is_collaboration(name)))
    return authors


def join_name(forenames: str | None, keyname: str | None, suffix: str | None) -> str:
    """arXiv format's split name back to display order: `Forenames Keyname Suffix`."""
    return " ".join(p for p in (forenames, keyname, suffix) if p)


@dataclass(frozen=True, slots=True)
class FoldedName:
    tokens: tuple[str, ...]

    @property
    def family(self) -> str:
        return self.tokens[-1] if self.tokens else ""

    @property
    def given(self) -> tuple[str, ...]:
        return self.tokens[:-1]


_SUFFIXES = {"jr", "sr", "ii", "iii", "iv"}


def fold_name(name: str) -> FoldedName:
    """ASCII, lower case, no punctuation; hyphenated given names joined (`Zhao-xin` = `Zhaoxin`)."""
    if name.count(",") == 1:
        # `Bran, Andres M` (OpenAlex raw names, oai_dc creators) is family name first.
        family, given = name.split(",")
        name = f"{given} {family}"
    s = anyascii(name).lower().replace("-", "").replace("'", "")
    tokens = tuple(t for t in re.split(r"[^a-z0-9]+", s) if t and t not in _SUFFIXES)
    return FoldedName(tokens)


def name_similarity(a: str, b: str) -> float:
    """0..1; 0.7 and above means the two strings can name the same person."""
    fa, fb = fold_name(a), fold_name(b)
    if not fa.tokens or not fb.tokens:
        return 0.0
    if fa.tokens == fb.tokens:
        return 1.0
    if fa.family == fb.family:
        if not fa.given or not fb.given:
            return 0.75
        if fa.given[0][0] != fb.given[0][0]:
            return 0.0
        if fa.given[0] == fb.given[0]:
            return 0.95
        # An initial against a full given name (`A.` / `Ashish`), or two initials that agree.
        if len(fa.given[0]) == 1 or len(fb.given[0]) == 1:
            return 0.9
        return 0.6
    # Family name first (`Xu Zhaoxin`) or extra middle names: the same tokens in another order.
    if set(fa.tokens) == set(fb.tokens):
        return 0.85
    ratio = SequenceMatcher(None, " ".join(fa.tokens), " ".join(fb.tokens)).ratio()
    return ratio * 0.9 if ratio >= 0.9 else 0.0


def names_match(a: str, b: str) -> bool:
    """Whether two spellings can name the same person, as the alignment judges them (a correction that puts a paper on
    a profile is held to it too)."""
    return name_similarity(a, b) >= _MATCH_THRESHOLD


def align_authors(arxiv: Sequence[AuthorRecord], source_names: Sequence[str | None]) -> dict[int, int]:
    """Map arXiv author positions to indexes in a source's ordered author list.

    Positional when both lists have the same length and every pair's names agree; otherwise each
    arXiv author takes its best-scoring source author above the threshold, best pairs first, and
    an author whose best score is shared by two candidates stays unmatched. Collaborations on
    either side are never matched.
    """
    people = [a for a in arxiv if not a.is_collaboration]
    candidates = [i for i, n in enumerate(source_names) if n and not is_collaboration(n)]
    if not people or not candidates:
        return {}
    if len(people) == len(candidates):
        pairs = list(zip(people, candidates, strict=True))
        scores = [name_similarity(a.name, source_names[i] or "") for a, i in pairs]
        if all(s >= _MATCH_THRESHOLD for s in scores):
            return {a.position: i for a, i in pairs}
    scored: list[tuple[float, int, int, int]] = []
    ambiguous: set[int] = set()
    for rank, a in enumerate(people):
        row = [(name_similarity(a.name, source_names[i] or ""), i) for i in candidates]
        row = [(s, i) for s, i in row if s >= _MATCH_THRESHOLD]
        if not row:
            continue
        best = max(s for s, _ in row)
        if sum(1 for s, _ in row if s == best) > 1:
            ambiguous.add(a.position)
            continue
        for s, i in row:
            scored.append((s, abs(rank - candidates.index(i)), a.position, i))
    scored.sort(key=lambda t: (-t[0], t[1]))
    matched: dict[int, int] = {}
    used: set[int] = set()
    for _, _, position, i in scored:
        if position in matched or i in used or position in ambiguous:
            continue
        matched[position] = i
        used.add(i)
    return matched
