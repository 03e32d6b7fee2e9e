"""``tilelang.cuda.intrinsics.layout.utils``: mma tile sizes and the shared-memory swizzle
(:mod:`tegula.layout.mma`)."""
from __future__ import annotations

from typing import Any

from tegula.layout.mma import micro_size, swizzle_index


def get_mma_micro_size(dtype: Any) -> tuple[int, int, int]:
    """``(micro_size_x, micro_size_y, micro_size_k)`` of one warp's mma step for ``dtype``
    operands: ``(16, 16, 16)`` for 16-bit, ``(16, 16, 32)`` for 8-bit."""
    return micro_size(dtype)


def get_swizzle_layout(row_idx: Any, col_idx: Any, row_size: int, dtype: Any,
                       swizzle_bytes: Any = None) -> tuple[Any, Any]:
    """Where logical ``(row_idx, col_idx)`` of a shared tile with rows of ``row_size`` elements
    goes in tegula's 16-byte-chunk XOR swizzle (for ``T.Layout(shape, fn)``); indices may be
    ints or expressions. ``swizzle_bytes`` is accepted for compatibility; the swizzle spans the
    row."""
    return swizzle_index(row_idx, col_idx, row_size, dtype)
