"""Expression rules: each IR expression class compiles to a closure over ``env``.

Values are numpy scalars (outside parallel bodies, or when they do not vary over the lanes) or
numpy arrays broadcast over the lane axes of the enclosing ``T.Parallel`` nest, always of the
node's dtype. Narrow floats (float16, bfloat16, fp8) compute in float32 and round back after each
operation.
"""
from __future__ import annotations

import math
import operator
from typing import Any, Callable

import numpy as np

from tegula.errors import KernelNameError, OutOfBoundsError
from tegula.ir.expr import BinOp, BufferLoad, Call, Cast, Compare, Const, Select, UnaryOp, Var
from tegula.backends.interp.context import (F32, CExpr, Ctx, compile_expr, expr_rule, is_narrow,
                                            np_scalar)


@expr_rule(Var)
def _var(e: Var, ctx: Ctx) -> CExpr:
    s = ctx.slots.get(id(e))
    if s is None:
        raise KernelNameError(f"variable '{e.name}' is used where it has no value", e.span)
    return CExpr(lambda env: env[s], id(e) in ctx.vec_vars)


@expr_rule(Const)
def _const(e: Const, ctx: Ctx) -> CExpr:
    v = np_scalar(e.dtype, e.value)
    return CExpr(lambda env: v, False)


def _int_truncdiv(a: Any, b: Any) -> Any:
    q = a // b
    fix = (a - q * b != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype) if isinstance(fix, np.ndarray) else q + q.dtype.type(fix)


def _int_truncmod(a: Any, b: Any) -> Any:
    return np.fmod(a, b)


_BIN_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "floordiv": operator.floordiv, "floormod": operator.mod,
    "min": np.minimum, "max": np.maximum,
    "and": operator.and_, "or": operator.or_,  # operands are booleans: logical
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
    "shl": operator.lshift, "shr": operator.rshift,
}
_INT_OPS = {"div": _int_truncdiv, "truncdiv": _int_truncdiv, "truncmod": _int_truncmod}
_FLOAT_OPS = {"div": operator.truediv, "truncdiv": lambda a, b: np.trunc(a / b),
              "truncmod": np.fmod}


def _lift(op: Callable, fa: Callable, fb: Callable, narrow: Any) -> Callable:
    """``op(fa, fb)``; for a narrow float dtype compute in float32 and round back."""
    if narrow is None:
        return lambda env: op(fa(env), fb(env))
    return lambda env: op(fa(env).astype(F32), fb(env).astype(F32)).astype(narrow)


@expr_rule(BinOp)
def _binop(e: BinOp, ctx: Ctx) -> CExpr:
    a, b = compile_expr(e.a, ctx), compile_expr(e.b, ctx)
    d = e.dtype
    op = _BIN_OPS.get(e.op)
    if op is None:
        op = (_INT_OPS if (d.is_int or d.is_bool) else _FLOAT_OPS)[e.op]
    narrow = d.np if is_narrow(d) and e.op not in ("min", "max") else None
    return CExpr(_lift(op, a.fn, b.fn, narrow), a.vec or b.vec)


_CMP_OPS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
            "eq": operator.eq, "ne": operator.ne}


@expr_rule(Compare)
def _compare(e: Compare, ctx: Ctx) -> CExpr:
    a, b = compile_expr(e.a, ctx), compile_expr(e.b, ctx)
    op, fa, fb = _CMP_OPS[e.op], a.fn, b.fn
    return CExpr(lambda env: op(fa(env), fb(env)), a.vec or b.vec)


@expr_rule(UnaryOp)
def _unary(e: UnaryOp, ctx: Ctx) -> CExpr:
    a = compile_expr(e.a, ctx)
    fa = a.fn
    if e.op == "neg":
        return CExpr(lambda env: -fa(env), a.vec)
    if e.op == "not":
        return CExpr(lambda env: np.logical_not(fa(env)), a.vec)
    return CExpr(lambda env: ~fa(env), a.vec)  # bitnot


@expr_rule(Select)
def _select(e: Select, ctx: Ctx) -> CExpr:
    c, t, f = (compile_expr(x, ctx) for x in (e.cond, e.then, e.else_))
    fc, ft, ff = c.fn, t.fn, f.fn
    npd = e.dtype.np
    if c.vec or t.vec or f.vec:
        def sel(env: list) -> Any:
            cv, tv, fv = fc(env), ft(env), ff(env)
            return np.where(cv, tv, fv).astype(npd, copy=False)
        return CExpr(sel, True)

    def sel_scalar(env: list) -> Any:
        tv, fv = ft(env), ff(env)  # both sides are evaluated, as on the device
        return tv if fc(env) else fv
    return CExpr(sel_scalar, False)


@expr_rule(Cast)
def _cast(e: Cast, ctx: Ctx) -> CExpr:
    a = compile_expr(e.value, ctx)
    fa, npd = a.fn, e.to.np
    return CExpr(lambda env: fa(env).astype(npd), a.vec)


def _sigmoid(x: Any) -> Any:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _rsqrt(x: Any) -> Any:
    return x.dtype.type(1) / np.sqrt(x)


_erf = np.frompyfunc(math.erf, 1, 1)

_INTRINSICS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1,
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "abs": np.abs, "tanh": np.tanh, "sigmoid": _sigmoid,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "erf": lambda x: _erf(x).astype(x.dtype),
    "pow": np.power, "fmod": np.fmod, "isnan": np.isnan, "isinf": np.isinf,
}
_INT_IDENTITY = {"floor", "ceil", "round", "trunc"}


@expr_rule(Call)
def _call(e: Call, ctx: Ctx) -> CExpr:
    args = [compile_expr(a, ctx) for a in e.args]
    vec = any(a.vec for a in args)
    fns = [a.fn for a in args]
    argd = e.args[0].dtype
    if not argd.is_float and e.name in _INT_IDENTITY:
        return CExpr(fns[0], vec)
    if not argd.is_float and e.name in ("isnan", "isinf"):
        return CExpr(lambda env: np.zeros_like(fns[0](env), dtype=bool)[()], vec)
    fn = _INTRINSICS[e.name]
    out = e.dtype.np
    if is_narrow(argd):
        if len(fns) == 1:
            f0 = fns[0]
            return CExpr(lambda env: fn(f0(env).astype(F32)).astype(out), vec)
        f0, f1 = fns
        return CExpr(lambda env: fn(f0(env).astype(F32), f1(env).astype(F32)).astype(out), vec)
    if len(fns) == 1:
        f0 = fns[0]
        return CExpr(lambda env: fn(f0(env)), vec)
    f0, f1 = fns
    return CExpr(lambda env: fn(f0(env), f1(env)), vec)


def out_of_bounds(node: Any, buffer: Any, index: Any, shape: Any) -> OutOfBoundsError:
    idx = ", ".join(str(int(i)) for i in index)
    return OutOfBoundsError(
        f"index [{idx}] is out of bounds of buffer '{buffer.name}' with shape {tuple(shape)}",
        node.span)


@expr_rule(BufferLoad)
def _load(e: BufferLoad, ctx: Ctx) -> CExpr:
    idx = [compile_expr(i, ctx) for i in e.indices]
    if any(i.vec for i in idx):
        from tegula.backends.interp.parallel import vector_load

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
