"""The text a paper is embedded from, and the hash that tells a stored vector is stale."""

from __future__ import annotations

import hashlib

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# The model reads at most 256 word pieces; clipping characters first keeps tokenising long abstracts cheap.
MAX_TEXT_CHARS = 2000
MAX_TOKENS = 256


def paper_text(title: str, abstract: str) -> str:
    """The text a paper is embedded from; `source_md5` hashes the same two fields."""
    return f"{title}\n{abstract}"[:MAX_TEXT_CHARS]


def source_md5(title: str, abstract: str) -> str:
    """Same value as SQL `md5(title || E'\\n' || abstract)`: lets the database tell a stale vector."""
    return hashlib.md5(f"{title}\n{abstract}".encode(), usedforsecurity=False).hexdigest()


def query_key(text: str) -> str:
    """A query as it is embedded and cached: whitespace collapsed, lower case (the model lower-cases anyway)."""
    return " ".join(text.split()).lower()
