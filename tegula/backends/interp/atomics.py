"""Atomics issued per lane inside ``T.Parallel`` bodies (``T.atomic_add(C[i, j], v)``).

Lanes that hit the same element all contribute (``ufunc.at`` applies every update); updates of
inactive lanes (masked by an ``if``) and of out-of-bounds elements are dropped.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import ShapeError
from tegula.ir.buffer import BufferRegion
from tegula.backends.closure import MASK, StmtFn, compile_expr
from tegula.backends.interp.context import Ctx

_UFUNCS = {"add": np.add, "max": np.maximum, "min": np.minimum}


def lane_atomic(s: Any, ctx: Ctx) -> StmtFn:
    """Closure for an element-form atomic whose index or value varies over the lanes."""
    if isinstance(s.value, BufferRegion) or any(
            not (isinstance(e, int) and e == 1) for e in s.dst.extents):
        raise ShapeError(f"T.atomic_{s.kind} inside a T.Parallel body must update one element "
                         "per lane", s.span)
    bs = ctx.slot(s.dst.buffer)
    fns = [compile_expr(st, ctx).fn for st in s.dst.starts]
    fv = compile_expr(s.value, ctx).fn
    ufunc = _UFUNCS[s.kind]
    n = len(fns)

    def atomic(env: list) -> None:
        a = env[bs]
        mask = env[MASK]
        parts = [f(env) for f in fns] + [fv(env)] + ([mask] if mask is not None else [])
        arrs = np.broadcast_arrays(*parts)
        ix, val = [x.ravel() for x in arrs[:n]], arrs[n].ravel()
        keep = np.ones(val.shape, bool)
        if mask is not None:
            keep &= arrs[n + 1].ravel()
        for x, d in zip(ix, a.shape):
            keep &= (x >= 0) & (x < d)
        if not keep.all():
            ix = [x[keep] for x in ix]
            val = val[keep]
        ufunc.at(a, tuple(ix), val.astype(a.dtype))
    return atomic
