"""Tasks and dependencies: the lowered NPU program cut into single-pipe, single-core units.

Every tile operation of a statement list is one :class:`Task` on the pipe that runs it
(``pipe_of``), on the core kind of its ``T.Scope``, with latency and II from
:mod:`tegula.backends.npu.cost` (or from ``T.Task(latency=, ii=)``, and a stage from
``T.Stage(k)``). Sync statements the kernel holds (flags, barriers, cross-core flags) and scalar
statements (lets) become *fences*: tasks of zero cost that keep their place in program order, so
a schedule never moves an operation across them.

Dependencies (:class:`Dep`, ``start[dst] - start[src] >= latency - II * distance``):

- two accesses of one core to one buffer, one a write (RAW / WAR / WAW): from the earlier to the
  later in program order (distance 0) and from the later to the earlier one of the next iteration
  (distance 1); across iterations a multi-buffered buffer (``versioned``) gives distance
  ``versions[b]``, a variable of the schedule;
- sync statements: a blocking one (``wait_cross_flag``, ``barrier_all``) comes before every task
  after it (and, across iterations, before the tasks ahead of the first one); a set, wait or
  barrier of a pipe keeps its place in that pipe's in-order queue (a set after the completion of
  the pipe's earlier tasks); the n-th set of an intra-core flag feeds its n-th wait; tasks of one
  pipe keep their order across sync statements (the schedule reorders only between them);
- cross-core: ``set_cross_flag(f)`` of one core to ``wait_cross_flag(f)`` of the other core in the
  same iteration, with the flag's latency.

A buffer may be multi-buffered when its first access in the loop body writes all of it and
nothing outside the loop uses it (MultiBuffer then gives it a ring of versions).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import Const
from tegula.ir.npu import (BarrierAll, CoreScope, Mma, PipeBarrier, SetCrossFlag, SetFlag, VecOp,
                           WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import Copy, Fill, For, LetStmt, Reduce, SeqStmt, Stmt
from tegula.backends.npu import cost
from tegula.backends.npu.access import pipe_of, region_accesses

TILE_OPS = (Copy, Mma, VecOp, Reduce, Fill)
SYNC = (SetFlag, WaitFlag, PipeBarrier, BarrierAll, SetCrossFlag, WaitCrossFlag)
BLOCKING = (WaitCrossFlag, BarrierAll)   # stop the scalar unit: nothing after them issues earlier
SETS = (SetFlag, SetCrossFlag, PipeBarrier)  # fire once the earlier work of their pipe is done
PIPE_MASK = {"MTE1": 1, "MTE2": 2, "MTE3": 4, "M": 8, "V": 16, "FIX": 32, "S": 64}


@dataclass
class Task:
    """One single-pipe, single-core unit of work (or a fence: ``fence`` True, zero cost)."""

    index: int
    stmt: Any
    core: str            # "C" or "V"
    pipe: str
    latency: int
    ii: int
    source: str          # where the cost comes from (a cost.SOURCES key, or "T.Task")
    reads: tuple = ()
    writes: tuple = ()
    fence: bool = False
    stage: Optional[int] = None   # T.Stage(k)
    position: int = 0    # program order within its core's statement list

    @property
    def line(self) -> Optional[int]:
        sp = getattr(self.stmt, "span", None)
        return sp.line if sp is not None else None

    @property
    def mask(self) -> int:
        return PIPE_MASK.get(self.pipe, 64)

    def label(self) -> str:
        f = _LABELS.get(type(self.stmt))
        what = f(self.stmt) if f is not None else type(self.stmt).__name__
        return f"{what}@{self.line}" if self.line is not None else what


# how a task names its statement (region_accesses gives every read, accumulators' included)
_LABELS: dict = {
    Copy: lambda s: f"copy {s.src.buffer.name}->{s.dst.buffer.name}",
    Mma: lambda s: f"mma {s.C.buffer.name}",
    VecOp: lambda s: f"{s.op} {s.dst.buffer.name}",
    Reduce: lambda s: f"reduce_{s.kind} {s.dst.buffer.name}",
    SetCrossFlag: lambda s: "set_cross_flag",
    WaitCrossFlag: lambda s: "wait_cross_flag",
}


@dataclass(frozen=True)
class Dep:
    src: int
    dst: int
    latency: int
    distance: int = 0
    buffer: Optional[str] = None   # set: the distance is versions[buffer] (a schedule variable)
    kind: str = "order"


@dataclass
class Problem:
    """What AutoSchedule solves for one loop (or one straight-line region)."""

    tasks: list
    deps: list
    loop: bool = True
    max_versions: dict = field(default_factory=dict)   # buffer name -> upper bound
    fixed_versions: dict = field(default_factory=dict)  # buffer name -> exact (requested)
    sizes: dict = field(default_factory=dict)          # buffer name -> (scope, bytes of one version)
    capacity: dict = field(default_factory=dict)       # scope -> bytes left for versioned buffers
    capacity_total: dict = field(default_factory=dict)  # scope -> the memory's capacity
    fixed_bytes: dict = field(default_factory=dict)     # scope -> bytes of the other buffers
    enable_offset: bool = False
    span: Any = None


def flatten(s: Stmt) -> list:
    """The statements of a body in order, nested sequences opened."""
    if isinstance(s, SeqStmt):
        return [x for y in s.stmts for x in flatten(y)]
    return [s]


def _const(e: Any) -> Optional[int]:
    if isinstance(e, int):
        return e
    if isinstance(e, Const):
        return int(e.value)
    return None


def schedulable(stmts: list) -> Optional[Stmt]:
    """None when every statement is a tile op, a T.Parallel nest, a sync statement or a let;
    else the first statement AutoSchedule cannot treat as a task."""
    for s in stmts:
        if isinstance(s, TILE_OPS + SYNC + (LetStmt,)):
            continue
        if isinstance(s, For) and s.kind == "parallel":
            continue
        return s
    return None


def make_tasks(stmts: list, core: str, machine: Any, hints: dict, first: int = 0) -> list:
    """One task per statement of ``stmts`` (all on core kind ``core``)."""
    out = []
    for pos, s in enumerate(stmts):
        idx = first + pos
        h = hints.get(getattr(s, "span", None) and s.span.line, {}) if hints else {}
        if isinstance(s, SYNC) or isinstance(s, LetStmt):
            pipe = s.pipe if isinstance(s, (SetCrossFlag, PipeBarrier)) else \
                s.src if isinstance(s, SetFlag) else s.dst if isinstance(s, WaitFlag) else "S"
            out.append(Task(idx, s, core, pipe, 0, 0, "fence", fence=True, position=pos))
            continue
        pipe = pipe_of(s, machine)
        c = cost.op_cost(s, machine, pipe)
        lat, ii, src = c.latency, c.ii, c.source
        if "latency" in h or "ii" in h:
            lat = h.get("latency", lat)
            ii = min(h.get("ii", ii), lat) if "ii" in h else min(ii, lat)
            src = "T.Task"
        acc = region_accesses(s)
        out.append(Task(idx, s, core, pipe, int(lat), max(1, int(ii)), src,
                        reads=tuple(dict.fromkeys(r.buffer for r, w in acc if not w)),
                        writes=tuple(r.buffer for r, w in acc if w), stage=h.get("stage"),
                        position=pos))
    return out


def first_access_writes_all(tasks: list, buf: Any) -> bool:
    """True when the first task touching ``buf`` writes all of it and does not read it."""
    for t in tasks:
        if buf in t.reads:
            return False
        if buf in t.writes:
            for r, w in region_accesses(t.stmt):
                if r.buffer is buf and w:
                    return _covers(r)
    return False


def _covers(r: BufferRegion) -> bool:
    shape = r.buffer.shape
    for (st, ex), n in zip(zip(r.starts, r.extents), shape):
        if _const(st) != 0 or _const(ex) != _const(n):
            return False
    return True


def dependencies(tasks: list, loop: bool, versioned: set, cross_latency: int) -> list:
    """The dependencies among ``tasks`` (see the module docstring)."""
    deps: list = []
    by_core: dict = {}
    for t in tasks:
        by_core.setdefault(t.core, []).append(t)
    for core, ts in by_core.items():
        fences = [t for t in ts if t.fence]
        blocking = [f for f in fences if isinstance(f.stmt, BLOCKING)]
        seg = {}
        n = 0
        for t in ts:
            if t.fence:
                n += 1
            seg[t.index] = n
        for j, v in enumerate(ts):
            before = [f for f in blocking if f.position < v.position]
            if before and v is not before[-1]:
                deps.append(Dep(before[-1].index, v.index, 0, 0))
            elif loop and blocking and not before and v is not blocking[0]:
                deps.append(Dep(blocking[-1].index, v.index, 0, 1))
            if v.fence:
                if isinstance(v.stmt, BarrierAll):  # waits for every pipe of its core to drain
                    for u in ts[:j]:
                        if not u.fence:
                            deps.append(Dep(u.index, v.index, u.latency, 0))
                continue
            for u in ts[:j]:
                if u.fence:
                    if u.pipe == v.pipe and not isinstance(u.stmt, BLOCKING):
                        deps.append(Dep(u.index, v.index, 0, 0))   # in order behind a set / wait
                        if loop:
                            deps.append(Dep(v.index, u.index, v.latency, 1))
                    continue
                if u.pipe == v.pipe and seg[u.index] != seg[v.index]:
                    deps.append(Dep(u.index, v.index, u.ii, 0))   # a pipe's queue is in order
                for b, kind in _conflicts(u, v):
                    deps.append(Dep(u.index, v.index, u.latency, 0, kind=kind))
                if loop:
                    for b, kind in _conflicts(v, u):
                        if b.name in versioned:
                            deps.append(Dep(v.index, u.index, v.latency, 1, b.name, kind))
                        else:
                            deps.append(Dep(v.index, u.index, v.latency, 1, kind=kind))
            for f in ts[j + 1:]:   # a set or wait on this pipe stays behind the task
                if f.fence and f.pipe == v.pipe and not isinstance(f.stmt, BLOCKING):
                    deps.append(Dep(v.index, f.index, v.latency if isinstance(f.stmt, SETS) else 0, 0))
                    if loop:
                        deps.append(Dep(f.index, v.index, 0, 1))
            if loop:  # a task against itself in the next iteration (an accumulator, a ring)
                for b, kind in _conflicts(v, v):
                    if b.name in versioned:
                        deps.append(Dep(v.index, v.index, v.latency, 1, b.name, kind))
                    else:
                        deps.append(Dep(v.index, v.index, v.latency, 1, kind=kind))
        for a, b in zip(blocking, blocking[1:]):
            deps.append(Dep(a.index, b.index, 0, 0))
        # intra-core flags: the n-th set of an event and id feeds its n-th wait
        flag_sets: dict = {}
        for t in ts:
            if isinstance(t.stmt, SetFlag):
                flag_sets.setdefault((t.stmt.src, t.stmt.dst, _const(t.stmt.id)), []).append(t)
        seen: dict = {}
        for t in ts:
            if isinstance(t.stmt, WaitFlag):
                key = (t.stmt.src, t.stmt.dst, _const(t.stmt.id))
                i = seen.get(key, 0)
                seen[key] = i + 1
                if i < len(flag_sets.get(key, ())):
                    deps.append(Dep(flag_sets[key][i].index, t.index, cost.FLAG_LATENCY, 0, kind="flag"))
    # cross-core flags: the n-th set of flag f on one core feeds the n-th wait of f on the other
    sets: dict = {}
    for t in tasks:
        if isinstance(t.stmt, SetCrossFlag):
            sets.setdefault((t.core, _const(t.stmt.flag)), []).append(t)
    waits: dict = {}
    for t in tasks:
        if isinstance(t.stmt, WaitCrossFlag):
            f = _const(t.stmt.flag)
            src = [c for c in ("C", "V") if c != t.core and (c, f) in sets]
            n = waits.setdefault((t.core, f), 0)
            waits[(t.core, f)] = n + 1
            if src and n < len(sets[(src[0], f)]):
                deps.append(Dep(sets[(src[0], f)][n].index, t.index, cross_latency, 0, kind="flag"))
    return deps


def _conflicts(u: Task, v: Task) -> list:
    out = []
    for b in dict.fromkeys(u.writes):
        if b in v.reads:
            out.append((b, "raw"))
        elif b in v.writes:
            out.append((b, "waw"))
    for b in dict.fromkeys(u.reads):
        if b in v.writes and b not in u.writes:
            out.append((b, "war"))
    return out


def core_of(s: Stmt, outer: Optional[str]) -> Optional[str]:
    return s.kind if isinstance(s, CoreScope) else outer


__all__ = ["Task", "Dep", "Problem", "flatten", "schedulable", "make_tasks", "dependencies",
           "first_access_writes_all", "PIPE_MASK"]
