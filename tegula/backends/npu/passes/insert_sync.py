"""InsertSync: the flags and barriers that order the pipes of each core
(``pass_configs={"tl.ascend_auto_sync": True}``).

Every tile operation runs on one pipe (``pipe_of``). Two operations of one core that touch
overlapping regions of one buffer, one of them writing, need the earlier to finish before the
later starts (regions whose affine starts differ by at least the extent in some dimension are
disjoint and need nothing):

- on different pipes: ``set_flag(src, dst, id)`` right after the statement holding the earlier
  one and ``wait_flag(src, dst, id)`` right before the statement holding the later one, both in
  the innermost statement list holding the two (so a set outside a loop never meets a wait
  inside it); ids 0-7 per HardEvent, never those the kernel uses by hand, reused only once the
  earlier wait is known to be done before the new set (some later operation of the waiting pipe
  is ordered before the setting pipe), else a second set could fire first; when no id qualifies,
  the set moves down to its wait (and, as a last resort, a barrier_all drains the pipes);
- on one pipe: nothing for S, V and M (in order); ``pipe_barrier`` for MTE1/2/3 and FIX;
- across iterations of a loop (the write of iteration k+1 after the read of iteration k): the set
  goes after the earlier statement and the wait before the later one inside the body, pre-armed
  by a set before the loop and drained by a wait after it. A flag set and waited inside the body
  sets again in the next iteration, so it needs such a flag back from its waiting pipe too; when
  that one is a ring over the versions of multi-buffered tiles, the inner flag becomes a ring
  (``id + k % versions``) instead, keeping the iterations overlapped.

Orderings the kernel already has (hand-written flags, barriers, ``barrier_all``, flags inserted
earlier, chains through a third pipe) are not duplicated. Hand-offs through GM between the cube
and the vector cores get cross-core flags first (``cross_core_sync.py``) unless the kernel
writes its own. ``T.Scope`` bodies of one core kind share state.

Before::

    with T.Scope("V"):
        T.copy(A[cid * 64, 0], a_ub)          # MTE2
        T.tile.exp(b_ub, a_ub)                # V
        T.copy(b_ub, B[cid * 64, 0])          # MTE3

After::

    with T.Scope("V"):
        T.copy(A[cid * 64, 0], a_ub)
        T.set_flag("mte2", "v", 0)  # inserted
        T.wait_flag("mte2", "v", 0)  # inserted
        T.tile.exp(b_ub, a_ub)
        T.set_flag("v", "mte3", 0)  # inserted
        T.wait_flag("v", "mte3", 0)  # inserted
        T.copy(b_ub, B[cid * 64, 0])
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.ir.buffer import Buffer
from tegula.ir.expr import Const, Expr
from tegula.ir.npu import (BARRIER_PIPES, FLAG_IDS, HARD_EVENTS, BarrierAll, CoreScope, NpuKernel,
                           PipeBarrier, SetCrossFlag, SetFlag, VecOp, WaitCrossFlag, WaitFlag)
from tegula.ir.expr import const
from tegula.ir.stmt import (For, IfThenElse, LetStmt, PrimFunc, SeqStmt, Stmt, TileOp,
                            While, seq)
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.npu.passes.multi_buffer import VERSIONS
from tegula.backends.npu.access import (accesses, covers, disjoint_across_iterations, disjoint_regions,
                                         pipe_of, region_accesses, scalar_ub_access)

INF = float("inf")



@dataclass
class Access:
    pipe: str
    write: bool
    seq: int
    path: tuple      # ((list id, index), ...) from the core scope down to the operation
    region: Any = None


@dataclass
class Frame:
    """One statement list being rebuilt: syncs to put before / after each of its statements."""

    id: int
    start_seq: list                  # seq at the start of each statement
    end_seq: list                    # seq at the end of each statement
    before: dict = field(default_factory=dict)
    after: dict = field(default_factory=dict)


@dataclass
class CoreState:
    acc: dict = field(default_factory=dict)      # buffer -> [Access]
    order: dict = field(default_factory=dict)    # (p, q) -> last seq on p ordered before q
    all_before: int = -1                         # barrier_all: everything up to here is ordered
    barriers: list = field(default_factory=list)  # seq of every barrier_all (and fence)
    log: dict = field(default_factory=dict)       # (p, q) -> [(seq when added, upto)]
    last_set: dict = field(default_factory=dict)  # hand-written sets: (p, q) -> seq


class _Sync:
    def __init__(self, m: Any, reserved: dict):
        self.m = m
        self.seq = 0
        self.frames: list[Frame] = []
        self.path: list = []                     # [(frame, index)]
        self.states: dict = {}
        self.kind: Optional[str] = None
        self.live: dict = {}                     # (p, q) -> [(id, lo, hi)]
        self.reserved = reserved                 # (p, q) -> ids the kernel uses by hand
        self.next_frame = 0
        self.scope_depth = 0                     # len(self.path) inside the current T.Scope
        self.lets: dict = {}                     # let-bound var -> value
        self.loops: list = []                    # enclosing loops: (For, seq at its start)
        self.tight: set = set()                  # (loop, event): one ring, set before its wait
        self.short: set = set()                  # (loop, event) whose ring found too few ids

    # -- ordering facts ----------------------------------------------------------------------
    def ordered(self, st: CoreState, a: Access, q: str) -> bool:
        if a.seq <= st.all_before:
            return True
        if a.pipe == q and q not in BARRIER_PIPES:
            return True
        return a.seq <= st.order.get((a.pipe, q), -1)

    def add_order(self, st: CoreState, p: str, q: str, upto: float) -> None:
        st.order[(p, q)] = max(st.order.get((p, q), -1), upto)
        st.log.setdefault((p, q), []).append((self.seq, upto))
        for (r, p2), v in list(st.order.items()):  # r -> p -> q: r is ordered before q too
            if p2 == p and r != p:
                st.order[(r, q)] = max(st.order.get((r, q), -1), min(v, upto))
                st.log.setdefault((r, q), []).append((self.seq, min(v, upto)))

    def freed(self, st: CoreState, ev: tuple, h: float, lo: float) -> bool:
        """True when the wait of event ``ev`` = (p, q) placed at ``h`` is done before a set on p
        placed after the operation ``lo``: some later operation of q is ordered before p by
        sync placed before ``lo`` (or a barrier_all lies between)."""
        p, q = ev
        return any(at < lo and upto > h for at, upto in st.log.get((q, p), ())) or \
            any(h < b < lo for b in st.barriers)

    # -- ids -----------------------------------------------------------------------------------
    def take_id(self, ev: tuple, lo: float, hi: float, kind: Optional[str] = None) -> Optional[int]:
        """A free id of event ``ev`` for a set after ``lo`` and its wait at ``hi``: none of its
        earlier uses overlaps, and each earlier wait is ordered before this set (else a second
        set could fire before that wait: flag misuse)."""
        kind = self.kind if kind is None else kind
        st = self.states.setdefault(kind, CoreState())
        live = self.live.setdefault(ev, [])
        for i in range(FLAG_IDS):
            if i in self.reserved.get(ev, ()):
                continue
            if all(not (lo < h and l < hi) and (h > lo or self.freed(st, ev, h, lo))
                   for j, l, h in live if j == i):
                live.append((i, lo, hi))
                return i
        return None

    # -- walking -------------------------------------------------------------------------------
    def op(self, s: Stmt) -> None:
        st = self.states.setdefault(self.kind, CoreState())
        q = pipe_of(s, self.m)
        here = tuple((f.id, i) for f, i in self.path)
        for r, write in region_accesses(s):
            # other pipes first: their flags may order the same-pipe accesses too
            for a in sorted(st.acc.get(r.buffer, ()), key=lambda a: a.pipe == q):
                if (a.write or write) and not self.ordered(st, a, q) \
                        and not disjoint_regions(a.region, r, self.lets):
                    self.sync(st, a, q, here, r.buffer)
        self.seq += 1
        for r, write in region_accesses(s):
            buf = r.buffer
            st.acc.setdefault(buf, []).append(Access(q, write, self.seq, here, r))
            if write:  # later accesses conflict with this write first; older ones it covers go
                st.acc[buf] = [a for a in st.acc[buf] if not (a.seq < self.seq and
                                                             self.ordered(st, a, q) and
                                                             covers(r, a.region, self.lets))]

    def ring_of(self, buf: Any) -> tuple:
        """(loop, versions) of the innermost loop that multi-buffers ``buf`` (versions 1: none)."""
        for loop, start in reversed(self.loops):
            n = loop.annotations.get(VERSIONS, {}).get(buf.name, 1) if buf is not None else 1
            if n > 1:
                return loop, n, start
        return None, 1, 0

    def sync(self, st: CoreState, a: Access, q: str, here: tuple, buf: Any = None) -> None:
        """Order access ``a`` before the operation at ``here`` on pipe ``q``. Inside a loop that
        multi-buffers the buffer, the producer may run ahead by up to a version count of
        iterations, so the flag is a ring too (id ``base + k % versions``), set right before its
        wait so that one ring covers all the producers on its pipe."""
        d = 0
        while d < min(len(a.path), len(here)) - 1 and a.path[d] == here[d]:
            d += 1
        frame = next(f for f, _ in self.path if f.id == here[d][0])
        qi = here[d][1]
        if a.pipe == q:
            bar: Stmt = PipeBarrier(q, auto=True)
            frame.before.setdefault(qi, []).append(CoreScope(self.kind, bar) if d < self.scope_depth
                                                   else bar)
            self.add_order(st, q, q, self.seq)
            return
        same_list = d < len(a.path) and a.path[d][0] == here[d][0] and a.path[d][1] < qi
        pi = a.path[d][1] if same_list else None
        lo = frame.end_seq[pi] if pi is not None else self.seq
        ev = (a.pipe, q)
        loop, ring, start = self.ring_of(buf)
        fexpr: Any = None
        drain = None
        if ring > 1:
            if (id(loop), ev) in self.tight:
                # the set right before the wait: it fires once all the earlier work of its pipe
                # is done, so one ring orders every producer of the iteration on that pipe
                pi, lo = None, self.seq
            ids = [self.take_id(ev, start - 0.5, INF) for _ in range(ring)]
            spare = self.take_id(ev, lo, self.seq + 0.5)   # leave one id for later edges
            if spare is not None:
                self.live[ev].pop()
            if None not in ids and ids == list(range(ids[0], ids[0] + ring)) and spare is not None:
                fexpr = const(ids[0]) + loop.var % ring
            else:  # not enough ids for a ring: give them back; the kernel is done again "tight"
                self.live[ev] = [e for e in self.live[ev] if not (e[0] in ids and e[2] == INF
                                                                 and e[1] == start - 0.5)]
                self.short.add((id(loop), ev))
        if fexpr is None:
            fid = self.take_id(ev, lo, self.seq + 0.5)
            if fid is None:  # every id is live: set right before the wait instead
                pi, lo = None, self.seq
                fid = self.take_id(ev, lo, self.seq + 0.5)
                if fid is None:  # no earlier wait is known to be done: drain the pipes first
                    drain = BarrierAll(auto=True)
                    st.all_before = self.seq
                    st.barriers.append(self.seq)
                    fid = self.take_id(ev, lo, self.seq + 0.5)
                    assert fid is not None
            fexpr = const(fid)
        setf: Stmt = SetFlag(a.pipe, q, fexpr, auto=True)
        waitf: Stmt = WaitFlag(a.pipe, q, fexpr, auto=True)
        if d < self.scope_depth:  # placed outside the operations' T.Scope: give it one
            setf, waitf = CoreScope(self.kind, setf), CoreScope(self.kind, waitf)
        if drain is not None:
            frame.before.setdefault(qi, []).append(CoreScope(self.kind, drain) if d < self.scope_depth
                                                   else drain)
        if pi is not None:
            frame.after.setdefault(pi, []).append(setf)
        else:
            frame.before.setdefault(qi, []).append(setf)
        frame.before.setdefault(qi, []).append(waitf)
        self.add_order(st, a.pipe, q, lo)

    def hand(self, s: Stmt) -> None:
        st = self.states.setdefault(self.kind, CoreState())
        if isinstance(s, SetFlag):
            st.last_set[(s.src, s.dst)] = self.seq
        elif isinstance(s, WaitFlag):
            if (s.src, s.dst) in st.last_set:
                self.add_order(st, s.src, s.dst, st.last_set[(s.src, s.dst)])
        elif isinstance(s, PipeBarrier):
            self.add_order(st, s.pipe, s.pipe, self.seq)
        elif isinstance(s, BarrierAll):
            st.all_before = self.seq
            st.barriers.append(self.seq)

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, SeqStmt):
            return self.block(list(s.stmts))
        if isinstance(s, CoreScope):
            old, self.kind = self.kind, s.kind
            old_depth, self.scope_depth = self.scope_depth, len(self.path) + 1
            body = self.block([s.body])
            self.kind, self.scope_depth = old, old_depth
            return dataclasses.replace(s, body=body)
        if isinstance(s, For) and s.kind == "parallel":
            if self.kind is not None:
                self.op(s)
            return s
        if isinstance(s, For):
            return self.loop(s)
        if isinstance(s, While):
            return dataclasses.replace(s, body=self.block([s.body]))
        if isinstance(s, IfThenElse):
            return self.branch(s)
        if scalar_ub_access(s) and self.kind in ("V", None):
            if self.kind == "V":
                self.op(s)
            else:  # scalar code outside the scopes: the vector cores' part of it, flags in V scopes
                old = self.kind, self.scope_depth
                self.kind, self.scope_depth = "V", len(self.path)
                self.op(s)
                self.kind, self.scope_depth = old
        if isinstance(s, LetStmt):
            self.lets[s.var] = s.value
        if isinstance(s, TileOp) and self.kind is not None:
            self.op(s)
        elif isinstance(s, (SetFlag, WaitFlag, PipeBarrier, BarrierAll, WaitCrossFlag)):
            self.hand(s)
        return s

    def block(self, stmts: list) -> Stmt:
        f = Frame(self.next_frame, [0] * len(stmts), [0] * len(stmts))
        self.next_frame += 1
        self.frames.append(f)
        out = []
        for i, s in enumerate(stmts):
            self.path.append((f, i))
            f.start_seq[i] = self.seq
            out.append(self.stmt(s))
            f.end_seq[i] = self.seq
            self.path.pop()
        self.frames.pop()
        res: list = []
        for i, s in enumerate(out):
            res += f.before.get(i, []) + [s] + f.after.get(i, [])
        return seq(res) if res else seq()

    def branch(self, s: IfThenElse) -> Stmt:
        """Both branches are walked in turn; a barrier_all before and after keeps the state of
        either branch from leaking into the code around (what the A2/A3 adapter does too)."""
        if not _has_ops(s):
            return s
        self.fence()
        then = self.block([s.then])
        self.fence()
        els = self.block([s.else_]) if s.else_ is not None else None
        self.fence()
        return seq(BarrierAll(auto=True), IfThenElse(s.cond, then, els, span=s.span),
                   BarrierAll(auto=True))

    def fence(self) -> None:
        for st in self.states.values():
            st.all_before = self.seq
            st.barriers.append(self.seq)

    def loop(self, s: For) -> Stmt:
        if not _has_ops(s):
            return s
        start = self.seq
        versions = s.annotations.get(VERSIONS, {})
        self.loops.append((s, start))
        body = self.block([s.body])
        self.loops.pop()
        # the second iteration: accesses of this one against those of the previous one
        carried: list = []
        saved = {k: (dict(st.order), st.all_before, list(st.barriers),
                     {e: list(v) for e, v in st.log.items()}) for k, st in self.states.items()}

        def visit(n: Any) -> None:
            if isinstance(n, CoreScope):
                self.kind = n.kind
            elif isinstance(n, (SetFlag, WaitFlag, PipeBarrier, BarrierAll, WaitCrossFlag)):
                if self.kind is not None:
                    self.hand(n)
            elif (isinstance(n, (TileOp, For)) and self.kind is not None) or \
                    (scalar_ub_access(n) and self.kind in ("V", None)):
                kind = self.kind or "V"
                st = self.states.setdefault(kind, CoreState())
                q = pipe_of(n, self.m)
                for r, write in region_accesses(n):
                    ring = versions.get(r.buffer.name, 1)
                    for a in sorted(st.acc.get(r.buffer, ()), key=lambda a: a.pipe == q):
                        if a.seq > start and (a.write or write) and not self.ordered(st, a, q) \
                                and not disjoint_across_iterations(a.region, r, s.var, s.step, self.lets):
                            carried.append((kind, a.pipe, q, ring))
                            if ring == 1:
                                self.add_order(st, a.pipe, q, INF)
        outer_kind = self.kind
        _walk_ops(body, visit)
        self.kind = outer_kind
        for k, (order, allb, bars, log) in saved.items():
            st = self.states[k]
            st.order, st.all_before, st.barriers, st.log = order, allb, bars, log
        body = self.inner_flags(s, body, carried, outer_kind, start)
        if not carried:
            return dataclasses.replace(s, body=body)
        pre: list = []
        post: list = []
        new_body = body
        for kind in dict.fromkeys(c[0] for c in carried):
            barriers = sorted({q for k, p, q, ring in carried if k == kind and p == q and ring == 1})
            events = list(dict.fromkeys((p, q, ring) for k, p, q, ring in carried
                                        if k == kind and p != q))
            flags = []   # (p, q, id expression in the loop, ids to pre-arm and drain)
            spilled = False
            for p, q, ring in events:
                ids = [self.take_id((p, q), start - 0.5, INF, kind) if (p, q) in HARD_EVENTS else None
                       for _ in range(ring)]
                if None in ids or ids != list(range(ids[0], ids[0] + ring)):
                    spilled = True  # no ids left for a ring: drain every pipe each iteration
                    continue
                fid = const(ids[0]) if ring == 1 else const(ids[0]) + s.var % ring
                flags.append((p, q, fid, ids))
            head = [PipeBarrier(b, auto=True) for b in barriers] + \
                [WaitFlag(p, q, i, auto=True) for p, q, i, _ in flags] + \
                ([BarrierAll(auto=True)] if spilled else [])
            tail = [SetFlag(p, q, i, auto=True) for p, q, i, _ in flags]
            new_body = _in_scope(new_body, head, tail, kind)
            pre.append(_scoped([SetFlag(p, q, const(i), auto=True)
                                for p, q, _, ids in flags for i in ids], kind, outer_kind))
            post.append(_scoped([WaitFlag(p, q, const(i), auto=True)
                                 for p, q, _, ids in flags for i in ids], kind, outer_kind))
            st = self.states[kind]
            for p, q, _, _ in flags:
                self.add_order(st, p, q, self.seq)
        return seq(pre, dataclasses.replace(s, body=new_body), post)


    def inner_flags(self, s: For, body: Stmt, carried: list, outer_kind: Optional[str],
                    start: int) -> Stmt:
        """A flag set and waited inside the body is set again in the next iteration, which must
        not fire before this iteration's wait (a second set: flag misuse). A loop-carried flag
        back from the waiting pipe to the setting one orders them; when that flag is a ring of
        r versions (multi-buffered tiles), the inner flag becomes a ring of r ids too
        (``id + k % r``), else a loop-carried flag of its own is added. Needed neither when an
        inserted flag back from q to p is waited in the body before the set on p: the set of the
        next iteration then follows q's whole iteration, this wait included."""
        inner: list = []

        def flags_in(n: Any) -> None:
            if isinstance(n, CoreScope):
                self.kind = n.kind
            elif isinstance(n, SetFlag) and n.auto and self.kind is not None and isinstance(n.id, Const):
                inner.append((self.kind, n.src, n.dst, int(n.id.value)))
        _walk_ops(body, flags_in)
        self.kind = outer_kind
        rename: dict = {}
        for kind, p, q, i in dict.fromkeys(inner):
            back = [c[3] for c in carried if c[:3] == (kind, q, p)]
            if 1 in back or self.chained(body, outer_kind, kind, p, q):
                continue
            ring = max(back, default=1)
            if ring > 1:
                ids = [self.take_id((p, q), start - 0.5, INF, kind) for _ in range(ring)]
                if None not in ids and ids == list(range(ids[0], ids[0] + ring)):
                    rename[(kind, p, q, i)] = const(ids[0]) + s.var % ring
                    continue
            carried.append((kind, q, p, 1))
        return _rename_flags(body, rename, outer_kind) if rename else body


    @staticmethod
    def chained(body: Stmt, outer_kind: Optional[str], kind: str, p: str, q: str) -> bool:
        """True when, at the top level of ``body`` (not in a nested loop or branch), an inserted
        wait of q -> p comes before every inserted set of p -> q (of core ``kind``)."""
        seen_wait = False
        ok = True

        def visit(k: Optional[str], n: Any) -> None:
            nonlocal seen_wait, ok
            if k != kind or not getattr(n, "auto", False):
                return
            if isinstance(n, WaitFlag) and (n.src, n.dst) == (q, p):
                seen_wait = True
            elif isinstance(n, SetFlag) and (n.src, n.dst) == (p, q) and not seen_wait:
                ok = False
        _walk_top(body, outer_kind, visit)
        return seen_wait and ok


def _walk_top(s: Any, kind: Optional[str], visit: Any) -> None:
    """``visit(kind, node)`` for the statements of ``s`` in program order, through statement
    lists and core scopes but not into loops or branches."""
    if isinstance(s, CoreScope):
        _walk_top(s.body, s.kind, visit)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            _walk_top(x, kind, visit)
    else:
        visit(kind, s)


def _rename_flags(body: Stmt, rename: dict, kind: Optional[str]) -> Stmt:
    """``body`` with its inserted flags (kind, src, dst, id) in ``rename`` given the new ids."""
    class _R(Mutator):
        kind: Optional[str] = None

        def visit_CoreScope(self, n: CoreScope) -> Stmt:
            old, self.kind = self.kind, n.kind
            out = dataclasses.replace(n, body=self.visit(n.body))
            self.kind = old
            return out

        def _flag(self, n: Any) -> Any:
            if n.auto and isinstance(n.id, Const) and (self.kind, n.src, n.dst, int(n.id.value)) in rename:
                return dataclasses.replace(n, id=rename[(self.kind, n.src, n.dst, int(n.id.value))])
            return n

        def visit_SetFlag(self, n: SetFlag) -> Stmt:
            return self._flag(n)

        def visit_WaitFlag(self, n: WaitFlag) -> Stmt:
            return self._flag(n)
    r = _R()
    r.kind = kind
    return r.visit(body)


def _scoped(stmts: list, kind: str, outer: Optional[str]) -> Stmt:
    if not stmts:
        return seq()
    return seq(stmts) if outer is not None else CoreScope(kind, seq(stmts))


def _in_scope(body: Stmt, head: list, tail: list, kind: str) -> Stmt:
    """``head + body + tail``, the syncs inside the body's own core scope when it has one."""
    if isinstance(body, CoreScope) and body.kind == kind:
        return dataclasses.replace(body, body=seq(head, body.body, tail))
    if _has_scope_kind(body):
        return seq(CoreScope(kind, seq(head)) if head else seq(), body,
                   CoreScope(kind, seq(tail)) if tail else seq())
    return seq(head, body, tail)


def _has_scope_kind(s: Stmt) -> bool:
    found = []
    post_order_visit(s, lambda n: found.append(1) if isinstance(n, CoreScope) else None)
    return bool(found)


def _walk_ops(s: Any, visit: Any) -> None:
    """Visit CoreScopes and tile ops in program order (pre-order)."""
    if isinstance(s, CoreScope):
        visit(s)
        _walk_ops(s.body, visit)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            _walk_ops(x, visit)
    elif isinstance(s, For) and s.kind == "parallel":
        visit(s)
    elif isinstance(s, (For, While)):
        _walk_ops(s.body, visit)
    elif isinstance(s, IfThenElse):
        _walk_ops(s.then, visit)
        if s.else_ is not None:
            _walk_ops(s.else_, visit)
    elif isinstance(s, (TileOp, SetFlag, WaitFlag, PipeBarrier, BarrierAll, WaitCrossFlag)):
        visit(s)


def _has_ops(s: Stmt) -> bool:
    found = []
    post_order_visit(s, lambda n: found.append(1) if isinstance(n, TileOp) or
                     (isinstance(n, For) and n.kind == "parallel") or scalar_ub_access(n) else None)
    return bool(found)


def _reserved(k: NpuKernel) -> dict:
    out: dict = {}

    def visit(n: Any) -> None:
        if isinstance(n, (SetFlag, WaitFlag)) and not n.auto and isinstance(n.id, Const):
            out.setdefault((n.src, n.dst), set()).add(int(n.id.value))
        elif isinstance(n, (SetFlag, WaitFlag)) and not n.auto:
            out.setdefault((n.src, n.dst), set()).update(range(FLAG_IDS))
    post_order_visit(k.body, visit)
    return out


def insert_sync_kernel(k: NpuKernel, m: Any) -> NpuKernel:
    """Cross-core flags for the hand-offs between scopes (``cross_core_sync``), then the flags
    and barriers between the pipes of each core."""
    from tegula.backends.npu.passes.cross_core_sync import cross_core_flags

    k = dataclasses.replace(k, body=cross_core_flags(k, m))
    tight: set = set()
    for _ in range(4):   # rings short of ids: again, with one ring per (loop, event) there
        s = _Sync(m, _reserved(k))
        s.tight = set(tight)
        body = s.block([k.body])
        if s.short <= tight:
            break
        tight |= s.short
    return dataclasses.replace(k, body=body)


def insert_sync(func: PrimFunc, m: Any, every_kernel: bool = True) -> PrimFunc:
    """InsertSync over the NPU kernels of ``func`` for machine ``m``: all of them, or only those
    marked ``auto_sync`` (developer-level kernels, which have no flags of their own)."""
    class _Kernels(Mutator):
        def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
            if not every_kernel and not k.annotations.get("auto_sync"):
                return k
            return insert_sync_kernel(k, m)
    return func.with_body(_Kernels().visit(func.body))


__all__ = ["insert_sync", "pipe_of", "accesses", "Buffer", "Expr", "VecOp", "SetCrossFlag"]
