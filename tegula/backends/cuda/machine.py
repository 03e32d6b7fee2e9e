"""Facts of the NVIDIA GPUs the CUDA target builds for, in one place.

The passes, codegen and the launcher read these; nothing else in ``backends/cuda`` writes a
machine number down.
"""
from __future__ import annotations

from tegula.ir.stmt import WARPGROUP  # noqa: F401 (threads of a warpgroup: 128, a fact of the IR)

WARP = 32
# threads of one block, on every arch
MAX_THREADS_PER_BLOCK = 1024
# multiprocessors of an H100 / H200 SXM: one wave of 1-block-per-SM GEMM tiles
SM_COUNT = 132
# L2 of an H100 (the H200 has 60 MB): operands smaller than this stay in L2 in any block order
L2_BYTES = 50 * 2**20
# bytes: where every shared buffer starts in the block's pool (PlanSharedMemory, codegen, the
# emulator and the resource check)
SMEM_ALIGN = 128
# shared memory a block has without opting in (cuFuncSetAttribute) to more
STATIC_SMEM_LIMIT = 48 * 1024
# the most dynamic shared memory one block may opt in to, by compute capability
SMEM_LIMIT = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448, 120: 101376}


def smem_limit(arch: str) -> int:
    """The most shared memory (bytes) one block may use on ``arch`` (``"sm_90a"``): the row of
    :data:`SMEM_LIMIT` for its compute capability, or of the nearest one below it."""
    digits = "".join(c for c in arch if c.isdigit())
    cc = int(digits) if digits else 80
    return SMEM_LIMIT.get(cc, max(v for k, v in SMEM_LIMIT.items() if k <= cc) if cc >= 80 else STATIC_SMEM_LIMIT)


def align(n: int, a: int = SMEM_ALIGN) -> int:
    """``n`` bytes rounded up to ``a`` (default :data:`SMEM_ALIGN`)."""
    return -(-n // a) * a
