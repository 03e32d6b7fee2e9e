"""The shared buffers a statement reads and writes (its loads, stores and builtins, as
:mod:`tegula.ir.effects` declares them), and which statements are barriers: shared by InsertBarriers,
shared-memory liveness and the disjoint-stores proof.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir import dtype as dt
from tegula.ir.effects import builtin_effects, pointed_buffer
from tegula.ir.expr import Builtin, BufferLoad, Const
from tegula.ir.stmt import BufferStore, Evaluate, Stmt
from tegula.ir.visitor import Visitor



def is_sync(s: Stmt, name: str = "sync_threads", bar_id: Optional[int] = None) -> bool:
    """``s`` is the barrier ``name`` (with ``bar_id``: the named barrier of that id, not another
    one, such as the turns of ping-pong warpgroups)."""
    if not (isinstance(s, Evaluate) and isinstance(s.value, Builtin) and s.value.name == name):
        return False
    return bar_id is None or (isinstance(s.value.args[0], Const) and s.value.args[0].value == bar_id)


class _Access(Visitor):
    def __init__(self, ordering: bool = False) -> None:
        self.reads: set = set()
        self.writes: set = set()
        self.ordering = ordering

    def visit_BufferLoad(self, n: BufferLoad) -> None:
        if n.buffer.is_shared:
            self.reads.add(n.buffer)
        self.generic_visit(n)

    def visit_BufferStore(self, n: BufferStore) -> None:
        if n.buffer.is_shared:
            self.writes.add(n.buffer)
        self.generic_visit(n)

    def visit_Builtin(self, n: Builtin) -> None:
        # what the threads' barriers need not order: mbarrier calls (synchronization themselves)
        # and TMA loads (the copy engine's, ordered by their mbarrier); liveness still sees them
        decl = builtin_effects(n.name)
        if self.ordering and decl.mbarrier_ordered:
            return
        for pos, a in enumerate(n.args):
            load = pointed_buffer(a)
            if load is not None:
                if load.buffer.is_shared:
                    if decl.reads_arg(pos):
                        self.reads.add(load.buffer)
                    if decl.writes_arg(pos):
                        self.writes.add(load.buffer)
                for i in load.indices:
                    self.visit(i)
                continue
            self.visit(a)


def accesses(s: Any, ordering: bool = False) -> tuple[set, set]:
    """The shared buffers ``s`` reads and writes (``ordering``: only those the threads' barriers
    must order)."""
    v = _Access(ordering)
    v.visit(s)
    return v.reads, v.writes


def barrier() -> Stmt:
    """``__syncthreads()``."""
    return Evaluate(Builtin("sync_threads", (), dt.bool_))
