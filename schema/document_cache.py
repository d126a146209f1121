"""A least-recently-used map bounded by the bytes of its keys: parsed documents and validation results.

A document's AST takes about 50 times its text (measured: 84 KB for the 1.7 KB ResearcherPage), so a
count bound lets a client park gigabytes in a worker with large documents (a 900 KB comment is 3 tokens).
Only documents up to MAX_DOCUMENT_BYTES are kept, and all of them together up to `max_bytes` of text.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

V = TypeVar("V")

MAX_DOCUMENT_BYTES = 8 * 1024


class DocumentCache(Generic[V]):
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._entries: OrderedDict[str, V] = OrderedDict()

    def get(self, document: str) -> V | None:
        value = self._entries.get(document)
        if value is not None:
            self._entries.move_to_end(document)
        return value

    def put(self, document: str, value: V) -> None:
        if len(document) > MAX_DOCUMENT_BYTES or document in self._entries:
            return
        self._entries[document] = value
        self.size += len(document)
        while self.size > self.max_bytes:
            evicted, _ = self._entries.popitem(last=False)
            self.size -= len(evicted)

    def __len__(self) -> int:
        return len(self._entries)
