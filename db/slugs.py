"""URL slugs, ASCII-folded from any script."""

from __future__ import annotations

import re

from anyascii import anyascii

_NON_WORD = re.compile(r"[^a-z0-9]+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]+")
MAX_WORDS = 12


def _fold(run: re.Match[str]) -> str:
    # Only the non-ASCII runs: a title with one `ö` folds one character, not every one.
    return "".join(f" {anyascii(ch)} " if ord(ch) >= 0x2E80 else anyascii(ch) for ch in run.group())


def slugify(text: str, *, max_words: int = MAX_WORDS) -> str:
    """`Prediction of SGD` -> `prediction-of-sgd`; `Müller` -> `muller`; `北京大学` -> `bei-jing-da-xue`."""
    # CJK characters are whole syllables: give each its own word ("北京" -> "bei-jing"). Most titles are ASCII
    # already: then there is nothing to fold (a full harvest slugs millions of them).
    ascii_text = text if text.isascii() else _NON_ASCII.sub(_fold, text)
    words = [w for w in _NON_WORD.split(ascii_text.lower()) if w]
    return "-".join(words[:max_words])


def entity_slug(entity_id: int, name_slug: str) -> str:
    """Researchers and institutions: `1396945-wumo-yan`."""
    return f"{entity_id}-{name_slug}" if name_slug else str(entity_id)


def paper_slug(arxiv_id: str, title: str) -> str:
    """Papers: `1911.04650-throughput-...`; old-style ids lose their slash: `astro-ph-9901001-...`."""
    base = arxiv_id.replace("/", "-")
    words = slugify(title)
    return f"{base}-{words}" if words else base
