"""Run a module as on a CPU with AVX-512 but no AMX (an AMD Zen 4, an Intel Xeon before Sapphire Rapids).

    .venv/bin/python -m bench.without_amx bench.embeddings --database-url ... [its arguments]

Linux hands out AMX's tile registers only to a process that asks (`arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)`), and oneDNN (PyTorch's products) and ONNX Runtime's MLAS ask before they use a tile
instruction. A seccomp filter installed here, before either library loads, refuses that one request, so both fall
back to their AVX-512 kernels (bfloat16 products on AVX512-BF16, int8 on AVX-512 VNNI) and
`semantic.bf16.has_amx_bf16` answers as on such a CPU: the same process, the same machine, AMX alone taken away.
"""

from __future__ import annotations

import ctypes
import errno
import runpy
import struct
import sys

from semantic.bf16 import ARCH_REQ_XCOMP_PERM, SYS_ARCH_PRCTL

# <linux/audit.h>, <linux/filter.h>, <linux/seccomp.h>, <linux/prctl.h>
AUDIT_ARCH_X86_64 = 0xC000003E
LD_W_ABS, JEQ_K, RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO = 0x7FFF0000, 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
# struct seccomp_data: nr at 0, arch at 4, args[0] (its low word, little-endian) at 16
PROGRAM = [
    (LD_W_ABS, 0, 0, 4),
    (JEQ_K, 0, 5, AUDIT_ARCH_X86_64),
    (LD_W_ABS, 0, 0, 0),
    (JEQ_K, 0, 3, SYS_ARCH_PRCTL),
    (LD_W_ABS, 0, 0, 16),
    (JEQ_K, 0, 1, ARCH_REQ_XCOMP_PERM),
    (RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM),
    (RET_K, 0, 0, SECCOMP_RET_ALLOW),
]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def refuse_amx() -> None:
    """Refuse this process (and the threads and children it starts from now on) the tile data permission."""
    libc = ctypes.CDLL(None, use_errno=True)
    code = b"".join(struct.pack("<HBBI", *row) for row in PROGRAM)
    program = _Program(len(PROGRAM), code)
    if (
        libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
        or libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0
    ):
        raise OSError(ctypes.get_errno(), "seccomp filter refused")


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    refuse_amx()
    module, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
