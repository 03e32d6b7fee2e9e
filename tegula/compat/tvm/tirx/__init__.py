"""``tvm.tirx`` (and ``tvm.tir``, the same module): expressions as tegula's IR builds them:
``const``, ``IntImm``, ``FloatImm``, ``Var``, ``Cast``, ``Select``, ``Min``, ``Max``,
``reinterpret``; ``PrimExpr`` is tegula's ``Expr``, ``PrimFunc`` and ``Buffer`` tegula's; the
walks of :mod:`.stmt_functor`."""
from __future__ import annotations

from typing import Any

from tegula import errors as _errors
from tegula.ir import expr as _E
from tegula.ir.buffer import Buffer  # noqa: F401
from tegula.ir.expr import Expr as PrimExpr  # noqa: F401
from tegula.ir.stmt import PrimFunc  # noqa: F401
from tegula.compat.tvm.tirx import stmt_functor  # noqa: F401

def const(value: Any, dtype: Any = None) -> _E.Const:
    """A constant of ``dtype`` (default: int32 / float32 / bool from the value)."""
    return _E.const(value, None if dtype is None else str(dtype))


def IntImm(dtype: Any, value: int) -> _E.Const:  # noqa: N802  (TVM's name)
    return _E.const(int(value), str(dtype))


def FloatImm(dtype: Any, value: float) -> _E.Const:  # noqa: N802
    return _E.const(float(value), str(dtype))


def Var(name: str, dtype: Any = "int32") -> _E.Var:  # noqa: N802
    from tegula.ir import dtype as dt

    return _E.Var(name, dt.as_dtype(str(dtype)))


def Cast(dtype: Any, value: Any) -> _E.Expr:  # noqa: N802
    return _E.cast(str(dtype), value)


def Select(cond: Any, true_value: Any, false_value: Any) -> _E.Expr:  # noqa: N802
    return _E.select(cond, true_value, false_value)


def Min(a: Any, b: Any) -> _E.Expr:  # noqa: N802
    return _E.minimum(a, b)


def Max(a: Any, b: Any) -> _E.Expr:  # noqa: N802
    return _E.maximum(a, b)


def reinterpret(dtype: Any, value: Any) -> _E.Expr:
    """The bits of ``value`` read as ``dtype`` (``T.reinterpret``)."""
    from tegula import language as T

    fn = getattr(T, "reinterpret", None)
    if fn is None:
        raise _errors.UnsupportedError("tvm.tirx.reinterpret: tegula has no T.reinterpret yet")
    return fn(dtype, value)

