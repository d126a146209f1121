"""The process-wide embedder: chosen, loaded once, and the two calls the rest of the code makes.

The backend (`WOVEPAPER_EMBEDDING_BACKEND`, given by `configure` from the settings, as the model directory is): `onnx`
(the default; ONNX Runtime, exported from the bundled model on first use) or `torch` (the reference,
sentence-transformers on PyTorch). This package reads no settings itself (it knows no application): the processes that
embed (the API, the command line) configure it when they start. Everything heavy is imported on the first use, so
the API starts and answers keyword queries without the `semantic` extra.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from semantic.embedder import Embedder, EmbeddingsUnavailable, missing, refuse_missing
from semantic.onnx_export import EXPORT_MODULES, onnx_files, set_model_dir
from semantic.onnx_runtime import ONNX_MODULES, OnnxEmbedder
from semantic.reference import TORCH_MODULES, TorchEmbedder
from semantic.text import paper_text, query_key

BACKENDS = ("onnx", "torch")
_QUERY_CACHE_SIZE = 512

_embedder: Embedder | None = None
_embedder_lock = threading.Lock()
_query_cache: OrderedDict[str, list[float]] = OrderedDict()
_query_cache_lock = threading.Lock()


_backend = "onnx"


def configure(*, backend: str = "onnx", model_dir: str | Path | None = None) -> None:
    """The backend and the model directory (None: `~/.cache/wovepaper/models`) this process embeds with, from its
    settings (WOVEPAPER_EMBEDDING_BACKEND, WOVEPAPER_MODEL_DIR). An embedder already loaded stays as it is."""
    global _backend
    if backend not in BACKENDS:
        raise EmbeddingsUnavailable(f"WOVEPAPER_EMBEDDING_BACKEND={backend!r}: expected one of {', '.join(BACKENDS)}")
    _backend = backend
    set_model_dir(model_dir)


def backend() -> str:
    return _backend


def missing_modules() -> list[str]:
    """The modules this backend still needs here: ONNX needs PyTorch too until its graphs are exported once."""
    if backend() == "torch":
        return missing(TORCH_MODULES)
    absent = missing(ONNX_MODULES)
    if absent or onnx_files().exist():
        return absent
    return missing((*TORCH_MODULES, *EXPORT_MODULES))


def is_available() -> bool:
    try:
        return not missing_modules()
    except EmbeddingsUnavailable:
        return False


def load_embedder() -> Embedder:
    """A new embedder of the configured backend; raises EmbeddingsUnavailable."""
    refuse_missing(missing_modules())
    if backend() == "torch":
        return TorchEmbedder()
    return OnnxEmbedder()


def get_embedder() -> Embedder:
    """The process-wide model, loaded on first use (a second; half a minute the first time: the export)."""
    global _embedder
    if _embedder is None:
        with _embedder_lock:
            if _embedder is None:
                _embedder = load_embedder()
    return _embedder


def preload_in_background() -> threading.Thread | None:
    """Start loading the model in a thread, so that the first semantic request does not pay for it; None without
    the `semantic` extra. Join the thread before the process exits: an interpreter that shuts down while a
    native library is still initialising can abort."""
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
    key = query_key(text)
    with _query_cache_lock:
        hit = _query_cache.get(key)
        if hit is not None:
            _query_cache.move_to_end(key)
            return hit
    vector = get_embedder().embed_query(key)
    with _query_cache_lock:
        _query_cache[key] = vector
        while len(_query_cache) > _QUERY_CACHE_SIZE:
            _query_cache.popitem(last=False)
    return vector


def embed_papers(rows: Sequence[tuple[str, str]]) -> list[list[float]]:
    """Vectors for (title, abstract) pairs, in order."""
    return get_embedder().embed([paper_text(title, abstract) for title, abstract in rows])
