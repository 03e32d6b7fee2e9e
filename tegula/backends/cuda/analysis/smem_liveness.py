"""Liveness of shared buffers in a lowered kernel: when each one holds a value, and which
barriers every thread passes between two moments of the kernel.

The kernel's statements are numbered in program order (one position per simple statement; a
loop's body once). A buffer is live from the first statement that touches it to the last, and
over the whole of every loop that touches it: its value may flow from one iteration to the next,
and a pipeline's copies issued ahead land in a later iteration. Two exceptions, both from how
lowering builds code:

- *private* scratch (``annotations["smem_private"]``, e.g. a reduction's cross-warp partials) is
  written and read within one execution of the tile op that made it, so a loop around that tile
  op does not stretch its lifetime;
- an asynchronous write (``cp.async``, TMA) outside a pipeline's issue statements may land any
  time later, so such a buffer stays live to the end of the kernel.

A barrier at position ``s`` separates positions ``x < s < y`` when every thread passes it on the
way from ``x`` to ``y``: it is under no condition, and every loop around it is around both (a
loop of constant, positive trip count whose body ends on a barrier also counts as a barrier
just after the loop).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.ir.effects import builtin_effects, pointed_buffer
from tegula.ir.expr import Builtin
from tegula.ir.stmt import AttrStmt, For, IfThenElse, Kernel, SeqStmt, Stmt, While
from tegula.ir.visitor import Visitor
from tegula.backends.cuda.analysis.shared_access import accesses, is_sync



@dataclass
class Loop:
    start: int          # first position inside the loop
    end: int = -1       # last position inside the loop


@dataclass
class Liveness:
    """What :func:`liveness` finds in one kernel."""

    first: dict = field(default_factory=dict)       # buffer -> first live position
    last: dict = field(default_factory=dict)        # buffer -> last live position
    syncs: list = field(default_factory=list)       # (position, loops around it) of uniform barriers
    top: list = field(default_factory=list)         # position -> index of its top-level statement
    loops_at: list = field(default_factory=list)    # position -> loops around it (innermost last)

    def overlap(self, a: Any, b: Any) -> bool:
        """Whether ``a`` and ``b`` are ever live at once (a buffer never touched overlaps nothing)."""
        if a not in self.first or b not in self.first:
            return False
        return not (self.last[a] < self.first[b] or self.last[b] < self.first[a])

    def barrier_between(self, x: int, y: int) -> bool:
        """Whether every thread passes a barrier after position ``x`` and before ``y`` (x < y)."""
        around = set(map(id, self.loops_at[x])) & set(map(id, self.loops_at[y]))
        return any(x < s < y and set(map(id, loops)) <= around for s, loops in self.syncs)

    def back_edge_barrier(self, a: Any, b: Any) -> bool:
        """For buffers both live inside one loop (``a`` before ``b``): whether a barrier of that
        loop's body lies after ``b`` or before ``a``, so that the next iteration's use of ``a``
        cannot overtake this iteration's use of ``b``. True when no loop is around both."""
        common = [lp for lp in self.loops_at[self.first[a]] if any(lp is m for m in self.loops_at[self.last[b]])]
        if not common:
            return True
        inner = common[-1]
        ids = set(map(id, common))
        for s, loops in self.syncs:
            if set(map(id, loops)) == ids and inner.start <= s <= inner.end \
                    and (s > self.last[b] or s < self.first[a]):
                return True
        return False


class _Walk:
    def __init__(self, private: set) -> None:
        self.live = Liveness()
        self.private = private
        self.loops: list[Loop] = []
        self.cond = 0               # depth of conditions around the current statement
        self.top = 0
        self.tile_op: Optional[AttrStmt] = None
        self.issue = 0              # depth of pipeline_issue statements around
        self.touch: dict = {}       # buffer -> [(position, loops, tile_op)]
        self.async_outside: set = set()
        self.op_start: dict = {}    # id(tile_op AttrStmt) -> its first position
        self.pos = 0

    def leaf(self, s: Any) -> None:
        p = self.pos
        self.pos += 1
        self.live.top.append(self.top)
        self.live.loops_at.append(tuple(self.loops))
        if isinstance(s, Stmt) and is_sync(s):
            if not self.cond:
                self.live.syncs.append((p, tuple(self.loops)))
            return
        for x in (s if isinstance(s, tuple) else (s,)):
            if x is None or isinstance(x, int):
                continue
            r, w = accesses(x)
            for b in r | w:
                self.touch.setdefault(b, []).append((p, tuple(self.loops), self.tile_op))
            if not self.issue:
                self.async_outside |= _async_targets(x)

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for c in s.stmts:
                self.stmt(c)
        elif isinstance(s, (For, While)):
            self.leaf(s.cond if isinstance(s, While) else (s.start, s.extent))
            lp = Loop(self.pos)
            self.loops.append(lp)
            self.stmt(s.body)
            self.loops.pop()
            lp.end = self.pos - 1
            # a loop that runs at least once and ends on a barrier leaves through that barrier
            syncs = self.live.syncs
            if isinstance(s, For) and isinstance(s.extent, int) and s.extent >= 1 and syncs \
                    and syncs[-1][0] == lp.end and syncs[-1][1] == tuple(self.loops) + (lp,):
                syncs.append((lp.end + 0.5, tuple(self.loops)))
        elif isinstance(s, IfThenElse):
            self.leaf(s.cond)
            self.cond += 1
            self.stmt(s.then)
            if s.else_ is not None:
                self.stmt(s.else_)
            self.cond -= 1
        elif isinstance(s, AttrStmt):
            outer_op, outer_issue = self.tile_op, self.issue
            if s.key == "tile_op" and self.tile_op is None:
                self.tile_op = s
                self.op_start[id(s)] = self.pos
            if s.key == "pipeline_issue":
                self.issue += 1
            self.stmt(s.body)
            self.tile_op, self.issue = outer_op, outer_issue
        else:
            self.leaf(s)

    def finish(self) -> Liveness:
        live = self.live
        end = self.pos - 1
        for b, uses in self.touch.items():
            ops = {id(op) for _, _, op in uses}
            private = b in self.private and len(ops) == 1 and uses[0][2] is not None
            lo, hi = uses[0][0], uses[-1][0]
            for p, loops, op in uses:
                # loops around the tile op of private scratch do not carry its value
                keep = loops if not private else [lp for lp in loops if lp.start >= self.op_start[id(op)]]
                for lp in keep:
                    lo, hi = min(lo, lp.start), max(hi, lp.end)
            if b in self.async_outside:
                hi = end
            live.first[b], live.last[b] = lo, hi
        return live


def _async_targets(s: Any) -> set:
    out: set = set()

    class V(Visitor):
        def visit_Builtin(self, n: Builtin) -> None:
            # builtins whose shared-memory operands are written after the statement issuing them
            if builtin_effects(n.name).is_async:
                for a in n.args:
                    load = pointed_buffer(a)
                    if load is not None and load.buffer.is_shared:
                        out.add(load.buffer)
            self.generic_visit(n)

    V().visit(s)
    return out


def liveness(k: Kernel) -> Liveness:
    """The live ranges of ``k``'s shared buffers and its uniform barriers."""
    w = _Walk(set(k.annotations.get("smem_private") or ()))
    stmts = list(k.body.stmts) if isinstance(k.body, SeqStmt) else [k.body]
    for i, s in enumerate(stmts):
        w.top = i
        w.stmt(s)
    live = w.finish()
    for b in k.alloc_inits:  # initialised at launch: live from the start
        if b in live.first:
            live.first[b] = 0
    return live
