"""Citations in an answer, `[arXiv:ID]`: kept when they name a retrieved paper, removed (and counted) otherwise.

The filter works on the answer as it streams: text that might still become a citation (an open `[arXiv:...`)
is held back until its bracket closes, so a reader never sees a citation that is then taken away.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from db.ids import parse_arxiv_id

# The longest bracket held back while waiting for its `]`: a few ids' worth. Past it, it is not a citation.
MAX_HELD = 200
_PREFIX = "[arxiv:"
_ITEM_SPLIT = re.compile(r"[,;]")


def _canonical(item: str) -> str | None:
    text = item.strip()
    if text.lower().startswith("arxiv:"):
        text = text[6:].strip()
    parsed = parse_arxiv_id(text)
    return parsed[0] if parsed else None


class CitationFilter:
    """Feed it the answer's text piece by piece; it returns what may be shown, with citations made canonical
    (`[arXiv:2401.01234]`, version dropped) and the ones outside `allowed` removed.

    `cited`: the allowed arXiv ids cited, in order of first citation. `removed`: how many citations were
    removed. Brackets that are not citations (`[1]`, `[0, 1]`) pass through as they are.
    """

    def __init__(self, allowed: Collection[str]) -> None:
        self.allowed = set(allowed)
        self.cited: list[str] = []
        self.removed = 0
        self._held = ""

    def feed(self, text: str) -> str:
        buffer = self._held + text
        self._held = ""
        out: list[str] = []
        while buffer:
            start = buffer.find("[")
            if start < 0:
                # Trailing spaces wait for what follows: they go if a removed citation comes next.
                shown = buffer.rstrip(" ")
                out.append(shown)
                self._held = buffer[len(shown) :]
                break
            # Spaces before a bracket wait with it: a removed citation takes its leading space along.
            lead = start - (len(buffer[:start]) - len(buffer[:start].rstrip(" ")))
            out.append(buffer[:lead])
            space, rest = buffer[lead:start], buffer[start:]
            end = rest.find("]")
            opening = rest[: len(_PREFIX)].lower()
            if not _PREFIX.startswith(opening) and not opening.startswith(_PREFIX):
                out.append(space + "[")  # not a citation: let the bracket through
                buffer = rest[1:]
                continue
            if end < 0:
                if len(rest) <= MAX_HELD and "\n" not in rest:
                    self._held = space + rest  # may still become a citation
                    break
                out.append(space + "[")
                buffer = rest[1:]
                continue
            if len(opening) < len(_PREFIX):  # closed before "arXiv:" was complete, e.g. "[ar]"
                out.append(space + rest[: end + 1])
                buffer = rest[end + 1 :]
                continue
            kept = self._citation(rest[1:end])
            out.append(space + kept if kept else "")
            buffer = rest[end + 1 :]
        return "".join(out)

    def flush(self) -> str:
        """The end of the answer: whatever was held back was not a citation."""
        held, self._held = self._held, ""
        return held

    def _citation(self, inner: str) -> str:
        kept: list[str] = []
        for item in _ITEM_SPLIT.split(inner):
            if not item.strip():
                continue
            arxiv_id = _canonical(item)
            if arxiv_id is not None and arxiv_id in self.allowed:
                if arxiv_id not in self.cited:
                    self.cited.append(arxiv_id)
                kept.append(f"[arXiv:{arxiv_id}]")
            else:
                self.removed += 1
        return "".join(kept)


def filter_citations(text: str, allowed: Collection[str]) -> tuple[str, list[str], int]:
    """A whole answer at once: (text, cited ids, removed count)."""
    f = CitationFilter(allowed)
    shown = f.feed(text) + f.flush()
    return shown, f.cited, f.removed
