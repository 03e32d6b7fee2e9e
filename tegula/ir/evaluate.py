"""Host evaluation of scalar expressions (grid extents, shape expressions) by the operator table.

:func:`host_lambda` compiles expressions over constants and variables into one Python function
that computes them as the device would, by the rows of :mod:`tegula.ir.ops`: integers wrap to
their dtype, division truncates or floors as the operator says. Integer operators whose Python
spelling means the same on Python ints (``+``, ``//``, ``<``, ...) are written inline, wrapped
where they can leave the dtype's range; the others call the row's fold. Launches evaluate dynamic
grids with it, so it stays cheap. :func:`evaluate` is the one-shot form.

:func:`array_fn` compiles integer index arithmetic into a function over numpy arrays (every
thread index, every iteration of a loop nest at once), by the same rows' numpy functions.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import ops


class HostEvalError(ValueError):
    """The expression cannot be computed on the host (a load, a builtin, a division by zero...);
    callers turn it into their own user-facing error."""


# integer rows whose Python operator on Python ints is the row's exact meaning
_INLINE = {"add", "sub", "mul", "floordiv", "floormod", "bitand", "bitor", "bitxor", "shl", "shr",
           "lt", "le", "gt", "ge", "eq", "ne", "neg", "bitnot"}
_MAY_LEAVE_RANGE = {"add", "sub", "mul", "floordiv", "shl", "neg", "bitnot"}


def _strict(fold: Callable[..., Any], e: E.Expr) -> Callable[..., Any]:
    def run(*v: Any) -> Any:
        r = fold(*v)
        if r is None:
            raise HostEvalError(f"'{e}' has no value here (a division by zero or a negative shift)")
        return r
    return run


def host_lambda(exprs: Any, var_text: Callable[[E.Var, Callable[[Any], str]], str]) -> Callable[[Any], tuple]:
    """One function ``f(v)`` returning the tuple of the values of ``exprs``.

    ``var_text(var, bind)`` gives the Python text reading ``var`` from ``v`` (``bind(obj)`` makes
    a name for any object the text needs) and raises when ``var`` has no value on the host.
    Raises :class:`HostEvalError` (a ``ValueError``) for a node the host cannot compute; the
    function raises it (or ``ZeroDivisionError``) for values where an operation is undefined.
    """
    names: dict[str, Any] = {}

    def bind(obj: Any) -> str:
        name = f"_h{len(names)}"
        names[name] = obj
        return name

    def apply(row: ops.Op, e: E.Expr, args: Any) -> str:
        d = args[0].dtype
        texts = [text(a) for a in args]
        if not d.is_float and row.name in _INLINE:
            out = f"({row.py}{texts[0]})" if row.arity == 1 else f"({texts[0]} {row.py} {texts[1]})"
            if row.name in _MAY_LEAVE_RANGE:
                out = f"{bind(ops.wrapper(row.result_dtype(d)))}{out}"
            return out
        return f"{bind(_strict(ops.folder(row, d), e))}({', '.join(texts)})"

    def text(e: Any) -> str:
        if isinstance(e, bool) or not isinstance(e, (int, E.Expr)):
            raise HostEvalError(f"cannot evaluate {e!r} on the host")
        if isinstance(e, int):
            return repr(e)  # a static extent
        if isinstance(e, E.Const):
            return bind(e.value)
        if isinstance(e, E.Var):
            return var_text(e, bind)
        if isinstance(e, E.BinOp):
            return apply(ops.BINARY[e.op], e, (e.a, e.b))
        if isinstance(e, E.Compare):
            return apply(ops.COMPARE[e.op], e, (e.a, e.b))
        if isinstance(e, E.UnaryOp):
            return apply(ops.UNARY[e.op], e, (e.a,))
        if isinstance(e, E.Call):
            return apply(ops.INTRINSICS[e.name], e, e.args)
        if isinstance(e, E.Cast):
            cast = bind(lambda x, frm=e.value.dtype, to=e.to: ops.cast_value(x, frm, to))
            return f"{cast}({text(e.value)})"
        if isinstance(e, E.Select):
            return f"({text(e.then)} if {text(e.cond)} else {text(e.else_)})"
        raise HostEvalError(f"cannot evaluate {type(e).__name__} '{e}' on the host")

    body = ", ".join(text(e) for e in exprs)
    return eval(f"lambda v: ({body},)", names)  # our own text, names bound above


_COMPILED: dict[int, tuple[Any, Callable[[Any], tuple]]] = {}  # id(expr) -> (expr, function)


def evaluate(e: Any, values: Mapping[E.Var, Any]) -> Any:
    """The value of ``e`` with ``values`` bound to its variables; raises :class:`HostEvalError`
    (a ``ValueError``) for an unbound variable or a node the host cannot compute. The compiled
    form of each expression is kept, so evaluating one again is cheap."""
    hit = _COMPILED.get(id(e))
    if hit is None or hit[0] is not e:
        hit = _COMPILED[id(e)] = (e, host_lambda((e,), lambda v, bind: f"v[{bind(v)}]"))
    try:
        return hit[1](values)[0]
    except KeyError as err:
        name = err.args[0].name if err.args and isinstance(err.args[0], E.Var) else "a variable"
        raise HostEvalError(f"'{name}' has no value") from None


def array_fn(e: Any, var: Callable[[E.Var], Callable[[Any], Any]], wide: bool = False) -> Callable[[Any], Any]:
    """Integer and bool index arithmetic ``e`` as a function of an environment of numpy arrays,
    each operator by its row's numpy function in its operands' dtype (integers wrap as on the
    device), ``min`` / ``max`` included; ``var(v)`` gives the function reading variable ``v``
    from the environment. ``wide``: integers in int64 and casts dropped (layout expressions,
    drawn for any index without wrapping). Raises :class:`HostEvalError` for a node it does not
    compute (a load, a builtin, a cast to or from a float)."""
    def index_dtype(d: dt.DType) -> dt.DType:
        return (dt.bool_ if d.is_bool else dt.int64) if wide else d

    def fn(e: Any) -> Callable[[Any], Any]:
        if isinstance(e, (int, np.integer)) and not isinstance(e, bool):
            v = np.asarray(e, dtype=np.int64)
            return lambda env: v
        if isinstance(e, E.Const):
            v = np.asarray(e.value, dtype=np.int64 if wide else e.dtype.np)
            return lambda env: v
        if isinstance(e, E.Var):
            return var(e)
        if isinstance(e, (E.BinOp, E.Compare)):
            row = (ops.BINARY if isinstance(e, E.BinOp) else ops.COMPARE)[e.op]
            # wide: a BinOp in its result's kind (bool for logical and / or), a Compare in its operands'
            f, fa, fb = ops.np_fn(row, index_dtype(e.dtype if isinstance(e, E.BinOp) and wide else e.a.dtype)), \
                fn(e.a), fn(e.b)
            return lambda env: f(fa(env), fb(env))
        if isinstance(e, E.UnaryOp):
            f, fa = ops.np_fn(ops.UNARY[e.op], index_dtype(e.dtype if wide else e.a.dtype)), fn(e.a)
            return lambda env: f(fa(env))
        if isinstance(e, E.Call) and e.name in ("min", "max"):
            f = ops.np_fn(ops.INTRINSICS[e.name], index_dtype(e.args[0].dtype))
            fa, fb = fn(e.args[0]), fn(e.args[1])
            return lambda env: f(fa(env), fb(env))
        if isinstance(e, E.Cast) and wide:
            return fn(e.value)
        if isinstance(e, E.Cast) and not e.to.is_float and not e.value.dtype.is_float:
            fa, to = fn(e.value), e.to.np
            return lambda env: np.asarray(fa(env)).astype(to)
        if isinstance(e, E.Select):
            fc, ft, ff = fn(e.cond), fn(e.then), fn(e.else_)
            return lambda env: np.where(fc(env), ft(env), ff(env))
        raise HostEvalError(f"cannot evaluate {type(e).__name__} '{e}' on index arrays")

    return fn(e)
