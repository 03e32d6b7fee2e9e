"""AutoSchedule's solvers: modulo scheduling of loops and makespan minimisation of straight-line
code, with z3 (the ``npu`` extra) or, without it, an iterative modulo list scheduler. Both take a
:class:`~tegula.backends.npu.sched.tasks.Problem` and return a :class:`Schedule`.

Loops (the formulation of upstream TileLang's 950 AutoSchedule, ``shared/reference/ascend.md``):

- ``start_i = k_i * II + r_i`` with ``0 <= r_i < II``; the stage of a task is ``k_i``;
- a dependency of latency ``l`` at iteration distance ``d``: ``start_v - start_u >= l - II * d``;
  across iterations a multi-buffered buffer ``b`` gives ``d = versions_b`` with
  ``1 <= versions_b <= num_stages`` (or exactly the requested number);
- per memory: ``sum(versions_b * bytes_b) <= capacity`` minus the other buffers' bytes;
- two tasks on one pipe of one core do not overlap modulo II; without ``enable_offset`` the tasks
  of a pipe stay in one II window (one stage, ``r_i + ii_i <= II``), with it a task may wrap;
- ``T.Stage(k)`` fixes ``k_i``.

II is searched from its lower bound ``max(ResMII, RecMII)`` (ResMII: the busiest pipe's summed
II; RecMII: the largest ``latency / distance`` around a dependency cycle, versions at their
upper bounds) up to the sequential schedule: the bound first, then a binary search. Then, at
that II, the fewest buffer versions. z3 runs with ``rlimit`` ``Z3_RLIMIT`` and seed ``Z3_SEED``
(deterministic; an ``unknown`` counts as infeasible). The list scheduler (no z3) tries II = bound,
bound + 1%, ...: at each it solves the dependencies as difference constraints (Bellman-Ford) for
the earliest starts, chains each pipe's tasks in the order of those starts inside one II window,
solves again, and then gives every buffer the fewest versions its placement needs.

Straight-line code: minimise the makespan; each dependency ``start_j >= start_i + l``; two tasks
on one pipe do not overlap (z3: a Boolean per pair chooses the order; list: program order).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.errors import ConfigError
from tegula.backends.npu.sched.tasks import Problem

Z3_RLIMIT = 1_000_000
Z3_SEED = 42


@dataclass
class Schedule:
    """A solved schedule: model quantities (cycles of ``cost.MODEL_VERSION``)."""

    solver: str                 # "z3", "list", "sequential"
    ii: int                     # loops: the initiation interval; straight-line: the makespan
    bound: int                  # max(ResMII, RecMII) (straight-line: the critical path / busiest pipe)
    res_mii: int
    rec_mii: int
    start: dict                 # task index -> start cycle
    versions: dict = field(default_factory=dict)  # buffer name -> versions
    loop: bool = True
    note: str = ""

    def stage(self, i: int) -> int:
        return self.start[i] // self.ii if self.loop and self.ii else 0

    @property
    def stages(self) -> int:
        return 1 + max((self.stage(i) for i in self.start), default=0)

    def summary(self) -> str:
        what = "II" if self.loop else "makespan"
        gap = (self.ii / self.bound - 1) * 100 if self.bound else 0.0
        v = ", ".join(f"{b}={n}" for b, n in sorted(self.versions.items())) or "none"
        return (f"{what} {self.ii} cycles (bound {self.bound} = max(ResMII {self.res_mii}, RecMII "
                f"{self.rec_mii}), +{gap:.1f}%), {self.stages} stage(s), versions: {v} [{self.solver}]")


# -- bounds ------------------------------------------------------------------------------------
def res_mii(p: Problem) -> int:
    busy: dict = {}
    for t in p.tasks:
        if not t.fence:
            busy[(t.core, t.pipe)] = busy.get((t.core, t.pipe), 0) + t.ii
    return max(busy.values(), default=1)


def _distance(p: Problem, d: Any, versions: dict) -> int:
    return versions.get(d.buffer, 1) * d.distance if d.buffer else d.distance


def feasible_recurrence(p: Problem, ii: int, versions: dict) -> bool:
    """No dependency cycle with positive weight ``latency - II * distance`` (Bellman-Ford)."""
    pos = {t.index: i + 1 for i, t in enumerate(p.tasks)}
    edges = [(0, i, 0) for i in pos.values()] + \
        [(pos[d.src], pos[d.dst], d.latency - ii * _distance(p, d, versions)) for d in p.deps]
    return _longest(len(p.tasks) + 1, edges) is not None


def rec_mii(p: Problem, versions: dict) -> int:
    if not p.loop:
        return 0
    hi = max(1, sum(t.latency for t in p.tasks) + 1)
    if not feasible_recurrence(p, hi, versions):
        return hi
    lo = 1
    while lo < hi:
        mid = (lo + hi) // 2
        if feasible_recurrence(p, mid, versions):
            hi = mid
        else:
            lo = mid + 1
    return lo


def upper_versions(p: Problem) -> dict:
    """Each buffer's largest allowed versions (alone in its memory)."""
    out = {}
    for b, n in p.max_versions.items():
        if b in p.fixed_versions:
            out[b] = p.fixed_versions[b]
            continue
        scope, size = p.sizes[b]
        room = p.capacity.get(scope, 1 << 60) - sum(p.fixed_versions.get(o, 1) * s for o, (sc, s)
                                                      in p.sizes.items() if sc == scope and o != b)
        out[b] = max(1, min(n, room // size if size else n))
    return out


def bounds(p: Problem) -> tuple:
    r = res_mii(p)
    c = rec_mii(p, upper_versions(p)) if p.loop else 0
    return r, c, max(r, c, 1)


def sequential_ii(p: Problem) -> int:
    return max(sum(t.latency for t in p.tasks), sum(t.ii for t in p.tasks)) + 1


# -- the list scheduler ------------------------------------------------------------------------
def _versions_for(p: Problem, start: dict, ii: int) -> dict:
    """The fewest versions each buffer needs under ``start`` at ``ii``."""
    need = {b: p.fixed_versions.get(b, 1) for b in p.max_versions}
    for d in p.deps:
        if d.buffer and d.buffer not in p.fixed_versions:
            gap = start[d.src] + d.latency - start[d.dst]
            need[d.buffer] = max(need[d.buffer], -(-gap // (ii * d.distance)) if gap > 0 else 1)
    return need


def _fits(p: Problem, versions: dict) -> bool:
    used: dict = {}
    for b, n in versions.items():
        scope, size = p.sizes[b]
        used[scope] = used.get(scope, 0) + n * size
    return all(u <= p.capacity.get(s, 1 << 60) for s, u in used.items())


def _longest(n: int, edges: list) -> Optional[list]:
    """Longest paths from node 0 (the origin, start 0) over ``edges`` (u, v, w: s_v >= s_u + w);
    None when a cycle is positive or the origin would have to move."""
    dist = [0] * n
    for _ in range(n + 1):
        changed = False
        for u, v, w in edges:
            if dist[u] + w > dist[v]:
                dist[v] = dist[u] + w
                changed = True
        if not changed:
            return dist if dist[0] == 0 else None
    return None


def _list_at(p: Problem, ii: int, versions: dict) -> Optional[dict]:
    """One II: the dependencies as difference constraints, solved for the earliest starts; each
    pipe's tasks then chained in the order of those starts (in its II window, aligned to a stage
    without ``enable_offset``) and solved again. None when the constraints have no solution."""
    pos = {t.index: i + 1 for i, t in enumerate(p.tasks)}   # node 0 is the origin
    n = len(p.tasks) + 1
    base = [(0, pos[t.index], 0) for t in p.tasks]
    base += [(pos[d.src], pos[d.dst], d.latency - ii * _distance(p, d, versions)) for d in p.deps]
    for t in p.tasks:
        if t.stage is not None:
            base += [(0, pos[t.index], t.stage * ii), (pos[t.index], 0, -((t.stage + 1) * ii - 1))]
    dist = _longest(n, base)
    if dist is None:
        return None
    # latest starts that keep the earliest finish (a task with slack may wait for its pipe)
    rev = [(0, pos[t.index], t.latency) for t in p.tasks] + \
        [(v, u, w) for u, v, w in base if u != 0 and v != 0]
    tail = _longest(n, rev) or dist
    horizon = max(tail)
    groups: dict = {}
    for t in p.tasks:
        if not t.fence:
            groups.setdefault((t.core, t.pipe), []).append(t)
    best = None
    for late in (True, False):
        got = _chained(p, ii, n, pos, base, groups, dist,
                       [horizon - tail[i] for i in range(n)] if late else dist)
        if got is not None and (best is None or max(got.values()) < max(best.values())):
            best = got
    return best


def _chained(p: Problem, ii: int, n: int, pos: dict, base: list, groups: dict, dist: list,
             key: list) -> Optional[dict]:
    extra: list = []
    for ts in groups.values():
        ts = sorted(ts, key=lambda t: (key[pos[t.index]], dist[pos[t.index]], t.index))
        for a, b in zip(ts, ts[1:]):
            extra.append((pos[a.index], pos[b.index], a.ii))
        first = ts[0]
        for t in ts[1:]:   # every task within II of the first one
            extra.append((pos[t.index], pos[first.index], t.ii - ii))
    dist = _longest(n, base + extra)
    if dist is None:
        return None
    if not p.enable_offset:   # the window of each pipe aligned to the stage of its first task
        for ts in groups.values():
            k = min(dist[pos[t.index]] for t in ts) // ii
            if max(dist[pos[t.index]] + t.ii for t in ts) > (k + 1) * ii:
                k += 1   # the pipe's tasks spill past the stage: start them one stage later
            for t in ts:
                extra += [(0, pos[t.index], k * ii), (pos[t.index], 0, t.ii - (k + 1) * ii)]
        dist = _longest(n, base + extra)
        if dist is None:
            return None
    return {t.index: dist[pos[t.index]] for t in p.tasks}


def _topological(p: Problem) -> list:
    """Tasks in an order where every distance-0 dependency goes forward (program order, cores
    interleaved by their cross-core edges)."""
    indeg = {t.index: 0 for t in p.tasks}
    out: dict = {}
    for d in p.deps:
        if d.distance == 0 and d.src != d.dst:
            indeg[d.dst] += 1
            out.setdefault(d.src, []).append(d.dst)
    by = {t.index: t for t in p.tasks}
    ready = sorted([i for i, n in indeg.items() if n == 0])
    order = []
    while ready:
        i = ready.pop(0)
        order.append(by[i])
        for j in out.get(i, ()):
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
                ready.sort()
    return order if len(order) == len(p.tasks) else list(p.tasks)


def longest_paths(p: Problem) -> dict:
    """(u, v) -> the longest chain of distance-0 dependencies from u to v (absent: none)."""
    out: dict = {}
    succ: dict = {}
    for d in p.deps:
        if d.distance == 0 and d.src != d.dst:
            succ.setdefault(d.src, []).append(d)
    order = _topological(p)
    for t in order:
        best = {t.index: 0}
        for u in order[order.index(t):]:
            if u.index not in best:
                continue
            for d in succ.get(u.index, ()):
                val = best[u.index] + d.latency
                if val > best.get(d.dst, -1):
                    best[d.dst] = val
        for v, val in best.items():
            if v != t.index:
                out[(t.index, v)] = val
    return out


def _initial_versions(p: Problem) -> dict:
    v = upper_versions(p)
    while not _fits(p, v):
        free = [b for b in v if b not in p.fixed_versions and v[b] > 1]
        if not free:
            break
        big = max(free, key=lambda b: (p.sizes[b][1] * v[b], b))
        v[big] -= 1
    return v


def list_modulo(p: Problem) -> Schedule:
    r, c, lb = bounds(p)
    top = sequential_ii(p)
    v0 = _initial_versions(p)
    j = 0
    while True:
        ii = lb if j == 0 else max(lb + 1, math.ceil(lb * (1 + 0.01 * j)))
        if ii >= top:
            return sequential(p, r, c, lb)
        start = _list_at(p, ii, v0)
        if start is not None:
            v = _versions_for(p, start, ii)
            if _fits(p, v):
                return Schedule("list", ii, lb, r, c, start, v)
        j += 1


def sequential(p: Problem, r: int, c: int, lb: int) -> Schedule:
    """Every task after the previous one finished, one iteration at a time."""
    start: dict = {}
    t0 = 0
    for t in _topological(p):
        start[t.index] = t0
        t0 += t.latency
    ii = max(t0, 1)
    return Schedule("sequential", ii, lb, r, c, start,
                    {b: p.fixed_versions.get(b, 1) for b in p.max_versions}, p.loop,
                    note="no better schedule found: iterations run one after another")


# -- z3 ----------------------------------------------------------------------------------------
def have_z3() -> bool:
    try:
        import z3  # noqa: F401
    except ImportError:
        return False
    return True


class _Z3Loop:
    """The modulo problem at one II as SMT-LIB text (parsed by z3 in one call: building the
    terms through the Python API costs more than solving them)."""

    def __init__(self, p: Problem):
        import z3

        self.z3, self.p = z3, p
        self.path = longest_paths(p)   # pairs the dependencies already order need no disjunction
        self.groups: dict = {}
        for t in p.tasks:
            if not t.fence:
                self.groups.setdefault((t.core, t.pipe), []).append(t)

    def text(self, ii: int) -> str:
        p, n = self.p, len(self.p.tasks)
        out = []
        for t in p.tasks:
            i = t.index
            out.append(f"(declare-const k{i} Int)(declare-const r{i} Int)"
                       f"(assert (and (>= r{i} 0) (< r{i} {ii}) (>= k{i} 0) (<= k{i} {n})))")
            if t.stage is not None:
                out.append(f"(assert (= k{i} {t.stage}))")
        for b, hi in p.max_versions.items():
            out.append(f"(declare-const v_{b} Int)")
            fixed = p.fixed_versions.get(b)
            out.append(f"(assert (= v_{b} {fixed}))" if fixed is not None else
                       f"(assert (and (>= v_{b} 1) (<= v_{b} {hi})))")

        def st(i: int) -> str:
            return f"(+ (* {ii} k{i}) r{i})"
        for d in p.deps:
            rhs = f"(- {d.latency} (* {ii * d.distance} v_{d.buffer}))" if d.buffer else \
                str(d.latency - ii * d.distance)
            out.append(f"(assert (>= (- {st(d.dst)} {st(d.src)}) {rhs}))")
        for scope, cap in p.capacity.items():
            terms = [f"(* {size} v_{b})" for b, (sc, size) in p.sizes.items() if sc == scope]
            if terms:
                out.append(f"(assert (<= (+ 0 {' '.join(terms)}) {cap}))")
        for ts in self.groups.values():
            for a_i, a in enumerate(ts):
                if not p.enable_offset:
                    out.append(f"(assert (<= (+ r{a.index} {a.ii}) {ii}))")
                for b in ts[a_i + 1:]:
                    sa, sb = st(a.index), st(b.index)
                    if self.path.get((a.index, b.index), -1) < a.ii and \
                            self.path.get((b.index, a.index), -1) < b.ii:
                        out.append(f"(assert (or (<= (+ {sa} {a.ii}) {sb}) (<= (+ {sb} {b.ii}) {sa})))")
                    if p.enable_offset:   # one II-long window at any offset
                        out.append(f"(assert (and (<= (- (+ {sb} {b.ii}) {sa}) {ii}) "
                                   f"(<= (- (+ {sa} {a.ii}) {sb}) {ii})))")
                    else:                 # one stage
                        out.append(f"(assert (= k{a.index} k{b.index}))")
        return "\n".join(out)

    def solve(self, ii: int) -> Optional[tuple]:
        z3 = self.z3
        s = z3.Solver()
        s.set("rlimit", Z3_RLIMIT)
        s.set("random_seed", Z3_SEED)
        s.from_string(self.text(ii))
        if s.check() != z3.sat:
            return None
        m = s.model()
        vals = {d.name(): m[d].as_long() for d in m.decls()}
        start = {t.index: vals.get(f"k{t.index}", 0) * ii + vals.get(f"r{t.index}", 0)
                 for t in self.p.tasks}
        vers = {b: vals.get(f"v_{b}", 1) for b in self.p.max_versions}
        return start, vers


def z3_modulo(p: Problem) -> Schedule:
    r, c, lb = bounds(p)
    first = list_modulo(p)   # a feasible II (the list scheduler's) bounds the search
    if first.solver == "list" and first.ii == lb:
        first.note = "the list schedule meets the bound; z3 had nothing to improve"
        return first
    solver = _Z3Loop(p)
    got = solver.solve(lb)
    ii = lb
    if got is None:
        hi, best = (first.ii, (first.start, first.versions)) if first.solver == "list" else \
            (sequential_ii(p), None)
        lo = lb + 1
        tol = max(1, lb // 100)   # stop within 1% of the best II
        while hi - lo >= tol:
            mid = (lo + hi) // 2
            res = solver.solve(mid)
            if res is not None:
                hi, best = mid, res
            else:
                lo = mid + 1
        if best is None:
            return sequential(p, r, c, lb)
        ii, got = hi, best
    start, vers = got
    # the fewest versions this placement needs (never more than the solver's)
    need = _versions_for(p, start, ii)
    vers = {b: min(vers[b], need[b]) if b not in p.fixed_versions else vers[b] for b in vers}
    return Schedule("z3", ii, lb, r, c, start, vers)


def z3_straight(p: Problem) -> Schedule:
    import z3

    first = list_straight(p)
    if first.ii == first.bound:   # the list schedule meets the bound: nothing for z3 to improve
        first.note = "the list schedule meets the bound; z3 had nothing to improve"
        return first
    r, _, _ = bounds(p)
    crit = _critical_path(p)
    lb = max(r, crit)
    top = first.ii
    st = {t.index: z3.Int(f"s{t.index}") for t in p.tasks}

    def check(span: int) -> Optional[dict]:
        s = z3.Solver()
        s.set("rlimit", Z3_RLIMIT)
        s.set("random_seed", Z3_SEED)
        for t in p.tasks:
            s.add(st[t.index] >= 0, st[t.index] + t.latency <= span)
        for d in p.deps:
            s.add(st[d.dst] - st[d.src] >= d.latency)
        groups: dict = {}
        for t in p.tasks:
            if not t.fence:
                groups.setdefault((t.core, t.pipe), []).append(t)
        for ts in groups.values():
            for i, a in enumerate(ts):
                for b in ts[i + 1:]:
                    s.add(z3.Or(st[a.index] + a.ii <= st[b.index], st[b.index] + b.ii <= st[a.index]))
        if s.check() != z3.sat:
            return None
        m = s.model()
        return {i: m.eval(x).as_long() for i, x in st.items()}
    best = check(lb)
    span = lb
    if best is None:
        lo, hi = lb + 1, top
        while lo < hi:
            mid = (lo + hi) // 2
            got = check(mid)
            if got is not None:
                hi, best = mid, got
            else:
                lo = mid + 1
        span = hi
    if best is None:
        return first
    return Schedule("z3", span, lb, r, crit, best, {}, loop=False)


def _critical_path(p: Problem) -> int:
    finish: dict = {}
    preds: dict = {}
    for d in p.deps:
        preds.setdefault(d.dst, []).append(d)
    for t in _topological(p):
        s0 = max((finish[d.src] - _lat(p, d.src) + d.latency for d in preds.get(t.index, ())
                  if d.src in finish), default=0)
        finish[t.index] = s0 + t.latency
    return max(finish.values(), default=0)


def _lat(p: Problem, i: int) -> int:
    return next(t.latency for t in p.tasks if t.index == i)


def list_straight(p: Problem) -> Schedule:
    r, _, _ = bounds(p)
    crit = _critical_path(p)
    start: dict = {}
    free: dict = {}
    preds: dict = {}
    for d in p.deps:
        preds.setdefault(d.dst, []).append(d)
    end = 0
    for t in _topological(p):
        s0 = max((start[d.src] + d.latency for d in preds.get(t.index, ()) if d.src in start),
                 default=0)
        if not t.fence:
            s0 = max(s0, free.get((t.core, t.pipe), 0))
            free[(t.core, t.pipe)] = s0 + t.ii
        start[t.index] = s0
        end = max(end, s0 + t.latency)
    return Schedule("list", max(end, 1), max(r, crit), r, crit, start, {}, loop=False)


def solve(p: Problem, solver: str = "auto") -> Schedule:
    """Schedule ``p`` with ``solver``: "z3", "list", or "auto" (z3 when installed)."""
    if solver not in ("auto", "z3", "list"):
        raise ConfigError(f"tegula.npu_scheduler: {solver!r} is not a scheduler",
                          hint='use "auto", "z3" or "list"')
    if solver == "z3" and not have_z3():
        raise ConfigError("tegula.npu_scheduler='z3' needs the z3-solver package",
                          hint="pip install tegula[npu], or use the list scheduler ('list' / 'auto')")
    use_z3 = solver == "z3" or (solver == "auto" and have_z3())
    if p.loop:
        return z3_modulo(p) if use_z3 else list_modulo(p)
    return z3_straight(p) if use_z3 else list_straight(p)


__all__ = ["Schedule", "solve", "bounds", "have_z3", "Z3_RLIMIT", "Z3_SEED"]
