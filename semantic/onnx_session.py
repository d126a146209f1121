"""Opening the model's tokenizer and an ONNX Runtime session on one of its graphs, as the export and serving both
do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from semantic.text import MAX_TOKENS

# ONNX Runtime fuses a residual Add and the LayerNormalization after it into SkipLayerNormalization, whose CPU
# kernel costs 7 times the pair here (18 % of an int8 batch): the export leaves them apart, and so do sessions.
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]


def load_tokenizer(model_dir: Path) -> Any:
    """The model's own tokenizer.json, truncating where sentence-transformers does (its file says 128)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def open_session(path: Path, *, save_optimised: Path | None = None) -> Any:
    """A session that runs each call on the calling thread alone (no pool of its own to wake or spin);
    `save_optimised`: where to write the graph as the session runs it, after ONNX Runtime's own fusions."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    if save_optimised is not None:
        options.optimized_model_filepath = str(save_optimised)
    return ort.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"], disabled_optimizers=DISABLED_OPTIMIZERS
    )
