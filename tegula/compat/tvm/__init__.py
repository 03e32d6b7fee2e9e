"""``from tilelang import tvm``: a small compatibility package for what TileLang programs touch
of TVM. It is not a TVM: each name maps to tegula's own equivalent.

================================  =============================================================
``tvm.target.Target(s)``          a target description: ``kind``, ``arch``, ``str()``
``tvm.transform.PassContext``     ``with PassContext(config={...}):`` pass configs for the kernels
                                  compiled inside (:func:`tegula.passconfig.pass_context`)
``tvm.tirx.const(v, dtype)``      a tegula IR constant; ``PrimExpr`` is tegula's ``Expr``,
                                  ``IntImm(dtype, v)`` / ``FloatImm(dtype, v)`` constants,
                                  ``Var(name, dtype)`` a variable, ``Cast``, ``Select``,
                                  ``Min``, ``Max``, ``reinterpret`` (``T.reinterpret``);
                                  ``tvm.tir`` is the same module (older TVM's name)
``tvm.tirx.stmt_functor``         ``post_order_visit``, ``pre_order_visit``, ``substitute`` over
                                  tegula's IR (what user code reads of a kernel's IR)
``tvm.DataType``                  :class:`tegula.compat.datatype.DataType`
``tvm.IRModule({"main": f})``     a named collection of PrimFuncs (``tvm.ir.IRModule``)
``tvm.ir.assert_structural_equal``  tegula's structural equality (renaming-insensitive);
                                  ``tvm.ir.PrimExpr`` is tegula's ``Expr``
``tvm.error.InternalError``,      ``TVMError`` is :class:`tegula.errors.TegulaError`, so code that
``tvm.TVMError``                  catches it catches tegula's errors; ``InternalError`` is a subclass
``tvm.testing.requires_package``  skips a test when a package is not installed
================================  =============================================================

Each namespace is a real submodule (``tegula.compat.tvm.tirx``...), so ``import tvm.tirx`` and
``from tvm.ir import PrimExpr`` work where ``tvm`` is aliased (:mod:`tegula.compat.alias`).
"""
from __future__ import annotations

from tegula.compat.datatype import DataType  # noqa: F401 (tvm.DataType)
from tegula.compat.tvm import error, ir, target, testing, tir, tirx, transform  # noqa: F401
from tegula.compat.tvm.error import InternalError, TVMError  # noqa: F401
from tegula.compat.tvm.ir import IRModule, assert_structural_equal, structural_equal  # noqa: F401
from tegula.compat.tvm.target import Target  # noqa: F401
from tegula.compat.tvm.transform import PassContext  # noqa: F401

__version__ = "0.0-tegula"
