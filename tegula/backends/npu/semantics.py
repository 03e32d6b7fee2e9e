"""What the NPU tile operations compute, on logical numpy tiles: one definition that the
interpreter (``target="cpu"``) and the emulator (``ascend-emu``) both call.

- ``mma``: ``C (+)= op(A) @ op(B)`` in float32 (the cube accumulates fp16/bf16 products in fp32),
  rounded to C's dtype; ``init`` replaces C.
- ``vec``: a ``T.tile.*`` instruction. Operands are tiles of the destination's shape, tiles of one
  value per row (``(R,)`` or ``(R, 1)``: broadcast along the row) or scalars. Narrow floats compute
  in float32 and round to the destination's dtype once, at the end (one vector instruction).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

F32 = np.dtype(np.float32)


def mma(a: np.ndarray, b: np.ndarray, c: np.ndarray, ta: bool, tb: bool, init: bool) -> np.ndarray:
    """The new value of C (same shape and dtype as ``c``)."""
    a2 = a.reshape(a.shape[-2:]).astype(F32)
    b2 = b.reshape(b.shape[-2:]).astype(F32)
    p = (a2.T if ta else a2) @ (b2.T if tb else b2)
    if not init:
        p = p + c.reshape(p.shape).astype(F32)
    return p.astype(c.dtype).reshape(c.shape)


def _relu(x: Any) -> Any:
    return np.maximum(x, 0)


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


UNARY: dict[str, Callable[[Any], Any]] = {
    "exp": np.exp, "ln": np.log, "abs": np.abs, "reciprocal": lambda x: 1 / x, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "relu": _relu, "sigmoid": _sigmoid,
    "silu": lambda x: x * _sigmoid(x), "copy": lambda x: x, "cast": lambda x: x,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
    "max": np.maximum, "min": np.minimum,
}


def _operand(x: Any, shape: tuple) -> Any:
    if isinstance(x, np.ndarray):
        v = x.astype(F32) if x.dtype.kind == "f" and x.dtype.itemsize < 4 else x
        rows = int(np.prod(shape[:-1]))
        if len(shape) >= 2 and v.size == rows and v.size != int(np.prod(shape)):
            return v.reshape(tuple(shape[:-1]) + (1,))
        return v.reshape(shape)
    return np.float32(x) if isinstance(x, float) else x


def vec(op: str, dst: np.ndarray, srcs: list) -> np.ndarray:
    """The value ``T.tile.<op>`` writes into ``dst`` (a tile of dst's shape and dtype)."""
    shape = dst.shape
    xs = [_operand(s, shape) for s in srcs]
    if op == "fill":
        r = np.broadcast_to(np.asarray(xs[0], dtype=F32 if dst.dtype.kind == "f" else dst.dtype), shape)
    elif op in UNARY:
        r = UNARY[op](xs[0])
    elif op in BINARY:
        r = BINARY[op](xs[0], xs[1])
    elif op == "axpy":
        r = _operand(dst, shape) + xs[1] * xs[0]
    elif op == "leaky_relu":
        r = np.where(xs[0] >= 0, xs[0], xs[0] * xs[1])
    else:  # the frontend only builds the ops above
        raise AssertionError(f"unknown vector op {op}")
    return np.broadcast_to(np.asarray(r), shape).astype(dst.dtype)
