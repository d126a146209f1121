"""The served embedding model (ONNX Runtime) against the reference (sentence-transformers on PyTorch), for real."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest

import semantic
from semantic import bf16, onnx_runtime
from semantic.embedder import missing
from semantic.onnx_export import (
    AFTER_GELU_BLOCK,
    EXPORT_MODULES,
    OnnxFiles,
    after_gelu,
    ensure_onnx_files,
    onnx_files,
)
from semantic.onnx_runtime import (
    ONNX_MODULES,
    OnnxEmbedder,
    batch_graph,
    query_graph,
    saturates_int8,
)
from semantic.onnx_session import open_session
from semantic.reference import TORCH_MODULES, TorchEmbedder
from settings import SettingsError, load_settings

pytestmark = [
    pytest.mark.semantic,
    pytest.mark.skipif(
        bool(missing((*TORCH_MODULES, *ONNX_MODULES, *EXPORT_MODULES))), reason="needs the `semantic` extra"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
LONG_ABSTRACT = " ".join(
    ["We study the low-energy spectrum of strongly interacting fermions on a lattice with disorder."] * 30
)
TEXTS = [
    "quantum error correction",
    "Graph neural networks\nMessage passing on graphs learns representations of molecules and social networks.",
    "Étude des états de bord dans les isolants topologiques (Müller, Zürich)",
    f"A long paper\n{LONG_ABSTRACT}",  # past 128 word pieces: the tokenizer file's own limit must not apply
    "x",
]


@pytest.fixture(scope="module")
def files() -> OnnxFiles:
    return ensure_onnx_files()


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return np.asarray(TorchEmbedder().embed(TEXTS), dtype=np.float32)


def cosines(a: np.ndarray, b: np.ndarray) -> list[float]:
    return [round(float(x), 4) for x in np.sum(a * b, axis=1)]


@pytest.mark.parametrize(
    ("graph", "least", "mean"),
    [("fp32", 0.999, 0.9999), ("query", 0.999, 0.9995), ("batch", 0.994, 0.9975)],
    ids=["fp32", "query-graph", "batch-graph"],
)
def test_onnx_vectors_equal_the_reference(
    files: OnnxFiles, reference: np.ndarray, graph: str, least: float, mean: float
) -> None:
    # The graphs this CPU runs (the int8 ones only where their products do not saturate).
    path = {"batch": batch_graph, "query": query_graph}.get(graph, lambda f: f.fp32)(files)
    onnx = OnnxEmbedder(query=path, batch=path)
    batch = np.asarray(onnx.embed(TEXTS), dtype=np.float32)
    one_by_one = np.asarray([onnx.embed_query(t) for t in TEXTS], dtype=np.float32)
    for vectors in (batch, one_by_one):
        assert vectors.shape == (len(TEXTS), semantic.DIMENSIONS)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
        # The batch graph moves a one-letter text most, by about 0.005 (the rest by 0.0003-0.003); unsmoothed it
        # moved that text by 0.015 and the mean by 0.005, so these bounds fail the graph without its smoothing.
        # The neighbours it finds are measured by bench/embeddings.py (recall@10).
        similarity = cosines(vectors, reference)
        assert min(similarity) >= least and np.mean(similarity) >= mean, similarity
    if graph != "batch":  # (it scales activations per run: its batches differ as much as from the reference)
        # Padding a text among longer ones (a batch) changes nothing: the query graph scales each token's
        # activations on their own.
        assert min(cosines(batch, one_by_one)) >= 0.9999


@pytest.mark.parametrize(
    ("flags", "saturates", "amx"),
    [
        ("flags : fpu sse2 avx2 fma", True, False),  # AVX2 alone (an AMD EPYC of this workplace)
        ("flags : fpu sse2 avx2 avx512f avx512_vnni", False, False),
        ("flags : fpu sse2 avx2 avx_vnni", False, False),
        # An Intel Xeon with AMX (round 11's and 13's): batches in bfloat16 on the tiles.
        ("flags : fpu avx2 avx512f avx512_vnni avx_vnni avx512_bf16 amx_bf16 amx_tile amx_int8", False, True),
        ("flags : fpu avx2 avx512f avx512_vnni avx512_bf16", False, False),  # bfloat16 without AMX (Zen 4)
        ("Features : fp asimd asimddp", False, False),  # Arm: dot products without 16-bit sums
    ],
)
def test_the_graphs_are_chosen_by_what_the_cpu_multiplies_exactly(
    files: OnnxFiles, monkeypatch: pytest.MonkeyPatch, flags: str, saturates: bool, amx: bool
) -> None:
    assert saturates_int8(flags) is saturates
    assert bf16.has_amx_bf16(flags) is amx
    monkeypatch.setattr(onnx_runtime, "saturates_int8", lambda: saturates)
    assert (query_graph(files), batch_graph(files)) == (
        (files.fp32, files.fp32) if saturates else (files.query, files.batch)
    )
    monkeypatch.setattr(bf16, "cpu_flags_line", lambda: flags)
    monkeypatch.setattr(bf16, "tiles_granted", lambda: True)
    assert bf16.batches_in_bf16() is amx  # (PyTorch is installed here)
    served = OnnxEmbedder(files)
    assert served.run_size == (bf16.RUN_SIZE if amx else onnx_runtime.RUN_SIZE)
    # AMX the kernel does not grant (before Linux 5.16, or refused by a seccomp profile): oneDNN would multiply
    # bfloat16 on AVX-512 at a third of the int8 graph's speed, so batches stay on that graph.
    monkeypatch.setattr(bf16, "tiles_granted", lambda: False)
    assert bf16.batches_in_bf16() is False
    assert OnnxEmbedder(files).run_size == onnx_runtime.RUN_SIZE


def test_a_process_refused_the_tiles_knows_it() -> None:
    # bench/without_amx.py refuses the one request oneDNN and ONNX Runtime make before they use AMX; the process
    # must see what they see. Where the CPU has AMX, a process left alone is granted the tiles.
    probe = "from semantic import bf16; print(bf16.tiles_granted())"
    for prelude, expected in (("from bench.without_amx import refuse_amx; refuse_amx(); ", False), ("", None)):
        done = subprocess.run(
            [sys.executable, "-c", prelude + probe], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        granted = done.stdout.strip() == "True"
        assert granted is (bf16.has_amx_bf16() if expected is None else expected)


def test_bf16_batches_equal_the_reference(files: OnnxFiles, reference: np.ndarray) -> None:
    # The reference model itself in bfloat16 (served for batches on AMX; runs, if slowly, on any CPU): within about
    # 0.0001 of the reference for every text (0.99989-0.99997 here), where the int8 batch graph moves one by 0.015.
    onnx = OnnxEmbedder(files, bf16_batches=True)
    texts = TEXTS * 4  # more than a run, unsorted lengths
    vectors = np.asarray(onnx.embed(texts), dtype=np.float32)
    assert vectors.shape == (len(texts), semantic.DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    similarity = cosines(vectors, np.tile(reference, (4, 1)))
    assert min(similarity) >= 0.9995 and np.mean(similarity) >= 0.9998, similarity
    # Padding to a multiple of 16 tokens and the run's other texts change nothing beyond bfloat16's rounding.
    alone = np.asarray([onnx.embed([text])[0] for text in TEXTS], dtype=np.float32)
    assert min(cosines(vectors[: len(TEXTS)], alone)) >= 0.9999


@pytest.mark.parametrize("bf16_batches", [False, True], ids=["onnx", "bf16"])
def test_batches_come_back_in_order_from_parallel_runs(files: OnnxFiles, bf16_batches: bool) -> None:
    onnx = OnnxEmbedder(query=files.fp32, batch=None if bf16_batches else files.fp32, bf16_batches=bf16_batches)
    texts = [f"{text} {i}" for i, text in enumerate(TEXTS * 13)]  # several runs of each length, run side by side
    batch = np.asarray(onnx.embed(texts), dtype=np.float32)
    one_by_one = np.asarray([onnx.embed_query(t) for t in texts], dtype=np.float32)
    assert min(cosines(batch, one_by_one)) >= (0.999 if bf16_batches else 0.9999)


def test_a_pytorch_that_does_not_load_leaves_batches_to_the_graph(
    files: OnnxFiles, reference: np.ndarray, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:  # what a torchvision built for another torch raises on import
        raise RuntimeError("operator torchvision::nms does not exist")

    monkeypatch.setattr(bf16, "Bf16Runs", broken)
    onnx = OnnxEmbedder(files, bf16_batches=True)
    vectors = np.asarray(onnx.embed(TEXTS), dtype=np.float32)
    assert min(cosines(vectors, reference)) >= 0.98 and onnx.run_size == onnx_runtime.RUN_SIZE
    assert "bfloat16 batches unavailable (RuntimeError: operator torchvision::nms" in caplog.text
    assert np.asarray(onnx.embed(TEXTS[:2])).shape == (2, semantic.DIMENSIONS)  # the graph from now on


def test_served_embedder_is_onnx_and_equals_the_reference(files: OnnxFiles, reference: np.ndarray) -> None:
    served = semantic.load_embedder()
    assert isinstance(served, OnnxEmbedder)
    assert served.model == semantic.MODEL_NAME
    query = np.asarray([served.embed_query(TEXTS[0])], dtype=np.float32)
    assert cosines(query, reference[:1])[0] >= 0.999  # queries run through the int8 blocks, as close as float32


def _op_types(path: Path) -> collections.Counter[str]:
    return collections.Counter(node.op_type for node in onnx.load(str(path)).graph.node)


def test_sessions_run_the_dense_layers_in_int8_without_skip_layer_norm(files: OnnxFiles, tmp_path: Path) -> None:
    # What makes the graphs fast here: the 36 dense layers (the attention's projections too) on int8 kernels,
    # signed weights in the batch graph (the VNNI kernels' kind), and no SkipLayerNormalization (a slow kernel)
    # in what the sessions actually run, after ONNX Runtime's own fusions. The batch graph runs the products
    # after each layer's GELU in blocks of 128 (their outliers would coarsen its one scale a run).
    layers = 6
    dense = layers * (3 + 1 + 2)
    ran = {}
    for graph in ("query", "batch"):
        ran[graph] = tmp_path / f"{graph}.onnx"
        open_session(getattr(files, graph), save_optimised=ran[graph])
        assert _op_types(ran[graph])["SkipLayerNormalization"] == 0
    assert _op_types(ran["query"])["MatMulNBits"] == dense
    assert _op_types(ran["query"])["MatMul"] == 0
    assert _op_types(files.batch)["MatMulInteger"] == dense - layers
    graph = onnx.load(str(files.batch)).graph
    made_by = {out: node.op_type for node in graph.node for out in node.output}
    assert not [node for node in graph.node if node.op_type == "MatMul"]
    blocks = [node for node in graph.node if node.op_type == "MatMulNBits"]
    assert len(blocks) == layers and {made_by[node.input[0]] for node in blocks} == {"BiasGelu"}
    assert {attribute.i for node in blocks for attribute in node.attribute if attribute.name == "block_size"} == {
        AFTER_GELU_BLOCK
    }
    assert sorted(after_gelu(files.fp32)) == sorted(node.name.removesuffix("_Q8") for node in blocks)
    weights = {init.name: init for init in onnx.load(str(files.batch)).graph.initializer}
    quantised = [
        weights[node.input[1]] for node in onnx.load(str(files.batch)).graph.node if node.op_type == "MatMulInteger"
    ]
    assert {init.data_type for init in quantised} == {onnx.TensorProto.INT8}
    # Each layer normalisation's output an int8 product reads (the embeddings' one included) is divided by its
    # smoothing first: one Mul a tensor.
    batch = onnx.load(str(files.batch)).graph
    made_by = {output: node.op_type for node in batch.node for output in node.output}
    smoothing = [node for node in batch.node if node.name.startswith("Smoothing_")]
    assert len(smoothing) == 2 * layers
    assert {made_by[node.input[0]] for node in smoothing} == {"LayerNormalization", "EmbedLayerNormalization"}


def test_graphs_are_exported_once_and_cached(files: OnnxFiles) -> None:
    stamps = [path.stat().st_mtime_ns for path in files.all()]
    assert ensure_onnx_files() == files == onnx_files()
    assert [path.stat().st_mtime_ns for path in files.all()] == stamps
    assert files.query.stat().st_size < files.fp32.stat().st_size
    assert files.batch.stat().st_size < files.fp32.stat().st_size


def test_serving_from_the_cache_needs_no_torch(files: OnnxFiles) -> None:
    script = (
        "import sys, semantic; v = semantic.embed_query('dark matter halos'); "
        "assert len(v) == 384, len(v); "
        "assert not [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]; "
        "print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ.copy()
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.fixture
def configured() -> Iterator[None]:
    """Puts the default configuration back after a test that changes it."""
    yield
    semantic.configure()


def test_backend_is_chosen_by_setting(monkeypatch: pytest.MonkeyPatch, configured: None) -> None:
    monkeypatch.setenv("WOVEPAPER_EMBEDDING_BACKEND", " Torch ")
    settings = load_settings()
    semantic.configure(backend=settings.embedding_backend, model_dir=settings.model_dir)
    assert isinstance(semantic.load_embedder(), TorchEmbedder)
    monkeypatch.setenv("WOVEPAPER_EMBEDDING_BACKEND", "tensorflow")
    with pytest.raises(SettingsError, match="WOVEPAPER_EMBEDDING_BACKEND"):
        load_settings()
    with pytest.raises(semantic.EmbeddingsUnavailable, match="WOVEPAPER_EMBEDDING_BACKEND"):
        semantic.configure(backend="tensorflow")


def test_model_dir_setting_moves_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configured: None) -> None:
    monkeypatch.setenv("WOVEPAPER_MODEL_DIR", str(tmp_path))
    semantic.configure(model_dir=load_settings().model_dir)
    assert onnx_files().fp32.is_relative_to(tmp_path)
    assert not onnx_files().exist()
