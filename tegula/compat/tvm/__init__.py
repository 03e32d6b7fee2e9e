"""``from tilelang import tvm``: a small compatibility namespace for what TileLang programs touch
of TVM. It is not a TVM: each name maps to tegula's own equivalent.

================================  =============================================================
``tvm.target.Target(s)``          a target description: ``kind``, ``arch``, ``str()``
``tvm.transform.PassContext``     ``with PassContext(config={...}):`` pass configs for the kernels
                                  compiled inside (:func:`tegula.passconfig.pass_context`)
``tvm.tirx.const(v, dtype)``      a tegula IR constant; ``PrimExpr`` is tegula's ``Expr``,
                                  ``IntImm(dtype, v)`` / ``FloatImm(dtype, v)`` constants,
                                  ``Var(name, dtype)`` a variable, ``Cast``, ``Select``,
                                  ``Min``, ``Max``, ``reinterpret`` (``T.reinterpret``)
``tvm.DataType``                  :class:`tegula.compat.datatype.DataType`
``tvm.IRModule({"main": f})``     a named collection of PrimFuncs
``tvm.ir.assert_structural_equal``  tegula's structural equality (renaming-insensitive)
``tvm.error.InternalError``,      ``TVMError`` is :class:`tegula.errors.TegulaError`, so code that
``tvm.TVMError``                  catches it catches tegula's errors; ``InternalError`` is a subclass
================================  =============================================================

The namespaces are modules (``tegula.compat.tvm.tirx``...), so ``from tvm.tirx import const``
works where ``tvm`` is aliased (:mod:`tegula.compat.alias`).
"""
from __future__ import annotations

import sys
import types
from typing import Any, Mapping, Optional

from tegula import errors as _errors
from tegula.compat.datatype import DataType  # noqa: F401 (tvm.DataType)
from tegula.ir import expr as _E
from tegula.ir.stmt import PrimFunc as _PrimFunc
from tegula.ir.structural import assert_structural_equal as _ase, structural_equal as _se
from tegula.passconfig import pass_context as _pass_context

__version__ = "0.0-tegula"
TVMError = _errors.TegulaError


class InternalError(TVMError):
    """An invariant of the compiler broke (TVM's name for it)."""


def _module(name: str, doc: str, **attrs: Any) -> types.ModuleType:
    m = types.ModuleType(f"{__name__}.{name}", doc)
    m.__dict__.update(attrs)
    sys.modules[m.__name__] = m
    return m


# -- target ------------------------------------------------------------------------------------
class Target:
    """``Target("cuda")``, ``Target("cuda -arch=sm_90a")``, ``Target("llvm")``: ``kind`` and ``arch``
    (``attrs["arch"]`` too); ``str()`` is the tegula target string (``"cuda:sm_90a"``, ``"cpu"``)."""

    def __init__(self, target: Any, host: Any = None):
        text = str(target).strip()
        parts = text.split()
        kind = parts[0] if parts else "cuda"
        arch = None
        for p in parts[1:]:
            key, _, value = p.lstrip("-").partition("=")
            if key in ("arch", "mcpu"):
                arch = value
        if ":" in kind:
            kind, arch = kind.split(":", 1)
        self.kind = types.SimpleNamespace(name={"llvm": "llvm", "c": "c"}.get(kind, kind))
        self.arch = arch
        self.attrs = {"arch": arch} if arch else {}
        self.host = host
        self._text = text

    def tegula_target(self) -> str:
        if self.kind.name in ("llvm", "c", "cpu"):
            return "cpu"
        return f"{self.kind.name}:{self.arch}" if self.arch else self.kind.name

    def __str__(self) -> str:
        return self.tegula_target()

    def __repr__(self) -> str:
        return f"Target({self._text!r})"


target = _module("target", "Target descriptions.", Target=Target)


# -- transform ---------------------------------------------------------------------------------
class PassContext:
    """``with PassContext(opt_level=3, config={"tl.disable_tma_lower": True}):`` kernels compiled
    inside get these pass configs (an explicit ``pass_configs=`` wins). Keys are checked as
    ``pass_configs`` are: unknown ones are a ConfigError. ``opt_level`` is accepted."""

    def __init__(self, opt_level: int = 2, required_pass: Any = None, disabled_pass: Any = None,
                 instruments: Any = None, config: Optional[Mapping[str, Any]] = None):
        self.opt_level = opt_level
        self.config = dict(config or {})
        self._cm: Any = None

    def __enter__(self) -> "PassContext":
        self._cm = _pass_context(self.config)
        self._cm.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)
        self._cm = None


transform = _module("transform", "Pass contexts.", PassContext=PassContext)


# -- tirx --------------------------------------------------------------------------------------
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


tirx = _module("tirx", "Expressions: constants, variables, casts, selects, PrimExpr.", const=const,
               IntImm=IntImm, FloatImm=FloatImm, Var=Var, Cast=Cast, Select=Select, Min=Min, Max=Max,
               reinterpret=reinterpret, PrimExpr=_E.Expr, PrimFunc=_PrimFunc)
tir = tirx


# -- ir, IRModule, error --------------------------------------------------------------------------
class IRModule(dict):
    """A named collection of PrimFuncs: ``IRModule({"main": f})``; ``mod["main"]``."""

    def __init__(self, functions: Optional[Mapping[str, Any]] = None):
        super().__init__(functions or {})

    @staticmethod
    def from_expr(func: Any) -> "IRModule":
        return IRModule({"main": func})


def assert_structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> None:
    """AssertionError naming the first difference unless ``lhs`` and ``rhs`` are structurally equal."""
    if isinstance(lhs, IRModule) and isinstance(rhs, IRModule):
        if sorted(lhs) != sorted(rhs):
            raise AssertionError(f"IRModules hold different functions: {sorted(lhs)} vs {sorted(rhs)}")
        for k in lhs:
            _ase(lhs[k], rhs[k], map_free_vars=True)
        return
    _ase(lhs, rhs, map_free_vars=True)


def structural_equal(lhs: Any, rhs: Any, map_free_vars: bool = False) -> bool:
    return _se(lhs, rhs, map_free_vars=True)


ir = _module("ir", "Structural equality, IRModule.", assert_structural_equal=assert_structural_equal,
             structural_equal=structural_equal, IRModule=IRModule, PrimExpr=_E.Expr)
error = _module("error", "Error classes.", TVMError=TVMError, InternalError=InternalError)
