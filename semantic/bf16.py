"""Batches of papers in bfloat16 on CPUs with AMX: the reference model itself, cast, through PyTorch.

On a CPU with AMX (Intel Xeon since Sapphire Rapids) oneDNN runs bfloat16 products on the tile unit; the
reference model cast to bfloat16 then embeds 1.6-1.7 times the papers a CPU-second of ONNX Runtime's int8 batch
graph, whose products after the GELU stay in float32 (43 % of its time), and closer to the reference (cosine
0.9999 against 0.997). `OnnxEmbedder` sends its batches here on such CPUs (`batches_in_bf16`); queries stay on the
ONNX query graph, and PyTorch is imported on the first batch only, so a server that only embeds queries never
loads it. Runs of 16 texts, one thread each, side by side as the ONNX runs are; each run padded to a multiple of 16
tokens, so that few shapes reach oneDNN (each new one is compiled) and the tiles are filled.
"""

from __future__ import annotations

import ctypes
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semantic.embedder import missing
from semantic.reference import TORCH_MODULES, load_sentence_transformer

if TYPE_CHECKING:
    from semantic.embedder import Vectors

# <asm/unistd_64.h>, <asm/prctl.h>: the request for AMX's tile data (state component 18)
SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18
# Texts per run: 16 beat 8, 32 and 64 here (fewer, larger products against less padding).
RUN_SIZE = 16
# Token counts rounded up to this: 16 rows fill an AMX tile, and fewer distinct shapes reach oneDNN.
PAD_TO = 16


def cpu_flags_line() -> str:
    """The flags line of /proc/cpuinfo (on Arm, its `Features`); empty where there is no such file."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    return next((line for line in lines if line.startswith(("flags", "Features"))), "")


def has_amx_bf16(cpu_flags: str | None = None) -> bool:
    """Whether the CPU multiplies bfloat16 on AMX tiles (amx_bf16, with the tile registers of amx_tile).
    `cpu_flags`: the flags line of /proc/cpuinfo (read when not given)."""
    flags = set((cpu_flags_line() if cpu_flags is None else cpu_flags).split())
    return {"amx_tile", "amx_bf16"} <= flags


def tiles_granted() -> bool:
    """Whether Linux lets this process use AMX's tile data: it must be asked for (`arch_prctl(ARCH_REQ_XCOMP_PERM,
    XFEATURE_XTILEDATA)`, as oneDNN asks), and kernels before 5.16 or a seccomp profile refuse. Refused, oneDNN
    multiplies bfloat16 on AVX-512 instead: 63 papers/s against 316 on the tiles and the int8 batch graph's 171
    (bench/RESULTS.md, round 18)."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.syscall(SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0)


def batches_in_bf16(cpu_flags: str | None = None) -> bool:
    """Whether batches run here through `Bf16Runs`: on AMX the kernel grants, where PyTorch (the `semantic`
    extra's) is installed."""
    return has_amx_bf16(cpu_flags) and tiles_granted() and not missing(TORCH_MODULES)


class Bf16Runs:
    """Unit-length vectors of token id runs, through the reference model in bfloat16 (mean pooling and the
    normalisation in float32, as the reference computes them)."""

    def __init__(self) -> None:
        import torch

        model: Any = load_sentence_transformer()[0].auto_model
        # PyTorch's fused attention: its CPU kernel runs the bfloat16 products on the tiles too (the eager one,
        # a softmax apart, was slower here).
        model.set_attn_implementation("sdpa")
        self._model = model.to(torch.bfloat16).eval()

    def __call__(self, ids: Sequence[Sequence[int]]) -> Vectors:
        import numpy as np
        import torch

        # Each run on the calling thread alone (the runs go side by side from a pool): sets this thread's OpenMP
        # team, so a thread that runs other PyTorch work keeps its own.
        if torch.get_num_threads() != 1:
            torch.set_num_threads(1)
        width = -(-max(len(row) for row in ids) // PAD_TO) * PAD_TO
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        ids_tensor, mask_tensor = torch.from_numpy(input_ids), torch.from_numpy(mask)
        with torch.inference_mode():
            hidden = self._model(input_ids=ids_tensor, attention_mask=mask_tensor).last_hidden_state.float()
            weights = mask_tensor.unsqueeze(-1).float()
            mean = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            vectors: Vectors = torch.nn.functional.normalize(mean, p=2.0, dim=1).numpy()
        return vectors
