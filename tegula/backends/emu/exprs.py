"""Expression rules of the emulator.

Variables, constants, arithmetic, casts and intrinsics are the rules shared with the interpreter
(:mod:`tegula.backends.closure`), so results match it exactly: narrow floats compute in float32
and round back after each operation, integer division truncates, overflow wraps. What differs is
evaluation order where C++ has it: ``cond ? a : b``, ``&&`` and ``||`` only evaluate (and
bounds-check, and race-check) the side that each thread takes.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, CExpr, arith_binop, compile_expr, has_effects
from tegula.backends.emu.context import BUILTIN_RULES, RULES, STATE, Ctx, and_mask, expr_rule
from tegula.backends.emu.memory import check_dims
from tegula.backends.memo import value_range


def _lazy(fc: Callable, fa: Callable, n: int, taken: bool, dummy: Any) -> Callable:
    """Evaluate ``fa`` only for the threads where ``cond == taken``."""
    def run(env: list, c: Any) -> Any:
        m = env[MASK]
        sub = and_mask(m, c if taken else np.logical_not(c), n)
        if sub is not None and not sub.any():
            return dummy
        env[MASK] = sub
        try:
            return fa(env)
        finally:
            env[MASK] = m
    return run


@expr_rule(E.BinOp)
def _binop(e: E.BinOp, ctx: Ctx) -> CExpr:
    a, b = compile_expr(e.a, ctx), compile_expr(e.b, ctx)
    if e.op in ("and", "or") and a.vec and has_effects(e.b):
        n = ctx.nthreads
        fa = a.fn
        rb = _lazy(fa, compile_expr(e.b, ctx).fn, n, e.op == "and", np.zeros(n, bool))
        if e.op == "and":
            return CExpr(lambda env: (lambda c: c & rb(env, c))(fa(env)), True)
        return CExpr(lambda env: (lambda c: c | rb(env, c))(fa(env)), True)
    if e.op in ("and", "or") and not a.vec and has_effects(e.b):
        fa, fb = a.fn, b.fn
        if e.op == "and":
            return CExpr(lambda env: fa(env) and fb(env), b.vec)
        return CExpr(lambda env: fa(env) or fb(env), b.vec)
    return arith_binop(e, a, b)


@expr_rule(E.Select)
def _select(e: E.Select, ctx: Ctx) -> CExpr:
    c, t, f = (compile_expr(x, ctx) for x in (e.cond, e.then, e.else_))
    fc, ft, ff = c.fn, t.fn, f.fn
    npd = e.dtype.np
    n = ctx.nthreads
    if not c.vec:
        def pick(env: list) -> Any:  # C's ?: evaluates the side taken only
            return ft(env) if fc(env) else ff(env)
        return CExpr(pick, t.vec or f.vec)
    if has_effects(e.then) or has_effects(e.else_):
        dummy = np.zeros(n, npd)
        lt, lf = _lazy(fc, ft, n, True, dummy), _lazy(fc, ff, n, False, dummy)

        def sel_lazy(env: list) -> Any:
            cv = fc(env)
            return np.where(cv, lt(env, cv), lf(env, cv)).astype(npd, copy=False)
        return CExpr(sel_lazy, True)

    def sel(env: list) -> Any:
        return np.where(fc(env), ft(env), ff(env)).astype(npd, copy=False)
    return CExpr(sel, True)


# ---------------------------------------------------------------------------------------------
# Element addressing
# ---------------------------------------------------------------------------------------------

def dims_of(info: Any, ctx: Ctx) -> list:
    """The buffer's shape as functions of env (dynamic dims are variables bound at launch)."""
    out = []
    for d in info.buffer.shape:
        if isinstance(d, int):
            out.append(lambda env, d=d: d)
        else:
            f = compile_expr(E.as_expr(d), ctx).fn
            out.append(lambda env, f=f: int(f(env)))
    return out


def in_bounds(i: Any, n: int) -> bool:
    """Every lane of index ``i`` (a scalar or one per thread) lies in ``[0, n)``."""
    if isinstance(i, np.ndarray) and i.size:
        lo, hi = value_range(i)
        return bool(lo >= 0 and hi < n)
    return not np.any((i < 0) | (i >= n))


def compile_element(load: Any, ctx: Ctx) -> tuple[Callable, bool]:
    """``fn(env) -> (flat index, mask of the threads that may access)`` for ``buf[indices]``,
    checking bounds; and whether the index differs per thread."""
    info = ctx.buf(load.buffer, load)
    if info.scope == "local.var":
        return (lambda env: (0, env[MASK])), False
    idx = [compile_expr(i, ctx) for i in load.indices]
    vec = any(i.vec for i in idx)
    fns = [i.fn for i in idx]
    dims = dims_of(info, ctx)
    span = load.span or ctx.span
    if len(fns) != len(dims):
        raise UnsupportedError(f"buffer '{info.name}' has {len(dims)} dimension(s) but is indexed "
                               f"with {len(fns)}", span)
    static = all(isinstance(d, int) for d in info.buffer.shape)
    if len(fns) == 1:
        f0 = fns[0]
        n0 = info.buffer.shape[0] if static else None
        d0 = dims[0]

        def elem1(env: list) -> tuple:
            i = f0(env)
            n = n0 if n0 is not None else d0(env)
            m = env[MASK]
            if not in_bounds(i, n):
                m = check_dims(env[STATE], info, [i], [n], m, span)
                i = np.where(m, i, 0) if vec else 0
            return i, m
        return elem1, vec

    def elem(env: list) -> tuple:
        ix = [f(env) for f in fns]
        ns = [d(env) for d in dims]
        m = env[MASK]
        if not all(in_bounds(i, n) for i, n in zip(ix, ns)):
            m = check_dims(env[STATE], info, ix, ns, m, span)
            ix = [np.where(m, i, 0) if vec else 0 for i in ix]
        flat: Any = 0
        stride = 1
        for i, n in zip(reversed(ix), reversed(ns)):
            flat = flat + np.asarray(i, dtype=np.int64) * stride
            stride *= n
        return flat, m
    return elem, vec


@expr_rule(E.Builtin)
def _builtin(e: E.Builtin, ctx: Ctx) -> CExpr:
    rule = BUILTIN_RULES.get(e.name)
    if rule is None and e.name.startswith("tl::"):
        rule = BUILTIN_RULES.get(e.name.split("<")[0])
    if rule is None:
        raise RULES.unimplemented("builtin", e.name, e.span or ctx.span)
    return rule(e, ctx)
