"""Insert ``__syncthreads()`` where threads of a block hand shared memory to each other.

Walks each kernel's statements at *uniform* level (code every thread reaches alike: not under
a condition, loop bound or let that depends on the thread index). Between two statements, a
barrier goes in when the later one reads or writes a shared buffer the earlier ones wrote since
the last barrier, or writes one they read (RAW, WAW, WAR). Loops also get a barrier at the end
of their body when the next iteration's first accesses conflict with the last ones (the
back edge); a barrier the head of a loop body needs only for what came before the loop goes
before the loop, not into every iteration. A loop whose iterations write shared elements no other
thread writes, and read none of them, is one access with no barrier inside
(:mod:`.disjoint_stores` proves it). Statements under thread-dependent control flow count as one access of everything
they touch, and never get a barrier inside (that could deadlock).

The pass config ``tegula.disable_barrier_insertion`` turns this pass off, so the emulator's race
detector can be shown a kernel with its barriers missing.

Before/after::

    T.copy_vec(&A_s[...], &A[...])               T.copy_vec(&A_s[...], &A[...])
    x = A_s[tx * 4]                              T.sync_threads()
                                                 x = A_s[tx * 4]
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir import dtype as dt
from tegula.ir.expr import Builtin, Var, const
from tegula.ir.stmt import (WARP_SPECIALIZE, AttrStmt, Evaluate, For, IfThenElse, Kernel,
                            LetStmt, PrimFunc, SeqStmt, Stmt, While, seq)
from tegula.ir.visitor import Mutator, uses_var
from tegula.backends.cuda.analysis.disjoint_stores import iterations_disjoint
from tegula.backends.cuda.analysis.shared_access import accesses, barrier, is_sync


def _region_pair(s: IfThenElse) -> bool:
    """Both sides of the branch are one warp-specialized region each (a producer and its consumers)."""
    sides = [_stmts(b) for b in (s.then, s.else_) if b is not None]
    return len(sides) == 2 and all(len(b) == 1 and isinstance(b[0], AttrStmt) and b[0].key == WARP_SPECIALIZE
                                   for b in sides)


class _State:
    """The shared buffers read and written since the last barrier; ``region_*``: those of
    warp-specialized regions, which later regions do not wait for (the program's mbarriers
    order regions) but block-level code does."""

    def __init__(self) -> None:
        self.reads: set = set()
        self.writes: set = set()
        self.region_reads: set = set()
        self.region_writes: set = set()

    def conflicts(self, reads: set, writes: set, region: bool = False) -> bool:
        rs, ws = (self.reads, self.writes) if region else (self.reads | self.region_reads,
                                                           self.writes | self.region_writes)
        return bool((reads | writes) & ws or writes & rs)

    def add(self, reads: set, writes: set) -> None:
        self.reads |= reads
        self.writes |= writes

    def merge(self, other: "_State") -> None:
        """Add what ``other`` has pending (the state of another path to this point)."""
        self.add(other.reads, other.writes)
        self.region_reads |= other.region_reads
        self.region_writes |= other.region_writes

    def clear(self) -> None:
        self.reads, self.writes = set(), set()
        self.region_reads, self.region_writes = set(), set()

    def copy(self) -> "_State":
        s = _State()
        s.reads, s.writes = set(self.reads), set(self.writes)
        s.region_reads, s.region_writes = set(self.region_reads), set(self.region_writes)
        return s


class _Inserter:
    def __init__(self, tid: Var, threads: int):
        self.varying: list[Var] = [tid]
        self.threads = threads
        self.lets: dict = {}  # the lets seen so far, for disjoint_stores
        self.sync = barrier  # the barrier this code's threads meet at
        self.sync_name = "sync_threads"
        self.sync_id: Optional[int] = None  # a region's named barrier id
        self.loops = 0  # loops around the statement being visited

    def is_sync(self, s: Stmt) -> bool:
        return is_sync(s, self.sync_name, self.sync_id)

    def uniform(self, *nodes: Any) -> bool:
        return not any(n is not None and uses_var(n, self.varying) for n in nodes)

    def block(self, stmts: list[Stmt], st: _State) -> list[Stmt]:
        out: list[Stmt] = []
        for s in stmts:
            out.extend(self.stmt(s, st))
        return out

    def stmt(self, s: Stmt, st: _State) -> list[Stmt]:
        if self.is_sync(s):
            st.clear()
            return [s]
        if isinstance(s, SeqStmt):
            return self.block(list(s.stmts), st)
        if isinstance(s, AttrStmt):
            if s.key == "tile_op":
                return self._tile_op(s, st)
            if s.key == "pipeline_issue":  # ordered by the pipeline's own barriers
                return [s]
            if s.key == WARP_SPECIALIZE:
                return self._region(s, st)
            return [AttrStmt(s.key, s.value, seq(*self.block(_stmts(s.body), st)), span=s.span)]
        if isinstance(s, LetStmt):
            if not self.uniform(s.value):
                self.varying.append(s.var)
            self.lets[s.var] = s.value
            return self._leaf(s, st)
        if isinstance(s, For) and iterations_disjoint(s, self.varying[0], self.threads, self.lets,
                                                      lambda n: accesses(n, ordering=True)):
            return self._leaf(s, st)  # no thread reads what another wrote: one access
        if isinstance(s, For) and self.uniform(s.start, s.extent if not isinstance(s.extent, int) else None):
            before = st.copy()
            given = _stmts(s.body)
            self.loops += 1
            body = self.block(given, st)
            self.loops -= 1
            # a barrier the body's head needs for what came before the loop goes before the
            # loop, not into every iteration (the back edge below orders the iterations)
            # (also past statements that touch no shared memory the barrier orders: an mbarrier
            # wait, lets; a warp-specialized consumer loop starts so)
            out: list[Stmt] = []
            head = _hoistable_barrier(body, given, self.is_sync)
            if head is not None:
                out.append(body.pop(head))
                before.clear()
            # the back edge: the next iteration's accesses up to its first barrier
            if _head_conflicts(body, st, self.is_sync) and not (isinstance(s.extent, int) and s.extent <= 1):
                body.append(self.sync())
                st.clear()
            st.merge(before)  # the loop may not run at all
            return out + [For(s.var, s.start, s.extent, seq(*body), s.kind, s.step, dict(s.annotations),
                              span=s.span)]
        if isinstance(s, IfThenElse) and _region_pair(s):  # WarpSpecialize's roles, one per side
            sides = [self._region(_stmts(b)[0], st) for b in (s.then, s.else_)]
            pre = [x for side in sides for x in side if self.is_sync(x)][:1]  # block barrier: before the if
            then, els = ([x for x in side if not self.is_sync(x)] for side in sides)
            return [*pre, IfThenElse(s.cond, seq(*then), seq(*els), span=s.span)]
        if isinstance(s, IfThenElse) and self.uniform(s.cond):
            st_else = st.copy()
            then = self.block(_stmts(s.then), st)
            els = self.block(_stmts(s.else_), st_else) if s.else_ is not None else None
            st.merge(st_else)
            return [IfThenElse(s.cond, seq(*then), seq(*els) if els is not None else None, span=s.span)]
        if isinstance(s, While) and self.uniform(s.cond):
            self.loops += 1
            body = self.block(_stmts(s.body), st)
            self.loops -= 1
            head_r, head_w = _head_accesses(body, self.is_sync)
            r0, w0 = accesses(s.cond, ordering=True)
            if st.conflicts(head_r | r0, head_w):
                body.append(self.sync())
                st.clear()
            return [While(s.cond, seq(*body), span=s.span)]
        return self._leaf(s, st)

    def _region(self, s: AttrStmt, st: _State) -> list[Stmt]:
        """A warp-specialized region (``T.ws``): its threads order their own accesses with
        their named barrier; between regions the program's mbarriers do, so what a region
        touches stays out of the block's state. What the block left pending before it meets
        the region's head at a block barrier."""
        lo, n, bar_id = s.value
        cond_if = s.body
        assert isinstance(cond_if, IfThenElse)
        inner = _Inserter(self.varying[0], self.threads)
        inner.varying = list(self.varying)
        inner.lets = dict(self.lets)
        inner.sync = lambda: Evaluate(Builtin("tl::named_barrier_sync", (const(bar_id), const(n)), dt.bool_))
        inner.sync_name, inner.sync_id = "tl::named_barrier_sync", bar_id
        ist = _State()
        body = inner.block(_stmts(cond_if.then), ist)
        if self.loops and _head_conflicts(body, ist, inner.is_sync):  # the region's next run (in a loop)
            body.append(inner.sync())
        out: list[Stmt] = []
        head_r, head_w = _head_accesses(_stmts(cond_if.then), inner.is_sync)
        if st.conflicts(head_r, head_w, region=True):
            out.append(self.sync())
            st.clear()
        r, w = accesses(cond_if.then, ordering=True)
        st.region_reads |= r
        st.region_writes |= w
        out.append(AttrStmt(s.key, s.value, IfThenElse(cond_if.cond, seq(*body), span=cond_if.span), span=s.span))
        return out

    def _tile_op(self, s: AttrStmt, st: _State) -> list[Stmt]:
        """One lowered tile op: its threads split the work without barriers between them, except
        those it placed itself; so only its head (up to its first barrier) meets what came
        before, and only its tail (after its last barrier) stays pending."""
        body = _stmts(s.body)
        syncs = [i for i, x in enumerate(body) if self.is_sync(x)]
        if not syncs:
            return self._leaf(s, st)
        head_r, head_w = _head_accesses(body, self.is_sync)
        out: list[Stmt] = []
        if st.conflicts(head_r, head_w):
            out.append(self.sync())
        st.clear()
        for x in body[syncs[-1] + 1:]:
            r, w = accesses(x, ordering=True)
            st.add(r, w)
        out.append(s)
        return out

    def _leaf(self, s: Stmt, st: _State) -> list[Stmt]:
        r, w = accesses(s, ordering=True)
        out: list[Stmt] = []
        if st.conflicts(r, w):
            out.append(self.sync())
            st.clear()
        st.add(r, w)
        out.append(s)
        return out


def _stmts(s: Any) -> list[Stmt]:
    if s is None:
        return []
    return list(s.stmts) if isinstance(s, SeqStmt) else [s]


def _hoistable_barrier(body: list[Stmt], given: list[Stmt], is_sync: Any) -> Optional[int]:
    """The index of the barrier this pass put into ``body`` (not one of the ``given``
    statements) ahead of every shared access of the body, which can go before the loop; else
    None. Statements before it may only be mbarrier calls, other named barriers (ping-pong turns)
    and lets reading no shared memory."""
    for i, s in enumerate(body):
        if is_sync(s):
            return None if any(s is g for g in given) else i
        call = s.value.name if isinstance(s, Evaluate) and isinstance(s.value, Builtin) else ""
        mbarrier = call.startswith("tl::mbarrier_") or call in ("tl::named_barrier_sync", "tl::named_barrier_arrive")
        if not (mbarrier or isinstance(s, LetStmt) and accesses(s) == (set(), set())):
            return None
    return None


def _head_accesses(body: list[Stmt], is_sync: Any = is_sync) -> tuple[set, set]:
    reads: set = set()
    writes: set = set()
    for s in body:
        if is_sync(s):
            break
        r, w = accesses(s, ordering=True)
        reads |= r
        writes |= w
    return reads, writes


def _head_conflicts(body: list[Stmt], st: _State, is_sync: Any) -> bool:
    """Whether the accesses of ``body`` up to its first barrier meet those pending in ``st``
    (a warp-specialized region's only those of block-level code)."""
    for s in body:
        if is_sync(s):
            return False
        r, w = accesses(s, ordering=True)
        if st.conflicts(r, w, region=isinstance(s, AttrStmt) and s.key == WARP_SPECIALIZE):
            return True
    return False


def insert_barriers(func: PrimFunc) -> PrimFunc:
    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            if k.thread_var is None:
                return k
            body = seq(*_Inserter(k.thread_var, k.num_threads).block(_stmts(k.body), _State()))
            return Kernel(k.grid, k.threads, k.block_vars, k.allocs, body, dict(k.alloc_inits),
                          dict(k.annotations), thread_var=k.thread_var, span=k.span)

    return M().visit(func)
