"""Named barriers on the emulator: ``bar.sync id, count`` (``tl::named_barrier_sync``,
``T.sync_threads(id, count)``) and ``bar.arrive id, count`` (``tl::named_barrier_arrive``,
``T.named_barrier_arrive(id, count)``), as the PTX ISA defines them.

Each of a block's 16 barriers counts the threads arriving in its current phase, whether they wait
(``bar.sync``) or not (``bar.arrive``); when ``count`` have arrived the phase completes, the
waiting threads go on and the next phase starts empty. For the race checks an arrival publishes
what the arriving threads saw and the completed phase orders the threads that waited after all
of it; a thread that only arrived is ordered after nothing.

Reported as :class:`~tegula.errors.SyncError`, with the lines of the threads involved:

- a deadlock: a ``bar.sync`` whose phase no thread left can complete (when every task waits);
- a wrong count: threads arriving at one phase with different thread counts;
- an over-arrival: a thread arriving again at a phase it already arrived at (on the GPU the phase
  would complete early, ordering less than meant: a ``bar.sync`` or ``bar.arrive`` of the other
  threads is missing), or more threads arriving at a phase than its count;
- a phase left with arrivals when the block ends (nobody's ``bar.sync`` ever consumed them).

Which ids a call names may differ per thread (``bar.sync 9 + warpgroup, 256``): the threads are
taken id by id, arrivals before waits.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import SyncError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, CExpr, compile_expr
from tegula.backends.emu.context import STATE, Ctx, builtin_rule, lanes_of, lanes_text, where

NAMED_BARRIERS = 16


class Phase:
    """The arrivals of one named barrier's current phase."""

    __slots__ = ("count", "parts", "seen", "vec", "gen")

    def __init__(self, n: int, size: int):
        self.count = 0                      # the phase's thread count (0: nobody arrived yet)
        self.parts: list = []               # (lanes, span, waits) of each arrival
        self.seen = np.zeros(n, bool)       # threads arrived in this phase
        self.vec = np.zeros(size, np.int32)  # join of what the arrivals published
        self.gen = 0                        # phases completed

    def arrived(self) -> int:
        return int(self.seen.sum())

    def where_of(self, lane: int) -> Any:
        return next(span for lanes, span, _ in self.parts if lane in lanes)


def _phase(st: Any, bid: int) -> Phase:
    table = st.named
    if table is None:
        table = st.named = {}
    ph = table.get(bid)
    if ph is None:
        ph = table[bid] = Phase(st.nthreads, st.tracker.vc.shape[1])
    return ph


def _kind(waits: bool) -> str:
    return "bar.sync" if waits else "bar.arrive"


def arrive(st: Any, bid: int, count: int, lanes: np.ndarray, span: Any, waits: bool) -> None:
    """``lanes`` arrive at named barrier ``bid`` for ``count`` threads; with ``waits`` (``bar.sync``)
    they block until the phase completes (other tasks run meanwhile)."""
    if not 0 <= bid < NAMED_BARRIERS:
        raise SyncError(f"named barrier id {bid} out of range (0..{NAMED_BARRIERS - 1}) ({st.rep.block})", span)
    ph = _phase(st, bid)
    k = _kind(waits)
    if ph.count and ph.count != count:
        other = ph.parts[0]
        raise SyncError(f"named barrier {bid}: {lanes_text(lanes)} arrive ({k}) for {count} threads while "
                        f"{lanes_text(other[0])} arrived at the same phase for {ph.count} ({st.rep.block})\n"
                        f"  {lanes_text(lanes)}: {where(span)}\n  {lanes_text(other[0])}: {where(other[1])}",
                        span, hint="every thread meeting at a named barrier must name the same thread count")
    twice = lanes[ph.seen[lanes]]
    if len(twice):
        t = int(twice[0])
        raise SyncError(f"named barrier {bid}: thread {t} arrives ({k}) at a phase it already arrived at, which "
                        f"{ph.arrived()} of its {ph.count} threads have reached: on the GPU the phase would "
                        f"complete without the threads it waits for ({st.rep.block})\n"
                        f"  thread {t} again: {where(span)}\n  thread {t} before: {where(ph.where_of(t))}",
                        span, hint="a bar.sync or bar.arrive of the other threads of this barrier is missing")
    total = ph.arrived() + len(lanes)
    if total > count:
        raise SyncError(f"named barrier {bid} for {count} threads reached by {total} ({st.rep.block})\n"
                        f"  {lanes_text(lanes)}: {where(span)}", span,
                        hint="the threads that reach T.sync_threads(barrier_id, count) must be exactly `count`")
    ph.count = count
    ph.parts.append((lanes, span, waits))
    ph.seen[lanes] = True
    ph.vec = np.maximum(ph.vec, st.tracker.release(lanes))
    if total == count:
        for part, _, w in ph.parts:
            if w:
                st.tracker.acquire(part, ph.vec)
        ph.count, ph.parts, ph.gen = 0, [], ph.gen + 1
        ph.seen[:] = False
        ph.vec = np.zeros_like(ph.vec)
        return
    if not waits:
        return
    gen = ph.gen

    def stuck() -> SyncError:
        others = "".join(f"\n  {lanes_text(p[0])} ({_kind(p[2])}): {where(p[1])}" for p in ph.parts
                         if p[0] is not lanes)
        sched = st.scheduler
        return SyncError(f"deadlock: named barrier {bid} waits for {count} threads, {total} of them arrived "
                         f"({lanes_text(lanes)} among them) and no other thread can arrive ({st.rep.block})\n"
                         f"  {lanes_text(lanes)}: {where(span)}" + others
                         + (sched.describe_waits() if sched is not None else ""), span,
                         hint="every bar.sync needs `count` threads to reach it (bar.sync or bar.arrive) in "
                              "the same phase")
    if st.scheduler is None:
        raise stuck()
    st.scheduler.block(lambda: ph.gen != gen, None, stuck,
                       what=f"{lanes_text(lanes)} wait at named barrier {bid}: {where(span)}")


def check_named(st: Any) -> None:
    """At the end of a block: no named barrier holds arrivals of a phase that never completed."""
    for bid, ph in sorted((st.named or {}).items()):
        if ph.parts:
            lanes, span, waits = ph.parts[0]
            raise SyncError(f"the block ends with named barrier {bid} expecting {ph.count - ph.arrived()} more of "
                            f"its {ph.count} threads: {lanes_text(lanes)} arrived ({_kind(waits)}) and no thread "
                            f"completed the phase ({st.rep.block})\n  {lanes_text(lanes)}: {where(span)}", span,
                            hint="every bar.arrive needs a bar.sync of the threads it signals")


def by_id(st: Any, ids: Any, count: int, lanes: np.ndarray, span: Any, waits: bool) -> None:
    """``lanes`` arrive, each at the barrier ``ids`` names for it (a scalar, or one id per thread)."""
    ids = np.asarray(ids)
    if ids.ndim == 0:
        arrive(st, int(ids), count, lanes, span, waits)
        return
    mine = ids[lanes]
    for bid in np.unique(mine):
        arrive(st, int(bid), count, lanes[mine == bid], span, waits)


def _rule(waits: bool):
    def rule(e: E.Builtin, ctx: Ctx) -> CExpr:
        fid = compile_expr(e.args[0], ctx).fn
        fc = compile_expr(e.args[1], ctx).fn
        n, span = ctx.nthreads, e.span or ctx.span

        def run(env: list) -> Any:
            st = env[STATE]
            lanes = lanes_of(env[MASK], n)
            by_id(st, fid(env), int(np.max(fc(env))), lanes, span, waits)
            return np.True_
        return CExpr(run, False)
    return rule


builtin_rule("tl::named_barrier_sync")(_rule(True))
builtin_rule("tl::named_barrier_arrive")(_rule(False))

