"""Gemm operands of narrow dtypes, widened once while their bytes stay the same.

A ``T.gemm`` multiplies in float32 (float64 for integer and float64 accumulators), so a float16,
bfloat16, fp8 or integer operand is converted at every product. Kernels multiply the same tile
many times: attention's backward reads the block's K and V tiles in every step of its loop, a
tile copied in once feeds two gemms, and a tile copied to shared memory holds the bytes of the
fragment it came from. :func:`widened` keeps the last operands it converted, each with its
bytes, and hands the converted values out again for an operand of the same bytes, shape,
strides and dtype: a comparison of bytes instead of a conversion, giving the very array that
:func:`tegula.ir.ops.widen` would make (same values, same layout), so products are bit for bit
those of converting each time. Nothing has to know when a tile is written: different bytes are
a miss. The kept arrays live in the run's ``env`` and go with it.
"""
from __future__ import annotations


import numpy as np

from tegula.ir import ops

KEPT = object()       # key of the env slot holding the kept operands (a dict, made on first use)
_MAX_ELEMS = 1 << 18  # operands up to this many elements are kept (tiles, a batch's stacked tiles)
_ENTRIES = 32         # operands kept per run; the least recently used goes first
_SAMPLES = 61         # bytes of an operand sampled into its key


def widened(env: list, slot: int, x: np.ndarray, comp: np.dtype) -> np.ndarray:
    """``ops.widen(x, comp, copy=False)``, reused from an earlier call of the run whose operand
    had the same bytes, shape, strides and dtype. The result may be shared with later calls:
    callers must not write into it."""
    if x.dtype == comp or x.size > _MAX_ELEMS or type(x) is not np.ndarray:
        return ops.widen(x, comp, copy=False)
    kept = env[slot]
    if kept is None:
        kept = env[slot] = {}
    raw = x.tobytes()
    # the key holds a sample of the bytes, so that a tile copied elsewhere finds its values
    # (a key shared by different bytes only costs a conversion: the bytes decide)
    key = (x.shape, x.strides, x.dtype, comp, raw[::len(raw) // _SAMPLES + 1])
    old = kept.pop(key, None)
    if old is not None and old[0] == raw:
        kept[key] = old  # the most recently used goes last
        return old[1]
    w = ops.widen(x, comp, copy=False)
    if len(kept) >= _ENTRIES:
        del kept[next(iter(kept))]
    kept[key] = (raw, w)
    return w
