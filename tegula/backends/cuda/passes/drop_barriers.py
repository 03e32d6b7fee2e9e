"""DropBarriers (pass config ``tegula.drop_barriers``): remove every barrier of the lowered kernel.

For learning and for testing the checkers, not for use: with every ``__syncthreads()``, named
barrier ``bar.sync`` and mbarrier wait gone, threads hand shared memory to each other unordered and
``cuda-emu`` reports the first race it sees (the element, both threads, both lines). It runs last
(after ``InsertBarriers`` and ``PlanSharedMemory``, which place most of them, and after the
barriers ``PipelineCopies``, ``TmaPipeline`` and the reductions' lowering put in), so it drops
them all; in a thread-level kernel it drops the ones the kernel's author wrote as well::

    T.copy(A_s, x)                                   T.copy(A_s, x)
    T.sync_threads()                                 A_s[tx] = ...
    A_s[tx] = ...                      ->            T.mbarrier_wait(...) dropped too
    T.mbarrier_wait(k_full[s], phase)
"""
from __future__ import annotations

from typing import Any

from tegula.ir.expr import Builtin
from tegula.ir.stmt import Evaluate, PrimFunc, SeqStmt, Stmt
from tegula.ir.visitor import Mutator

BARRIERS = ("sync_threads", "tl::named_barrier_sync", "tl::mbarrier_wait")


def is_barrier(s: Any) -> bool:
    """Whether ``s`` is a statement that only waits: a block barrier or an mbarrier wait."""
    return isinstance(s, Evaluate) and isinstance(s.value, Builtin) and s.value.name in BARRIERS


def drop_barriers(func: PrimFunc) -> PrimFunc:
    """``func`` without any barrier statement (:data:`BARRIERS`)."""

    class M(Mutator):
        def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
            kept = tuple(self.visit(x) for x in s.stmts if not is_barrier(x))
            return SeqStmt(kept)

        def visit_Evaluate(self, e: Evaluate) -> Stmt:
            return SeqStmt(()) if is_barrier(e) else e

    return M().visit(func)
