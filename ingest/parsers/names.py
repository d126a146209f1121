"""Author names: splitting arXiv's author string and spotting collaborations (matching them to the sources' lists
is `ingest.matching`)."""

from __future__ import annotations

import re

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
