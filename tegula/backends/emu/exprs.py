"""Expression rules of the emulator.

Arithmetic follows the interpreter exactly (its operator tables are reused): narrow floats
compute in float32 and round back after each operation, integer division truncates, overflow
wraps. What differs is evaluation order where C++ has it: ``cond ? a : b``, ``&&`` and ``||``
only evaluate (and bounds-check, and race-check) the side that each thread takes.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tegula.errors import KernelNameError, UnsupportedError
from tegula.ir import expr as E
from tegula.ir.visitor import post_order_visit
from tegula.backends.interp.exprs import (_BIN_OPS, _CMP_OPS, _FLOAT_OPS, _INT_IDENTITY, _INT_OPS,
                                          _INTRINSICS, _lift)
from tegula.backends.emu.context import (BUILTIN_RULES, F32, MASK, STATE, CExpr, Ctx, and_mask,
                                         compile_expr, expr_rule, np_scalar)
from tegula.backends.emu.memory import check_dims


def has_effects(e: Any) -> bool:
    """True when evaluating ``e`` touches memory (so it must not run for threads that skip it)."""
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, (E.BufferLoad, E.Builtin)) else None)
    return bool(found)


@expr_rule(E.Var)
def _var(e: E.Var, ctx: Ctx) -> CExpr:
    s = ctx.slots.get(id(e))
    if s is None:
        raise KernelNameError(f"variable '{e.name}' is used where it has no value", e.span)
    return CExpr(lambda env: env[s], id(e) in ctx.vec_vars)


@expr_rule(E.Const)
def _const(e: E.Const, ctx: Ctx) -> CExpr:
    v = np_scalar(e.dtype, e.value)
    return CExpr(lambda env: v, False)


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
    d = e.dtype
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
    op = _BIN_OPS.get(e.op)
    if op is None:
        op = (_INT_OPS if (d.is_int or d.is_bool) else _FLOAT_OPS)[e.op]
    narrow = d.np if d.is_float and d.bits < 32 and e.op not in ("min", "max") else None
    return CExpr(_lift(op, a.fn, b.fn, narrow), a.vec or b.vec)


@expr_rule(E.Compare)
def _compare(e: E.Compare, ctx: Ctx) -> CExpr:
    a, b = compile_expr(e.a, ctx), compile_expr(e.b, ctx)
    op, fa, fb = _CMP_OPS[e.op], a.fn, b.fn
    return CExpr(lambda env: op(fa(env), fb(env)), a.vec or b.vec)


@expr_rule(E.UnaryOp)
def _unary(e: E.UnaryOp, ctx: Ctx) -> CExpr:
    a = compile_expr(e.a, ctx)
    fa = a.fn
    if e.op == "neg":
        return CExpr(lambda env: -fa(env), a.vec)
    if e.op == "not":
        return CExpr(lambda env: np.logical_not(fa(env)), a.vec)
    return CExpr(lambda env: ~fa(env), a.vec)


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


@expr_rule(E.Cast)
def _cast(e: E.Cast, ctx: Ctx) -> CExpr:
    a = compile_expr(e.value, ctx)
    fa, npd = a.fn, e.to.np
    return CExpr(lambda env: fa(env).astype(npd), a.vec)


@expr_rule(E.Call)
def _call(e: E.Call, ctx: Ctx) -> CExpr:
    args = [compile_expr(a, ctx) for a in e.args]
    vec = any(a.vec for a in args)
    fns = [a.fn for a in args]
    argd = e.args[0].dtype
    if not argd.is_float and e.name in _INT_IDENTITY:
        return CExpr(fns[0], vec)
    if not argd.is_float and e.name in ("isnan", "isinf"):
        return CExpr(lambda env: np.zeros_like(fns[0](env), dtype=bool)[()], vec)
    fn = _INTRINSICS.get(e.name)
    if fn is None:
        raise UnsupportedError(f"unimplemented intrinsic {e.name} for target cuda-emu", e.span)
    out = e.dtype.np
    narrow = argd.is_float and argd.bits < 32
    if len(fns) == 1:
        f0 = fns[0]
        if narrow:
            return CExpr(lambda env: fn(f0(env).astype(F32)).astype(out), vec)
        return CExpr(lambda env: fn(f0(env)), vec)
    f0, f1 = fns
    if narrow:
        return CExpr(lambda env: fn(f0(env).astype(F32), f1(env).astype(F32)).astype(out), vec)
    return CExpr(lambda env: fn(f0(env), f1(env)), vec)


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
            if np.any((i < 0) | (i >= n)):
                m = check_dims(env[STATE], info, [i], [n], m, span)
                i = np.where(m, i, 0) if vec else 0
            return i, m
        return elem1, vec

    def elem(env: list) -> tuple:
        ix = [f(env) for f in fns]
        ns = [d(env) for d in dims]
        m = env[MASK]
        bad = False
        for i, n in zip(ix, ns):
            bad = bad | (i < 0) | (i >= n)
        if np.any(bad):
            m = check_dims(env[STATE], info, ix, ns, m, span)
            ix = [np.where(m, i, 0) if vec else 0 for i in ix]
        flat: Any = 0
        stride = 1
        for i, n in zip(reversed(ix), reversed(ns)):
            flat = flat + np.asarray(i, dtype=np.int64) * stride
            stride *= n
        return flat, m
    return elem, vec


@expr_rule(E.BufferLoad)
def _load(e: E.BufferLoad, ctx: Ctx) -> CExpr:
    from tegula.backends.emu.memory_ops import compile_load

    return compile_load(e, ctx)


@expr_rule(E.Builtin)
def _builtin(e: E.Builtin, ctx: Ctx) -> CExpr:
    rule = BUILTIN_RULES.get(e.name)
    if rule is None and e.name.startswith("tl::"):
        rule = BUILTIN_RULES.get(e.name.split("<")[0])
    if rule is None:
        raise UnsupportedError(f"unimplemented builtin {e.name} for target cuda-emu", e.span or ctx.span)
    return rule(e, ctx)
