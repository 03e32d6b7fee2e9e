"""Linear forms of integer expressions: ``sum(coefficient * term) + constant``.

The algebra the simplifier (:mod:`tegula.arith.simplify`) builds on, kept in the IR's own floor
so that building a region (``A[i * 64 : i * 64 + 64]`` has extent 64) and printing a loop's
bounds can cancel like terms without the simplifier. :func:`cancel` is that use; arithmetic wraps
to the dtype, as :mod:`tegula.ir.ops` defines it.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import ops
from tegula.ir.expr import BinOp, Call, Cast, Compare, Const, Expr, Select, UnaryOp, Var


def expr_key(e: Any) -> Any:
    """A hashable key equal for identical trees (variables and buffers by identity)."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("c", e.dtype.name, e.value)
    if isinstance(e, BinOp):
        return ("bin", e.op, expr_key(e.a), expr_key(e.b))
    if isinstance(e, Compare):
        return ("cmp", e.op, expr_key(e.a), expr_key(e.b))
    if isinstance(e, UnaryOp):
        return ("un", e.op, expr_key(e.a))
    if isinstance(e, Select):
        return ("sel", expr_key(e.cond), expr_key(e.then), expr_key(e.else_))
    if isinstance(e, Cast):
        return ("cast", e.to.name, expr_key(e.value))
    if isinstance(e, Call):
        return ("call", e.name) + tuple(expr_key(a) for a in e.args)
    if isinstance(e, E.BufferLoad):
        return ("load", id(e.buffer)) + tuple(expr_key(i) for i in e.indices)
    return ("other", id(e))  # builtins may have effects: never merged with one another



Linear = tuple[dict[Any, list], int]  # {key: [term, coefficient]}, constant


def linear(e: Expr) -> Linear:
    """``e`` as ``sum(coefficient * term) + constant`` over non-linear terms, in order of appearance."""
    if isinstance(e, Const):
        return {}, int(e.value)
    if isinstance(e, BinOp) and e.op in ("add", "sub"):
        ta, ka = linear(e.a)
        tb, kb = linear(e.b)
        sign = 1 if e.op == "add" else -1
        for key, (term, c) in tb.items():
            add_term(ta, key, term, sign * c)
        return ta, ka + sign * kb
    if isinstance(e, BinOp) and e.op == "mul" and (isinstance(e.b, Const) or isinstance(e.a, Const)):
        c, other = (e.b, e.a) if isinstance(e.b, Const) else (e.a, e.b)
        return _scale(linear(other), int(c.value))
    if isinstance(e, UnaryOp) and e.op == "neg":
        return _scale(linear(e.a), -1)
    return {expr_key(e): [e, 1]}, 0


def add_term(terms: dict, key: Any, term: Expr, c: int) -> None:
    if key in terms:
        terms[key][1] += c
    else:
        terms[key] = [term, c]


def _scale(lin: Linear, c: int) -> Linear:
    terms, k = lin
    return {key: [t, v * c] for key, (t, v) in terms.items()}, k * c


def merge_div_mod(lin: Linear) -> Linear:
    """``(x // c) * c * k + (x % c) * k -> x * k`` inside a linear form."""
    terms, k = lin
    for key, (t, coef) in list(terms.items()):
        if key not in terms or not (isinstance(t, BinOp) and t.op == "floordiv" and isinstance(t.b, Const)):
            continue
        c = int(t.b.value)
        mod_key = ("bin", "floormod", key[2], key[3])
        if c <= 0 or coef % c or mod_key not in terms or terms[mod_key][1] != coef // c:
            continue
        del terms[key], terms[mod_key]
        inner, ik = _scale(linear(t.a), coef // c)
        for ikey, (it, ic) in inner.items():
            add_term(terms, ikey, it, ic)
        k += ik
    return terms, k


def from_linear(lin: Linear, dtype: dt.DType) -> Expr:
    """Rebuild a linear form: positive terms first, then negative ones, the constant last.

    Coefficients and the constant are taken modulo the dtype's width (the arithmetic wraps), and
    the most negative value, whose negation is itself, is always added: so rebuilding is stable.
    """
    terms, k = lin
    wrap = ops.wrapper(dtype)
    most_negative = -(1 << (dtype.bits - 1)) if dtype.kind == "int" else None
    k = wrap(k)
    live = [(t, wrap(c)) for t, c in terms.values()]
    live = [(t, c) for t, c in live if c != 0]
    pos = [(t, c) for t, c in live if c > 0 or c == most_negative]
    neg = [(t, -c) for t, c in live if c < 0 and c != most_negative]

    def times(t: Expr, c: int) -> Expr:
        return t if c == 1 else BinOp("mul", t, Const(c, dtype))

    acc: Optional[Expr] = None
    for t, c in pos:
        acc = times(t, c) if acc is None else BinOp("add", acc, times(t, c))
    if acc is None and (k > 0 or k == most_negative):
        acc, k = Const(k, dtype), 0
    for t, c in neg:
        if acc is None:
            acc = UnaryOp("neg", t) if c == 1 else BinOp("mul", t, Const(-c, dtype))
        else:
            acc = BinOp("sub", acc, times(t, c))
    if acc is None:
        return Const(k, dtype)
    if k > 0 or k == most_negative:
        return BinOp("add", acc, Const(k, dtype))
    if k < 0:
        return BinOp("sub", acc, Const(-k, dtype))
    return acc


def cancel(e: Expr) -> Expr:
    """An integer expression with like terms collected (``(x*64 + 64) - x*64 -> 64``); other
    expressions unchanged."""
    if not e.dtype.is_int:
        return e
    return from_linear(merge_div_mod(linear(e)), e.dtype)
