"""Cleaning free text from arXiv: whitespace and TeX accents (math is kept as TeX for the site to render)."""

from __future__ import annotations

import re
import unicodedata

# TeX accent command -> Unicode combining mark.
_ACCENTS = {
    '"': "\u0308",
    "'": "\u0301",
    "`": "\u0300",
    "^": "\u0302",
    "~": "\u0303",
    "=": "\u0304",
    ".": "\u0307",
    "u": "\u0306",
    "v": "\u030c",
    "H": "\u030b",
    "c": "\u0327",
    "k": "\u0328",
    "r": "\u030a",
}
_LETTERS = {
    "ss": "ß",
    "o": "ø",
    "O": "Ø",
    "aa": "å",
    "AA": "Å",
    "ae": "æ",
    "AE": "Æ",
    "oe": "œ",
    "OE": "Œ",
    "l": "ł",
    "L": "Ł",
    "i": "ı",
}
# {\"o}, \"{o}, \"o, \'{\i}, \c{c}, \v s ; the letter commands \ss \o \aa ... stand alone or braced.
_ACCENT_RE = re.compile(r"\{?\\([\"'`^~=.]|[uvHckr](?![a-zA-Z]))\s*(?:\{\s*(\\i|[A-Za-z])\s*\}|(\\i|[A-Za-z]))\}?")
_LETTER_RE = re.compile(r"\{?\\(ss|aa|AA|ae|AE|oe|OE|[oOlLi])(?![a-zA-Z])\}?(?:\{\})?")
# What either of the above needs, anywhere (math included): most text with backslashes has only math commands.
_ANY_TEX_RE = re.compile(r"\\(?:[\"'`^~=.]|[uvHckr](?![a-zA-Z])|(?:ss|aa|AA|ae|AE|oe|OE|[oOlLi])(?![a-zA-Z]))")
_MATH_RE = re.compile(r"(\$\$.*?\$\$|\$.*?\$|\\\(.*?\\\)|\\\[.*?\\\])", re.DOTALL)


def collapse(text: str | None) -> str:
    """Hard line breaks and indents (legacy OAI keeps them) become single spaces."""
    if not text:
        return ""
    s = text.strip()
    # Every whitespace character but the space is unprintable: one line with single spaces (the current
    # server's abstracts) is checked in a fraction of the time splitting and joining it takes.
    if s.isprintable() and "  " not in s:
        return s
    return " ".join(s.split())


def _accent(m: re.Match[str]) -> str:
    letter = m.group(2) or m.group(3)
    base = "i" if letter == "\\i" else letter
    return unicodedata.normalize("NFC", base + _ACCENTS[m.group(1)])


def _tex_to_unicode(text: str) -> str:
    text = _ACCENT_RE.sub(_accent, text)
    return _LETTER_RE.sub(lambda m: _LETTERS[m.group(1)], text)


def detex(text: str | None) -> str:
    """Collapse whitespace and turn TeX accents (`Schr\\"odinger`, `{\\'e}`) into letters outside math."""
    s = collapse(text)
    if "\\" not in s or not _ANY_TEX_RE.search(s):
        return s
    parts = _MATH_RE.split(s)
    # split() with one group: odd indexes are the math segments, kept verbatim.
    return "".join(p if i % 2 or "\\" not in p else _tex_to_unicode(p) for i, p in enumerate(parts))


def none_if_empty(text: str | None) -> str | None:
    """Empty text and the template's literal `None` (`<acm-class>None</acm-class>`) mean absent."""
    s = collapse(text)
    return None if not s or s == "None" else s
