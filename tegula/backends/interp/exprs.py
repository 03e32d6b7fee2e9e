"""Expression rules of the interpreter: each IR expression class compiles to a closure over ``env``.

Values are numpy scalars (outside parallel bodies, or when they do not vary over the lanes) or
numpy arrays broadcast over the lane axes of the enclosing ``T.Parallel`` nest, always of the
node's dtype. Narrow floats (float16, bfloat16, fp8) compute in float32 and round back after each
operation. Variables, constants, arithmetic, casts and intrinsics are the rules shared with the
emulator (:mod:`tegula.backends.closure`); ``Select`` and element loads are the interpreter's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.ir.expr import Builtin, BufferLoad, Select
from tegula.backends.closure import (MASK, ORDERING_ONLY, CExpr, bitcast, device_assert, checks_unwritten, compile_expr,
                                     extern_code_error, has_effects, unwritten, unwritten_read)
from tegula.backends.interp.context import Ctx, expr_rule, out_of_bounds
from tegula.backends.interp.parallel import vector_load


@expr_rule(Builtin)
def _builtin(e: Builtin, ctx: Ctx) -> CExpr:
    if e.name == "bitcast":
        return bitcast(e, ctx)
    if e.name == "call_extern":
        raise extern_code_error(e, e.span)
    if e.name == "device_assert":
        return device_assert(e, ctx)
    if e.name in ORDERING_ONLY:  # kernels run one after another here: nothing to order
        return CExpr(lambda env: np.True_, False)
    raise ctx.rules.unimplemented("builtin", e.name, e.span,
                                  "thread-level builtins only exist after CUDA lowering")


@expr_rule(Select)
def _select(e: Select, ctx: Ctx) -> CExpr:
    """Each side reads memory only for the lanes that take it, as C's ``?:`` does (so a guarded
    load out of bounds is no error); sides without loads are evaluated for every lane."""
    c, t, f = (compile_expr(x, ctx) for x in (e.cond, e.then, e.else_))
    fc, ft, ff = c.fn, t.fn, f.fn
    npd = e.dtype.np
    if not c.vec:
        def pick(env: list) -> Any:
            return ft(env) if fc(env) else ff(env)
        return CExpr(pick, t.vec or f.vec)
    if has_effects(e.then) or has_effects(e.else_):
        def side(fa: Any, cv: Any, env: list) -> Any:
            old = env[MASK]
            env[MASK] = cv if old is None else old & cv
            try:
                return fa(env)
            finally:
                env[MASK] = old

        def sel_lazy(env: list) -> Any:
            cv = fc(env)
            return np.where(cv, side(ft, cv, env), side(ff, ~cv, env)).astype(npd, copy=False)
        return CExpr(sel_lazy, True)

    def sel(env: list) -> Any:
        return np.where(fc(env), ft(env), ff(env)).astype(npd, copy=False)
    return CExpr(sel, True)


@expr_rule(BufferLoad)
def _load(e: BufferLoad, ctx: Ctx) -> CExpr:
    ce = _plain_load(e, ctx)
    if ctx.lane_vars.get(id(e.buffer)) is not None or not checks_unwritten(e.buffer):
        return ce
    return CExpr(_checked_load(e, ce.fn, ce.vec), ce.vec)


def _checked_load(e: BufferLoad, fn: Any, vec: bool) -> Any:
    """``fn`` reporting an element of a fragment or local buffer that was never written (the
    active lanes' only: masked-off lanes read what they like)."""
    isnan = np.isnan

    def load(env: list) -> Any:
        v = fn(env)
        if not isnan(v).any() or unwritten(v) is None:   # the common case: one pass, no NaN
            return v
        m = env[MASK]
        read = v
        if vec and m is not None:
            vb, mb = np.broadcast_arrays(np.asarray(v), m)
            read = vb[mb]
        unwritten_read(e.buffer, read, e.span, "a read", tile=False)
        return v
    return load


def moved_load(e: BufferLoad, ctx: Ctx) -> CExpr:
    """The load of a move (``is_move``): not checked for never-written elements."""
    return _plain_load(e, ctx)


def _plain_load(e: BufferLoad, ctx: Ctx) -> CExpr:
    lane_slot = ctx.lane_vars.get(id(e.buffer))
    if lane_slot is not None:  # a scalar variable holding one value per lane
        return CExpr(lambda env: env[lane_slot], True)
    idx = [compile_expr(i, ctx) for i in e.indices]
    if any(i.vec for i in idx):
        return CExpr(vector_load(e, ctx, idx), True)
    bs = ctx.slot(e.buffer)
    fns = [i.fn for i in idx]
    buf = e.buffer
    if len(fns) == 1:
        f0 = fns[0]

        def load1(env: list) -> Any:
            a, i = env[bs], f0(env)
            if 0 <= i < a.shape[0]:
                return a[i]
            raise out_of_bounds(e, buf, (i,), a.shape)
        return CExpr(load1, False)
    if len(fns) == 2:
        f0, f1 = fns

        def load2(env: list) -> Any:
            a, i, j = env[bs], f0(env), f1(env)
            n0, n1 = a.shape
            if 0 <= i < n0 and 0 <= j < n1:
                return a[i, j]
            raise out_of_bounds(e, buf, (i, j), a.shape)
        return CExpr(load2, False)

    def load(env: list) -> Any:
        a = env[bs]
        ix = tuple(f(env) for f in fns)
        for i, n in zip(ix, a.shape):
            if not 0 <= i < n:
                raise out_of_bounds(e, buf, ix, a.shape)
        return a[ix]
    return CExpr(load, False)
