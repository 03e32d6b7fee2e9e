"""mbarriers on the emulator: ``tl::mbarrier_init / arrive / arrive_expect_tx / expect_tx / wait``,
the fence that publishes barrier initialization (named barriers: :mod:`.named_barriers`).

An mbarrier (a 64-bit word of shared memory) counts arrivals and transaction bytes, as the PTX
ISA defines: each phase completes when as many threads as its init count have arrived and its
transaction count (bytes announced by ``expect_tx``, minus bytes the copy engine delivered) is
back to zero; then its phase number grows by one and the counts start again.
``wait(bar, parity)`` passes once the phase of that parity has completed (so ``wait(bar, 1)``
passes on a fresh barrier). TMA loads (:mod:`.hopper`) deliver their bytes lazily: a wait whose
phase is not complete lands the copies in flight on that barrier first.

For the race checks (:class:`~tegula.backends.emu.races.Tracker`) an arrive publishes what the
arriving threads saw, a completed phase holds the join of its arrivals and of the copy engine's
writes, and a wait that passes orders the waiting threads after it: only what the barrier
covers is ordered, not the whole block.

Reported as :class:`~tegula.errors.SyncError`: a wait nobody can release (a deadlock: when the
block's threads run in step, or when every warpgroup of a warp-specialized kernel waits), naming
the barrier, the phase, what it still expects, the waiting threads and the lines that wait and
initialized it; an arrival on a barrier never initialized, or before its initialization is
ordered before the arriving thread; more arrivals than a phase takes; phases left with arrivals
or transaction bytes that never balance when the block ends.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tegula.errors import SyncError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, ORDERING_ONLY, CExpr, compile_expr
from tegula.backends.emu.builtins import compile_addr
from tegula.backends.emu.context import STATE, Ctx, builtin_rule, lanes_of, lanes_text, where


MAX_POLLS = 1000  # failed try_waits in a row, with no other thread to run, that make a deadlock


class Bar:
    """One mbarrier: counts of the current phase, the phases completed, copies in flight."""

    __slots__ = ("name", "count", "pending", "tx", "phase", "vec", "done", "inflight", "agent",
                 "init_thread", "init_clk", "init_span", "fenced", "last_arrive", "polls")

    def __init__(self, name: str, count: int, size: int, init_thread: int, init_clk: int, span: Any):
        self.name, self.count, self.pending, self.tx, self.phase = name, count, count, 0, 0
        self.vec = np.zeros(size, np.int32)
        self.done: dict = {}          # parity -> clock join of the last completed phase of it
        self.inflight: list = []      # TMA copies whose bytes count on this barrier
        self.agent = -1               # the tracker agent of the copy engine writing for it
        self.init_thread, self.init_clk, self.init_span = init_thread, init_clk, span
        self.fenced = False
        self.last_arrive: Optional[Any] = None
        self.polls = 0                # failed try_waits in a row

    def state(self) -> str:
        s = f"it expects {self.pending} arrival(s) more (of {self.count})"
        if self.tx > 0:
            s += f" and {self.tx} transaction byte(s) not delivered"
        elif self.tx < 0:
            s += (f" and {-self.tx} transaction byte(s) delivered that no expect_tx announced "
                  "(the transaction count never balances)")
        return s




def _sites(env: list, addr: Any, n: int) -> list:
    """(element, active lanes naming it) for an address of every thread."""
    flat = np.broadcast_to(np.asarray(addr.flat), (n,))
    m = env[MASK]
    lanes = lanes_of(m, n)
    f = flat[lanes]
    return [(int(k), lanes[f == k]) for k in np.unique(f)]


def bar_of(env: list, addr: Any, elem: int, span: Any, what: str, lanes: Optional[np.ndarray] = None) -> Bar:
    """The barrier at ``addr`` element ``elem``; ``lanes`` using it must be ordered after its init."""
    st = env[STATE]
    b = st.mbarriers.get((addr.buf.index, elem))
    if b is None:
        raise SyncError(f"{what} on mbarrier '{addr.buf.name}[{elem}]', which was never initialized "
                        f"({st.rep.block})", span, hint="allocate barriers with T.alloc_barrier(arrive_count)")
    if lanes is not None and len(lanes):
        tr = st.tracker
        late = lanes[(lanes != b.init_thread) & (tr.seen(lanes, b.init_thread) < b.init_clk)]
        if len(late):
            raise SyncError(f"{what} on mbarrier '{b.name}' by {lanes_text(late)} before its initialization "
                            f"by thread {b.init_thread} is ordered before them ({st.rep.block})\n"
                            f"  {lanes_text(late)}: {where(span)}\n"
                            f"  thread {b.init_thread}: {where(b.init_span)}", span,
                            hint="a __syncthreads() must separate the initialization from every use")
    return b


def settle(st: Any, b: Bar) -> None:
    """Complete the current phase when its arrivals and transaction bytes balance."""
    if b.pending == 0 and b.tx == 0:
        tr = st.tracker
        vec = b.vec
        if b.agent >= 0:
            vec = np.maximum(vec, tr.vc[b.agent])
            tr.tick(b.agent)
        b.done[b.phase & 1] = vec
        b.phase += 1
        b.pending, b.vec = b.count, np.zeros_like(b.vec)


def deliver(st: Any, b: Bar) -> None:
    """Land the TMA copies in flight on ``b`` (the copy engine needs nothing else to finish them)."""
    while b.inflight:
        b.inflight.pop(0).land(st, b)


@builtin_rule("tl::mbarrier_init")
def _init(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, _ = compile_addr(e.args[0], ctx, "tl::mbarrier_init")
    fc = compile_expr(e.args[1], ctx).fn
    n, span = ctx.nthreads, e.span or ctx.span

    def init(env: list) -> Any:
        st = env[STATE]
        addr = fa(env)
        count = int(np.max(fc(env)))
        size = st.tracker.vc.shape[1]
        for elem, lanes in _sites(env, addr, n):
            t = int(lanes[0])
            old = st.mbarriers.get((addr.buf.index, elem))
            if old is not None and (old.inflight or old.pending != old.count):
                raise SyncError(f"mbarrier '{old.name}' is initialized again while its phase {old.phase} "
                                f"still has {old.state()} ({st.rep.block})", span)
            st.mbarriers[(addr.buf.index, elem)] = Bar(f"{addr.buf.name}[{elem}]", count, size, t,
                                                       int(st.tracker.own(t)), span)
        return np.True_
    return CExpr(init, False)


def _arrive_rule(name: str, with_tx: bool, arrive: bool) -> None:
    @builtin_rule(name)
    def rule(e: E.Builtin, ctx: Ctx) -> CExpr:
        fa, _ = compile_addr(e.args[0], ctx, name)
        ftx = compile_expr(e.args[1], ctx).fn if with_tx else None
        n, span = ctx.nthreads, e.span or ctx.span

        def run(env: list) -> Any:
            st = env[STATE]
            addr = fa(env)
            tx = int(np.max(ftx(env))) if ftx is not None else 0
            for elem, lanes in _sites(env, addr, n):
                b = bar_of(env, addr, elem, span, name, lanes)
                k = len(lanes)
                if with_tx:
                    b.tx += tx * k
                if arrive:
                    if k > b.pending:
                        raise SyncError(f"{k} threads ({lanes_text(lanes)}) arrive on mbarrier '{b.name}' "
                                        f"whose phase {b.phase} expects {b.pending} more arrival(s) "
                                        f"({st.rep.block})\n  {lanes_text(lanes)}: {where(span)}\n"
                                        f"  initialized: {where(b.init_span)}", span,
                                        hint="the arrive count of T.alloc_barrier is the number of "
                                        "threads that arrive per phase")
                    b.pending -= k
                    b.vec = np.maximum(b.vec, st.tracker.release(lanes))
                    b.last_arrive = span
                phase = b.phase
                settle(st, b)
                if b.phase != phase and st.scheduler is not None:
                    st.scheduler.yield_(env)  # a waiter released by this phase runs first
            return np.True_
        return CExpr(run, False)


_arrive_rule("tl::mbarrier_arrive", with_tx=False, arrive=True)
_arrive_rule("tl::mbarrier_arrive_expect_tx", with_tx=True, arrive=True)
_arrive_rule("tl::mbarrier_expect_tx", with_tx=True, arrive=False)


@builtin_rule(*ORDERING_ONLY)
def _ordering_only(e: E.Builtin, ctx: Ctx) -> CExpr:
    return CExpr(lambda env: np.True_, False)


@builtin_rule("tl::fence_barrier_init")
def _fence_barrier_init(e: E.Builtin, ctx: Ctx) -> CExpr:
    n = ctx.nthreads

    def fence(env: list) -> Any:
        fence_inits(env[STATE], lanes_of(env[MASK], n))
        return np.True_
    return CExpr(fence, False)


def fence_inits(st: Any, lanes: np.ndarray) -> None:
    """``lanes`` fence their barrier initializations for the async proxy (``fence.mbarrier_init``,
    or ``fence.proxy.async``, which covers them too)."""
    mine = set(int(t) for t in lanes)
    for b in st.mbarriers.values():
        if b.init_thread in mine:
            b.fenced = True


def _passes(b: Bar, parity: int) -> bool:
    """The phase of ``parity`` most recently due has completed (the current phase has the other
    parity)."""
    return (b.phase & 1) != (parity & 1)


def wait_for(env: list, b: Bar, parity: int, lanes: np.ndarray, span: Any) -> None:
    """Block ``lanes`` until the phase of ``parity`` of ``b`` completes, then order them after it."""
    st = env[STATE]
    if not _passes(b, parity):
        deliver(st, b)
        settle(st, b)
    if not _passes(b, parity) and st.scheduler is not None:
        st.scheduler.block(lambda: _passes(b, parity) or _try_deliver(st, b, parity), env,
                           lambda: _deadlock(st, b, parity, lanes, span),
                           what=f"{lanes_text(lanes)} wait for phase {b.phase} of mbarrier '{b.name}' "
                           f"({b.state()}): {where(span)}")
    if not _passes(b, parity):
        raise _deadlock(st, b, parity, lanes, span)
    _acquire(st, b, parity, lanes)


def _acquire(st: Any, b: Bar, parity: int, lanes: np.ndarray) -> None:
    """``lanes`` passed a wait for ``parity``: ordered after the last phase of it that completed
    (none on a fresh barrier, whose wait for parity 1 passes at once)."""
    vec = b.done.get(parity & 1)
    if vec is not None:
        st.tracker.acquire(lanes, vec)


def _try_deliver(st: Any, b: Bar, parity: int) -> bool:
    deliver(st, b)
    settle(st, b)
    return _passes(b, parity)


def _deadlock(st: Any, b: Bar, parity: int, lanes: np.ndarray, span: Any) -> SyncError:
    last = f"\n  last arrival: {where(b.last_arrive)}" if b.last_arrive is not None else ""
    others = ""
    if st.scheduler is not None:
        others = st.scheduler.describe_waits()
    return SyncError(
        f"deadlock: {lanes_text(lanes)} wait for phase {b.phase} (parity {parity & 1}) of mbarrier "
        f"'{b.name}', which never completes: {b.state()} ({st.rep.block})\n"
        f"  {lanes_text(lanes)}: {where(span)}\n"
        f"  initialized (count {b.count}): {where(b.init_span)}{last}{others}", span,
        hint="every phase needs its init count of arrivals and its announced bytes; threads that "
        "would arrive later in program order cannot release a wait they must pass first")


@builtin_rule("tl::mbarrier_wait")
def _wait(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, _ = compile_addr(e.args[0], ctx, "tl::mbarrier_wait")
    fp = compile_expr(e.args[1], ctx).fn
    n, span = ctx.nthreads, e.span or ctx.span

    def wait(env: list) -> Any:
        addr = fa(env)
        parity = np.broadcast_to(np.asarray(fp(env)), (n,))
        for elem, lanes in _sites(env, addr, n):
            b = bar_of(env, addr, elem, span, "a wait", lanes)
            for p in np.unique(parity[lanes]):
                wait_for(env, b, int(p), lanes[parity[lanes] == p], span)
        return np.True_
    return CExpr(wait, False)


@builtin_rule("tl::mbarrier_try_wait")
def _try_wait(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, _ = compile_addr(e.args[0], ctx, "tl::mbarrier_try_wait")
    fp = compile_expr(e.args[1], ctx).fn
    n, span = ctx.nthreads, e.span or ctx.span

    def try_wait(env: list) -> Any:
        st = env[STATE]
        addr = fa(env)
        parity = np.broadcast_to(np.asarray(fp(env)), (n,))
        out = np.zeros(n, bool)
        for elem, lanes in _sites(env, addr, n):
            b = bar_of(env, addr, elem, span, "a try_wait", lanes)
            for p in np.unique(parity[lanes]):
                mine = lanes[parity[lanes] == p]
                if _try_deliver(st, b, int(p)):
                    _acquire(st, b, int(p), mine)
                    out[mine] = True
                    b.polls = 0
                elif st.scheduler is not None:
                    st.scheduler.yield_(env)
                else:  # in step, nobody else runs: a loop polling it would spin for ever
                    b.polls += 1
                    if b.polls > MAX_POLLS:
                        raise _deadlock(st, b, int(p), mine, span)
        return out
    return CExpr(try_wait, True)


def check_balanced(st: Any) -> None:
    """At the end of a block: every copy landed, no phase left half done."""
    for b in st.mbarriers.values():
        deliver(st, b)
        settle(st, b)
        if b.pending != b.count or b.tx != 0:
            raise SyncError(f"mbarrier '{b.name}' ends the block in the middle of phase {b.phase}: "
                            f"{b.state()} ({st.rep.block})\n  initialized (count {b.count}): "
                            f"{where(b.init_span)}"
                            + (f"\n  last arrival: {where(b.last_arrive)}" if b.last_arrive else ""),
                            b.last_arrive or b.init_span,
                            hint="arrivals and expect_tx bytes per phase must match the init count and "
                            "the bytes the copies deliver")
