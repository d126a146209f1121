"""A reasoning model's thinking, dropped from the start of its answer.

Servers that do not separate a model's reasoning from its answer (vLLM without a reasoning parser, older Ollama
and llama.cpp, with DeepSeek-R1, Qwen3 and their kind) send it in the answer's text as `<think>...</think>`
before the answer. Readers and the analysis's JSON must not get it. Servers that do separate it send it as
`reasoning_content` or `reasoning`, which the client never reads.
"""

from __future__ import annotations

OPEN = "<think>"
CLOSE = "</think>"


class LeadingThought:
    """Fed an answer's text piece by piece, hands on all of it but a leading `<think>...</think>` block."""

    def __init__(self) -> None:
        self._held = ""
        # start: not yet known whether the text opens with a thought; thinking; after: the whitespace after the
        # thought; answering.
        self._state = "start"

    def feed(self, text: str) -> str:
        if self._state == "answering":
            return text
        if self._state == "after":
            return self._answer(text.lstrip()) if text.strip() else ""
        self._held += text
        if self._state == "start":
            opening = self._held.lstrip()
            if len(opening) < len(OPEN) and OPEN.startswith(opening):
                return ""  # too little to tell
            if not opening.startswith(OPEN):
                return self._answer(self._held)
            self._state = "thinking"
        end = self._held.find(CLOSE)
        if end < 0:
            # Only what may be the start of the closing tag is kept: a long thought is not held in memory.
            self._held = self._held[-(len(CLOSE) - 1) :]
            return ""
        after, self._held = self._held[end + len(CLOSE) :], ""
        self._state = "after"
        return self.feed(after)

    def flush(self) -> str:
        """What is still held at the answer's end: a short text that was not a thought; nothing of one."""
        held = self._held if self._state == "start" else ""
        self._held = ""
        return held

    def _answer(self, text: str) -> str:
        self._state, self._held = "answering", ""
        return text


def without_leading_thought(text: str) -> str:
    thought = LeadingThought()
    return thought.feed(text) + thought.flush()
