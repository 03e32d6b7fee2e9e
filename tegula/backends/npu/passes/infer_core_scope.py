"""InferCoreScope: every NPU tile operation and flag ends up inside a ``T.Scope`` of the core that
runs it, and operations in the wrong scope are errors at their line.

A tile operation's core follows from its buffers (L1 / L0A / L0B / L0C: the cube core "C"; UB:
the vector cores "V"); a flag's from its pipes (M, MTE1, FIX: C; V, MTE3: V). Scalar code (lets,
loops, ifs) stays outside scopes and runs on every core. Consecutive statements of one core
share a scope.

Before::

    with T.Kernel(4, is_npu=True) as (cid, vid):
        a_ub = T.alloc_ub((64, 64), "float16")
        T.copy(A[cid * 64, 0], a_ub)
        T.tile.exp(a_ub, a_ub)
        T.copy(a_ub, B[cid * 64, 0])

After::

    with T.Kernel(4, is_npu=True) as (cid, vid):
        a_ub = T.alloc_ub((64, 64), "float16")
        with T.Scope("V"):
            T.copy(A[cid * 64, 0], a_ub)
            T.tile.exp(a_ub, a_ub)
            T.copy(a_ub, B[cid * 64, 0])
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.errors import ScopeError
from tegula.ir.npu import (BarrierAll, CoreScope, Mma, NpuKernel, PipeBarrier, SetCrossFlag,
                           SetFlag, VecOp, WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import (Copy, Fill, For, IfThenElse, PrimFunc, Reduce, SeqStmt, Stmt, TileOp,
                            While, seq)
from tegula.ir.visitor import Mutator, post_order_visit

CUBE_SCOPES = frozenset({"l1", "l0a", "l0b", "l0c"})
_PIPE_CORE = {"M": "C", "MTE1": "C", "FIX": "C", "V": "V", "MTE3": "V"}
_CORE_NAME = {"C": "cube", "V": "vector"}


def buffer_core(scope: str) -> Optional[str]:
    """The core kind owning memory ``scope`` (None for global and scalar memory)."""
    if scope in CUBE_SCOPES:
        return "C"
    if scope == "ub":
        return "V"
    return None


def op_cores(s: Stmt) -> set:
    """The cores a tile operation or flag must run on (empty: any core)."""
    if isinstance(s, Mma):
        return {"C"}
    if isinstance(s, VecOp):
        return {"V"}
    if isinstance(s, (Copy, Reduce, Fill)):
        regions = (s.src, s.dst) if isinstance(s, (Copy, Reduce)) else (s.dst,)
        return {c for c in (buffer_core(r.buffer.scope) for r in regions) if c}
    if isinstance(s, (SetFlag, WaitFlag)):
        return {c for c in (_PIPE_CORE.get(s.src), _PIPE_CORE.get(s.dst)) if c}
    if isinstance(s, (PipeBarrier, SetCrossFlag)):
        c = _PIPE_CORE.get(s.pipe)
        return {c} if c else set()
    return set()


def _cores(s: Stmt) -> set:
    if isinstance(s, CoreScope):
        return {s.kind}
    if isinstance(s, For) and s.kind == "parallel":  # a T.Parallel nest: vector instructions
        return {"V"}
    if isinstance(s, SeqStmt):
        return set().union(*(_cores(x) for x in s.stmts)) if s.stmts else set()
    if isinstance(s, (For, While)):
        return _cores(s.body)
    if isinstance(s, IfThenElse):
        return _cores(s.then) | (_cores(s.else_) if s.else_ is not None else set())
    return op_cores(s)


def _op_name(s: Stmt) -> str:
    if isinstance(s, VecOp):
        return f"T.tile.{s.op}"
    if isinstance(s, Mma):
        return "T.mma / T.gemm_v0"
    return {"Copy": "T.copy", "Reduce": "T.reduce", "Fill": "T.fill"}.get(type(s).__name__, type(s).__name__)


def check_op(kind: str, s: Stmt) -> None:
    """Raise when operation or flag ``s`` cannot run on core ``kind``."""
    cores = op_cores(s)
    if len(cores) > 1:
        raise ScopeError(f"{_op_name(s)} moves data between the cube and the vector cores "
                         "directly, which this machine cannot do", s.span,
                         hint="hand the tile over through global memory and a cross-core flag")
    if cores and kind not in cores:
        (want,) = cores
        raise ScopeError(f"{_op_name(s)} is a {_CORE_NAME[want]}-core operation and cannot run in "
                         f'T.Scope("{kind}")', s.span, hint=f'move it into T.Scope("{want}")')


def check_scope(kind: str, body: Stmt) -> None:
    """Every operation inside ``T.Scope(kind)`` must run on that core; scopes do not nest."""
    def visit(n: Any) -> None:
        if isinstance(n, CoreScope):
            raise ScopeError(f'T.Scope("{n.kind}") cannot be nested in T.Scope("{kind}")', n.span)
        if isinstance(n, (TileOp, SetFlag, WaitFlag, PipeBarrier, SetCrossFlag)):
            check_op(kind, n)
    post_order_visit(body, visit)


def _wrap(s: Stmt) -> Stmt:
    if isinstance(s, CoreScope):
        check_scope(s.kind, s.body)
        return s
    cores = _cores(s)
    if not cores or isinstance(s, (BarrierAll, WaitCrossFlag)):
        return s
    if isinstance(s, For) and s.kind == "parallel":
        return CoreScope("V", s, span=s.span)
    if len(cores) == 1 and not isinstance(s, SeqStmt) and not _has_scope(s):
        (k,) = cores
        check_scope(k, s)
        return CoreScope(k, s, span=s.span)
    if isinstance(s, SeqStmt):
        out: list = []
        for x in (_wrap(y) for y in s.stmts):
            if isinstance(x, CoreScope) and out and isinstance(out[-1], CoreScope) \
                    and out[-1].kind == x.kind:
                out[-1] = CoreScope(x.kind, seq(out[-1].body, x.body), span=out[-1].span)
            else:
                out.append(x)
        return seq(out)
    if isinstance(s, For):
        return For(s.var, s.start, s.extent, _wrap(s.body), s.kind, s.step, dict(s.annotations),
                   span=s.span)
    if isinstance(s, While):
        return While(s.cond, _wrap(s.body), span=s.span)
    if isinstance(s, IfThenElse):
        return IfThenElse(s.cond, _wrap(s.then), _wrap(s.else_) if s.else_ is not None else None,
                          span=s.span)
    check_op("C", s)  # raises: an operation needing both cores
    return s


def _has_scope(s: Any) -> bool:
    if isinstance(s, CoreScope):
        return True
    if isinstance(s, SeqStmt):
        return any(_has_scope(x) for x in s.stmts)
    if isinstance(s, (For, While)):
        return _has_scope(s.body)
    if isinstance(s, IfThenElse):
        return _has_scope(s.then) or (s.else_ is not None and _has_scope(s.else_))
    return False


class _UbCasts(Mutator):
    """A UB -> UB ``T.copy`` from a float tile to an integer one is the vector unit's conversion,
    ``T.tile.cast`` with ``CAST_RINT``: round to nearest, ties to even, as TileLang-Ascend's
    ``copy_ub_to_ub`` does it (``AscendC::Cast(dst, src, RoundMode::CAST_RINT, n)`` for every pair
    of types but the exact widenings), not the truncation of a C cast."""

    def visit_Copy(self, s: Copy) -> Stmt:
        src, dst = s.src.buffer, s.dst.buffer
        if src.scope == dst.scope == "ub" and src.dtype.is_float and not dst.dtype.is_float:
            return VecOp("cast", s.dst, (s.src,), {"mode": "CAST_RINT"}, span=s.span)
        return s


def infer_kernel(k: NpuKernel) -> NpuKernel:
    """The kernel with scopes inferred (see the module docstring); UB -> UB float -> integer
    copies become the vector unit's rounding conversion (:class:`_UbCasts`)."""
    import dataclasses

    return dataclasses.replace(k, body=_wrap(_UbCasts().visit(k.body)))


class _Kernels(Mutator):
    def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
        return infer_kernel(k)


def infer_core_scope(func: PrimFunc) -> PrimFunc:
    """InferCoreScope over every NPU kernel of ``func``."""
    return func.with_body(_Kernels().visit(func.body))
