"""``tvm.ir``: ``IRModule``, structural equality, ``PrimExpr`` (tegula's ``Expr``)."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from tegula.ir.expr import Expr as PrimExpr  # noqa: F401 (from tvm.ir import PrimExpr)
from tegula.ir.structural import assert_structural_equal as _ase, structural_equal as _se

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
