"""ParallelToVec: a ``T.Parallel`` nest that is one elementwise operation on whole UB tiles becomes
that vector op (a ``T.tile.*`` :class:`~tegula.ir.npu.VecOp`), so the emulator runs exactly the
instruction the emitters print.

Which bodies qualify is the vector-op table's (:data:`tegula.ir.vecops.PARALLEL_FORMS`): the body
stores one expression into a whole UB tile at the loop indices; the expression is a load of a
whole UB tile at the loop indices (``copy``), its cast (``cast``), a math call of one (``exp``,
``log`` as ``ln``, ``abs``, ``sqrt``, ``rsqrt``) or a binary operation of such a load with another
one, with a one-value-per-row tile at the row index, or with a value that does not depend on the
loop indices (``add``, ``sub``, ``mul``, ``div``, ``max``, ``min``; operands of the commuting ones
swapped to put the tile first). Other loops stay: the emulator runs them element by element and
the emitters report them.

Before::

    for i, j in T.Parallel(64, 128):
        c_ub[i, j] = T.max(a_ub[i, j], 0.0)

After::

    T.tile.max(c_ub, a_ub, 0.0)
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir import expr as E
from tegula.ir.expr import BufferLoad
from tegula.ir.npu import NpuKernel, VecOp
from tegula.ir.stmt import BufferStore, For, PrimFunc, SeqStmt, Stmt
from tegula.ir.vecops import PARALLEL_FORMS
from tegula.ir.visitor import Mutator, post_order_visit


def parallel_as_vec(s: For) -> Optional[VecOp]:
    """The one vector op ``T.Parallel`` nest ``s`` is, or None (see the module docstring)."""
    loops = []
    body: Any = s
    while isinstance(body, For) and body.kind == "parallel":
        loops.append(body)
        body = body.body
        while isinstance(body, SeqStmt) and len(body.stmts) == 1:
            body = body.stmts[0]
    if not isinstance(body, BufferStore) or body.buffer.scope != "ub":
        return None
    ivars = [lp.var for lp in loops]
    b = body.buffer
    if not _same(body.indices, ivars) or not _same_extents([lp.extent for lp in loops], b.shape):
        return None

    def tile(x: Any) -> Any:
        if not (isinstance(x, BufferLoad) and x.buffer.scope == "ub"):
            return None
        if _same(x.indices, ivars) and tuple(x.buffer.shape) == tuple(b.shape):
            return x.buffer.region()
        if len(ivars) == 2 and _same(x.indices, ivars[:1]) and tuple(x.buffer.shape) == tuple(b.shape[:1]):
            return x.buffer.region()  # one value per row
        return None

    def free(x: Any) -> bool:
        used: list = []
        post_order_visit(x, lambda n: used.append(n) if (isinstance(n, E.Var) and any(n is v for v in ivars))
                         or isinstance(n, BufferLoad) else None)
        return not used

    def vec(form: str, *srcs: Any, **attrs: Any) -> Optional[VecOp]:
        row = PARALLEL_FORMS.get(form)
        return None if row is None else VecOp(row.name, b.region(), tuple(srcs), attrs, span=s.span)

    v = body.value
    if tile(v) is not None:
        return vec("load", tile(v))
    if isinstance(v, E.Cast) and tile(v.value) is not None:
        if b.dtype.is_int and v.value.dtype.is_float:   # T.Cast truncates toward zero
            return vec("cast", tile(v.value), mode="CAST_TRUNC")
        return vec("cast", tile(v.value))
    if isinstance(v, E.Call) and len(v.args) == 1 and tile(v.args[0]) is not None:
        return vec(f"call:{v.name}", tile(v.args[0]))
    if isinstance(v, E.BinOp) and f"binop:{v.op}" in PARALLEL_FORMS:
        x, y = v.a, v.b
        if tile(x) is None and PARALLEL_FORMS[f"binop:{v.op}"].commutes:
            x, y = y, x
        if tile(x) is None:
            return None
        if tile(y) is not None:
            return vec(f"binop:{v.op}", tile(x), tile(y))
        if free(y):
            return vec(f"binop:{v.op}", tile(x), y)
    return None


def _same(xs: Any, ys: Any) -> bool:
    """The same variables, in order (by identity: ``==`` of IR values builds a comparison)."""
    return len(xs) == len(ys) and all(x is y for x, y in zip(xs, ys))


def _same_extents(xs: Any, ys: Any) -> bool:
    """Loop extents equal to a buffer's shape (constants by value, the rest by identity)."""
    def key(e: Any) -> Any:
        return int(e.value) if isinstance(e, E.Const) else e if isinstance(e, int) else id(e)
    return len(xs) == len(ys) and all(key(x) == key(y) for x, y in zip(xs, ys))


class _ToVec(Mutator):
    def visit_For(self, s: For) -> Stmt:
        if s.kind == "parallel":
            op = parallel_as_vec(s)
            return op if op is not None else s
        return self.generic_visit(s)


def parallel_to_vec(func: PrimFunc) -> PrimFunc:
    """ParallelToVec on every NPU kernel of ``func`` (see the module docstring)."""
    found: list = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, NpuKernel) else None)
    if not found:
        return func
    return func.with_body(_ToVec().visit(func.body))


__all__ = ["parallel_to_vec", "parallel_as_vec"]
