"""What the NPU tile operations compute, on logical numpy tiles: one definition that the
interpreter (``target="cpu"``) and the emulator (``ascend-emu``) both call.

- ``mma``: ``C (+)= op(A) @ op(B)`` in float32 (the cube accumulates fp16/bf16 products in fp32),
  rounded to C's dtype; ``init`` replaces C.
- ``vec``: a ``T.tile.*`` instruction, as its row of the vector-op table (:mod:`tegula.ir.vecops`)
  says: operands are tiles of the destination's shape, tiles of one value per row (``(R,)`` or
  ``(R, 1)``: broadcast along the row) or scalars; narrow floats compute in float32 and round to
  the destination's dtype once, at the end (one vector instruction).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import OutOfBoundsError
from tegula.ir import vecops

F32 = np.dtype(np.float32)


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, ta: bool, tb: bool, init: bool) -> np.ndarray:
    """The new value of C (same shape and dtype as ``c``)."""
    a2 = a.reshape(a.shape[-2:]).astype(F32)
    b2 = b.reshape(b.shape[-2:]).astype(F32)
    p = (a2.T if ta else a2) @ (b2.T if tb else b2)
    if not init:
        p = p + c.reshape(p.shape).astype(F32)
    return p.astype(c.dtype).reshape(c.shape)


def vec(op: str, dst: np.ndarray, srcs: list, attrs: Any = None, span: Any = None) -> np.ndarray:
    """The value ``T.tile.<op>`` writes into ``dst`` (a tile of dst's shape and dtype): the
    op's row of the vector-op table (:func:`tegula.ir.vecops.compute`). An operand the op cannot
    use when the kernel runs (a gather offset out of range) is an OutOfBoundsError at ``span``."""
    try:
        return vecops.compute(op, dst, srcs, attrs)
    except vecops.VecOpError as e:
        raise OutOfBoundsError(f"T.tile.{op}: {e}", span, hint=e.hint or None) from None
