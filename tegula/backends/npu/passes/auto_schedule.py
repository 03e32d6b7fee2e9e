"""AutoSchedule: each ``T.Pipelined`` loop of an NPU kernel is modulo-scheduled and each run of
tile operations in straight-line code gets a makespan-minimal order (``tegula/backends/npu/sched``
has the formulation and the solvers). The schedule becomes the program:

- buffer versions: the loop's ``versions`` annotation (buffer -> count), which MultiBuffer turns
  into rings and InsertSync into ring flags (so the emulator checks every schedule);
- task order: the tasks of each core are reordered by their start cycle (never across a flag,
  barrier or let), so each pipe's in-order queue receives them in the schedule's order; a pipe's
  tasks lie in one II window, which is what keeps that order consistent across iterations;
- stages: a task of stage s runs s iterations behind the first stage; with the rings the pipes
  that feed it run ahead by that many iterations at run time.

Versions: a buffer may be multi-buffered when its first access in the body writes all of it and
nothing outside the loop uses it. In the A2/A3 dialect ``num_stages=S`` asks for exactly S
versions of the tiles the loop loads from GM (the other buffers get 1..S, the solver's choice);
in the 950 dialect ``num_stages`` is the upper bound for all; ``T.annotate_buffer_versions`` pins
a buffer's count. A request that does not fit its memory is a ResourceError at the loop naming
the memory, the bytes and the buffers, with the largest ``num_stages`` that fits.

Two pipelined loops of one kernel, one on the cube and one on the vector cores, with the same
extent and cross-core flags in both, are scheduled together (one II, the flags as dependencies).

Before::

    for k in T.Pipelined(8, num_stages=2):
        T.copy(A[..], A_L1)
        T.copy(B[..], B_L1)
        T.copy(A_L1, A_L1_l0a)
        T.copy(B_L1, B_L1_l0b)
        T.mma(A_L1_l0a, B_L1_l0b, C_L0, init=k == 0)

After (the kernel annotation ``schedules`` holds II 532, bound 532, 2 stages)::

    for k in T.Pipelined(8, num_stages=2, versions={'A_L1': 2, 'B_L1': 2, 'A_L1_l0a': 2, ...}):
        ...same statements, in start order...
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from tegula.errors import ResourceError
from tegula.ir.buffer import BufferRegion
from tegula.ir.npu import NPU_SCOPES, CoreScope, NpuKernel, SetCrossFlag, WaitCrossFlag
from tegula.ir.stmt import Copy, For, PrimFunc, SeqStmt, Stmt
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.npu import cost
from tegula.backends.npu.passes.infer_fractal_layout import layout_for
from tegula.backends.npu.passes.multi_buffer import VERSIONS
from tegula.backends.npu.sched import SCHEDULES
from tegula.backends.npu.sched.solvers import Schedule, solve
from tegula.backends.npu.sched.tasks import (TILE_OPS, Problem, dependencies, first_access_writes_all,
                                             flatten, make_tasks, schedulable)


@dataclass
class LoopSchedule:
    """One scheduled loop (or straight-line region): where, its tasks and the schedule."""

    where: str
    line: Optional[int]
    schedule: Schedule
    tasks: list
    machine: str

    def __repr__(self) -> str:
        return f"<{self.where}: {self.schedule.summary()}>"

    def report(self) -> str:
        """A table: one task a line with core, pipe, latency, II, start and stage (modelled)."""
        s = self.schedule
        lines = [f"{self.where} on {self.machine}: {s.summary()}  (modelled, {cost.MODEL_VERSION})"]
        for t in sorted(self.tasks, key=lambda t: (s.start[t.index], t.index)):
            if t.fence:
                continue
            lines.append(f"  {t.label():34s} {t.core} {t.pipe:5s} lat {t.latency:6d} ii {t.ii:6d} "
                         f"start {s.start[t.index]:7d} stage {s.stage(t.index)}")
        return "\n".join(lines)


def _aligned_bytes(b: Any, m: Any, shape: Optional[tuple] = None) -> int:
    shape = tuple(int(d) for d in (shape or b.shape))
    n = layout_for(b.scope, b.dtype.itemsize).numel(shape) * b.dtype.itemsize
    align = m.buffer(b.scope).align
    return -(-n // align) * align


def _regions(s: Any) -> list:
    out: list = []
    post_order_visit(s, lambda n: out.append(n) if isinstance(n, BufferRegion) else None)
    return out


def _has_cross(s: Any) -> bool:
    found: list = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, (SetCrossFlag, WaitCrossFlag)) else None)
    return bool(found)


def _where(s: Any) -> str:
    sp = getattr(s, "span", None)
    return f"{sp.file.rsplit('/', 1)[-1]}:{sp.line}" if sp is not None else "<unknown line>"


class _Scheduler:
    def __init__(self, k: NpuKernel, m: Any, solver: str):
        self.k, self.m, self.solver = k, m, solver
        self.hints = k.annotations.get("schedule_hints", {})
        self.pinned = dict(k.annotations.get("buffer_versions", {}))
        self.a5 = k.annotations.get("dialect") == "a5"
        self.results: list = []
        self.repl: dict = {}   # For -> new For
        self.static = all(isinstance(d, int) for b in k.allocs if b.scope in NPU_SCOPES for d in b.shape)

    # -- finding the loops -------------------------------------------------------------------
    def loops(self) -> list:
        found: list = []

        def walk(s: Any, core: Optional[str]) -> None:
            if isinstance(s, CoreScope):
                walk(s.body, s.kind)
            elif isinstance(s, SeqStmt):
                for x in s.stmts:
                    walk(x, core)
            elif isinstance(s, For):
                if s.kind == "pipelined":
                    found.append((s, core))
                else:
                    walk(s.body, core)
            elif hasattr(s, "then"):
                walk(s.then, core)
                if getattr(s, "else_", None) is not None:
                    walk(s.else_, core)
            elif hasattr(s, "body") and isinstance(getattr(s, "body"), Stmt):
                walk(s.body, core)
        walk(self.k.body, None)
        groups: list = []
        cs = [f for f, c in found if c == "C" and _has_cross(f.body)]
        vs = [f for f, c in found if c == "V" and _has_cross(f.body)]
        paired: set = set()
        for c_loop, v_loop in zip(cs, vs):
            if repr(c_loop.extent) == repr(v_loop.extent):
                groups.append([(c_loop, "C"), (v_loop, "V")])
                paired.update((c_loop, v_loop))
        for f, c in found:
            if f not in paired:
                groups.append([(f, c)])
        return groups

    # -- one loop group ----------------------------------------------------------------------
    def schedule_loops(self, group: list) -> None:
        per_core: list = []
        for f, core in group:
            stmts = flatten(f.body)
            if core is None and all(isinstance(x, CoreScope) for x in stmts):
                for cs in stmts:
                    per_core.append((f, cs.kind, flatten(cs.body), cs))
            elif core is not None:
                per_core.append((f, core, stmts, None))
            else:
                return
        for _, _, stmts, _ in per_core:
            if schedulable(stmts) is not None or not self.static:
                return
        tasks: list = []
        for _, core, stmts, _ in per_core:
            tasks += make_tasks(stmts, core, self.m, self.hints, first=len(tasks))
        if not [t for t in tasks if not t.fence]:
            return
        head = group[0][0]
        stages = max(int(f.annotations.get("num_stages", 1) or 1) for f, _ in group)
        inside = {id(r) for f, _ in group for r in _regions(f.body)}
        outside = {r.buffer for r in _regions(self.k.body) if id(r) not in inside}
        filled = {t.stmt.dst.buffer for t in tasks if isinstance(t.stmt, Copy)
                  and t.stmt.src.buffer.scope == "global"}
        p = Problem(tasks, [], loop=True, span=head.span,
                    enable_offset=any(bool(f.annotations.get("enable_offset")) for f, _ in group))
        versionable = []
        for b in dict.fromkeys(b for t in tasks for b in t.writes):
            if b.scope not in NPU_SCOPES or b in outside or b.scope not in self.m.buffers:
                continue
            core_tasks = [t for t in tasks if b in t.reads or b in t.writes]
            if first_access_writes_all(core_tasks, b):
                versionable.append(b)
        for b in versionable:
            if b.name in self.pinned:
                p.fixed_versions[b.name] = self.pinned[b.name]
            elif b in filled and not self.a5:
                p.fixed_versions[b.name] = stages
            p.max_versions[b.name] = max(stages, p.fixed_versions.get(b.name, 1))
            p.sizes[b.name] = (b.scope, _aligned_bytes(b, self.m))
        vnames = {b.name for b in versionable}
        for scope in {b.scope for b in versionable}:
            other = sum(_aligned_bytes(b, self.m) for b in self.k.allocs
                        if b.scope == scope and b.name not in vnames)
            p.fixed_bytes[scope] = other
            p.capacity_total[scope] = self.m.buffer(scope).capacity
            p.capacity[scope] = self.m.buffer(scope).capacity - other
        self.check_capacity(p, group, stages)
        p.deps = dependencies(tasks, True, vnames, cost.CROSS_FLAG_LATENCY)
        sched = solve(p, self.solver)
        where = f"loop {head.var.name} at {_where(head)}" + \
            (f" with loop {group[1][0].var.name} at {_where(group[1][0])}" if len(group) > 1 else "")
        self.results.append(LoopSchedule(where, head.span.line if head.span else None, sched, tasks,
                                         self.m.name))
        # materialize: order, versions
        by_pos = 0
        new_bodies: dict = {}
        for f, core, stmts, cs in per_core:
            mine = tasks[by_pos:by_pos + len(stmts)]
            by_pos += len(stmts)
            order = _reorder(stmts, mine, sched.start)
            new_bodies.setdefault(f, []).append((cs, order))
        for f, parts in new_bodies.items():
            if parts[0][0] is None:
                body = SeqStmt(tuple(parts[0][1]))
            else:
                body = SeqStmt(tuple(dataclasses.replace(cs, body=SeqStmt(tuple(o))) for cs, o in parts))
            vers = {b: n for b, n in sched.versions.items() if n > 1 and
                    any(r.buffer.name == b for r in _regions(f.body))}
            ann = {k: v for k, v in f.annotations.items() if k != VERSIONS}
            ann[VERSIONS] = vers   # also when empty: MultiBuffer then keeps one version of each
            self.repl[f] = dataclasses.replace(f, body=body, annotations=ann)

    def check_capacity(self, p: Problem, group: list, stages: int) -> None:
        # memories whose requested versions overflow them first, then the others
        scopes = sorted(p.capacity_total, key=lambda sc: not any(
            p.fixed_versions.get(b, 1) > 1 for b, (s2, _) in p.sizes.items() if s2 == sc))
        for scope in scopes:
            cap = p.capacity_total[scope]
            mine = {b: n for b, (sc, n) in p.sizes.items() if sc == scope}
            need = p.fixed_bytes[scope] + sum(p.fixed_versions.get(b, 1) * n for b, n in mine.items())
            if need <= cap:
                continue
            hw = self.m.buffer(scope).name
            loop = next((f for f, c in group if c == self.m.buffer(scope).core), group[0][0])
            fixed = sorted(b for b in mine if b in p.fixed_versions and p.fixed_versions[b] > 1)
            counts = sorted({p.fixed_versions[b] for b in fixed})
            at = " and ".join(fixed) if len(fixed) <= 2 else ", ".join(fixed[:-1]) + " and " + fixed[-1]
            what = f"at {'/'.join(map(str, counts))} versions of {at}" if fixed else "with one version each"
            fits = None
            for s in range(stages - 1, 0, -1):
                n = p.fixed_bytes[scope] + sum(
                    (s if b in p.fixed_versions and b not in self.pinned else p.fixed_versions.get(b, 1)) * sz
                    for b, sz in mine.items())
                if n <= cap:
                    fits = s
                    break
            if fits is not None:
                hint = f"try num_stages={fits}"
            elif any(b in self.pinned for b in fixed):
                hint = "ask for fewer versions in T.annotate_buffer_versions"
            else:
                hint = "use smaller tiles"
            raise ResourceError(f"infeasible: {hw} needs {need} bytes > {cap} {what}; {hint}",
                                loop.span, hint=hint)

    # -- straight-line code --------------------------------------------------------------------
    def straight(self, stmts: list, core: str) -> list:
        out: list = []
        run: list = []

        def flush() -> None:
            if len(run) >= 2 and schedulable(run) is None and self.static:
                tasks = make_tasks(run, core, self.m, self.hints)
                p = Problem(tasks, dependencies(tasks, False, set(), cost.CROSS_FLAG_LATENCY), loop=False)
                sched = solve(p, self.solver)
                self.results.append(LoopSchedule(f"straight-line code at {_where(run[0])}",
                                                 run[0].span.line if run[0].span else None, sched,
                                                 tasks, self.m.name))
                out.extend(_reorder(run, tasks, sched.start))
            else:
                out.extend(run)
            run.clear()
        for s in stmts:
            if isinstance(s, TILE_OPS):
                run.append(s)
            else:
                flush()
                out.append(s)
        flush()
        return out


def _reorder(stmts: list, tasks: list, start: dict) -> list:
    """``stmts`` in the order of their tasks' starts, never across a fence."""
    out: list = []
    seg: list = []
    for s, t in zip(stmts, tasks):
        if t.fence:
            out.extend(x for _, _, x in sorted(seg, key=lambda e: (e[0], e[1])))
            seg = []
            out.append(s)
        else:
            seg.append((start[t.index], t.position, s))
    out.extend(x for _, _, x in sorted(seg, key=lambda e: (e[0], e[1])))
    return out


class _Apply(Mutator):
    def __init__(self, sch: _Scheduler):
        super().__init__()
        self.sch = sch

    def visit_For(self, s: For) -> Stmt:
        if s in self.sch.repl:
            return self.sch.repl[s]
        return self.generic_visit(s)

    def visit_CoreScope(self, s: CoreScope) -> Stmt:
        body = self.visit(s.body)
        stmts = self.sch.straight(flatten(body), s.kind)
        return dataclasses.replace(s, body=SeqStmt(tuple(stmts)))


def auto_schedule(func: PrimFunc, m: Any, solver: Optional[str] = None) -> PrimFunc:
    """AutoSchedule over every NPU kernel of ``func`` for machine ``m`` (``solver``: "auto",
    "z3" or "list")."""
    class _Kernels(Mutator):
        def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
            sch = _Scheduler(k, m, solver or "auto")
            for g in sch.loops():
                sch.schedule_loops(g)
            body = _Apply(sch).visit(k.body)
            ann = {a: v for a, v in k.annotations.items() if a != "schedule_hints"}
            ann[SCHEDULES] = sch.results
            return dataclasses.replace(k, body=body, annotations=ann)
    return func.with_body(_Kernels().visit(func.body))


__all__ = ["auto_schedule", "LoopSchedule"]
