"""Small helpers to build tile-level IR by hand in interpreter tests."""
from __future__ import annotations

from typing import Any

from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import Var, as_expr
from tegula.ir.stmt import Kernel, PrimFunc, seq


def region(buf: Buffer, *ranges: Any) -> BufferRegion:
    """``region(A, (start, extent), ...)``; a bare start means extent 1."""
    rs = []
    for r in ranges:
        if isinstance(r, tuple):
            rs.append((as_expr(r[0]), r[1]))
        else:
            rs.append((as_expr(r), 1))
    return BufferRegion(buf, tuple(rs))


def kernel(grid: tuple, allocs: tuple, body_fn: Any, inits: dict | None = None) -> Kernel:
    """A launch over ``grid``; ``body_fn(*block_vars)`` returns the body statements."""
    bvars = tuple(Var(n) for n in ("bx", "by", "bz")[: len(grid)])
    return Kernel(tuple(grid), (128,), bvars, tuple(allocs), seq(*body_fn(*bvars)),
                  alloc_inits=inits or {})


def func(name: str, params: tuple, *body: Any) -> PrimFunc:
    return PrimFunc(name, tuple(params), seq(*body))


def ceildiv(a: int, b: int) -> int:
    return -(-a // b)
