"""mbarriers on the emulator: ``tl::mbarrier_init / arrive / expect_tx / wait``.

An mbarrier (a 64-bit word of shared memory) counts arrivals: each phase completes when as many
threads as its init count have arrived and every announced transaction byte has landed; then its
phase parity flips and the count starts again. ``wait(bar, parity)`` passes once the phase of
that parity has completed (so ``wait(bar, 1)`` passes on a fresh barrier, as on the GPU).

Threads run in lock step here, so a wait must already be satisfied when the threads reach it:
a wait that could only be released by threads that run later in program order (warp-specialized
producers and consumers in different branches) is reported as a :class:`~tegula.errors.SyncError`
naming the barrier, its phase and how many arrivals it still expects. So are an arrival on a
barrier never initialized and more arrivals than a phase takes. For the race checks, a wait that
passes orders shared memory as a block barrier does (they do not follow which threads arrived).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import SyncError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, ORDERING_ONLY, CExpr, compile_expr
from tegula.backends.emu.builtins import compile_addr
from tegula.backends.emu.context import STATE, Ctx, builtin_rule


class _Bar:
    __slots__ = ("phase", "pending", "count", "tx")

    def __init__(self, count: int):
        self.phase, self.pending, self.count, self.tx = 0, count, count, 0

    def settle(self) -> None:
        if self.pending == 0 and self.tx <= 0:
            self.phase ^= 1
            self.pending, self.tx = self.count, 0


def _sites(env: list, addr: Any, n: int) -> list:
    """(element, number of active threads naming it) for an address of every thread."""
    flat = np.broadcast_to(np.asarray(addr.flat), (n,))
    m = env[MASK]
    active = flat if m is None else flat[m]
    keys, counts = np.unique(active, return_counts=True)
    return [(int(k), int(c)) for k, c in zip(keys, counts)]


def _state(env: list) -> dict:
    return env[STATE].mbarriers


def _bar(env: list, addr: Any, elem: int, span: Any, what: str) -> _Bar:
    b = _state(env).get((addr.buf.index, elem))
    if b is None:
        raise SyncError(f"{what} on mbarrier '{addr.buf.name}[{elem}]', which was never initialized",
                        span, hint="allocate barriers with T.alloc_barrier(arrive_count)")
    return b


@builtin_rule("tl::mbarrier_init")
def _init(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, _ = compile_addr(e.args[0], ctx, "tl::mbarrier_init")
    fc = compile_expr(e.args[1], ctx).fn
    n = ctx.nthreads

    def init(env: list) -> Any:
        addr = fa(env)
        count = int(np.max(fc(env)))
        for elem, _ in _sites(env, addr, n):
            _state(env)[(addr.buf.index, elem)] = _Bar(count)
        return np.True_
    return CExpr(init, False)


def _arrive_rule(name: str, with_tx: bool, arrive: bool) -> None:
    @builtin_rule(name)
    def rule(e: E.Builtin, ctx: Ctx) -> CExpr:
        fa, _ = compile_addr(e.args[0], ctx, name)
        ftx = compile_expr(e.args[1], ctx).fn if with_tx else None
        n, span = ctx.nthreads, e.span or ctx.span

        def run(env: list) -> Any:
            addr = fa(env)
            tx = int(np.max(ftx(env))) if ftx is not None else 0
            for elem, k in _sites(env, addr, n):
                b = _bar(env, addr, elem, span, name)
                if with_tx:
                    b.tx += tx * k
                if arrive:
                    if k > b.pending:
                        raise SyncError(f"{k} threads arrive on mbarrier '{addr.buf.name}[{elem}]' "
                                        f"whose phase expects {b.pending} more arrival(s)", span,
                                        hint="the arrive count of T.alloc_barrier is the number of "
                                        "threads that arrive per phase")
                    b.pending -= k
                b.settle()
            return np.True_
        return CExpr(run, False)


_arrive_rule("tl::mbarrier_arrive", with_tx=False, arrive=True)
_arrive_rule("tl::mbarrier_arrive_expect_tx", with_tx=True, arrive=True)
_arrive_rule("tl::mbarrier_expect_tx", with_tx=True, arrive=False)


@builtin_rule(*ORDERING_ONLY)
def _ordering_only(e: E.Builtin, ctx: Ctx) -> CExpr:
    return CExpr(lambda env: np.True_, False)


@builtin_rule("tl::named_barrier_sync")
def _named_barrier(e: E.Builtin, ctx: Ctx) -> CExpr:
    fc = compile_expr(e.args[1], ctx).fn
    n, span = ctx.nthreads, e.span or ctx.span

    def sync(env: list) -> Any:
        m = env[MASK]
        active = n if m is None else int(np.count_nonzero(m))
        want = int(np.max(fc(env)))
        if active != want:
            raise SyncError(f"named barrier for {want} threads reached by {active}", span,
                            hint="the threads that reach T.sync_threads(barrier_id, count) must be "
                            "exactly `count`")
        env[STATE].tracker.barrier()
        return np.True_
    return CExpr(sync, False)


@builtin_rule("tl::mbarrier_wait")
def _wait(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, _ = compile_addr(e.args[0], ctx, "tl::mbarrier_wait")
    fp = compile_expr(e.args[1], ctx).fn
    n, span = ctx.nthreads, e.span or ctx.span

    def wait(env: list) -> Any:
        addr = fa(env)
        parity = np.broadcast_to(np.asarray(fp(env)), (n,))
        m = env[MASK]
        for elem, _ in _sites(env, addr, n):
            b = _bar(env, addr, elem, span, "a wait")
            flat = np.broadcast_to(np.asarray(addr.flat), (n,))
            mine = flat == elem if m is None else (flat == elem) & m
            for p in np.unique(parity[mine]):
                if int(p) & 1 == b.phase:
                    raise SyncError(
                        f"a wait for phase parity {int(p) & 1} of mbarrier '{addr.buf.name}[{elem}]' "
                        f"never ends: the phase still expects {b.pending} arrival(s)"
                        + (f" and {b.tx} transaction byte(s)" if b.tx > 0 else "")
                        + " when the waiting threads reach it", span,
                        hint="the emulator runs a block's threads in step: threads that arrive later "
                        "in program order (another branch of a warp-specialized kernel) cannot "
                        "release it")
        env[STATE].tracker.barrier()
        return np.True_
    return CExpr(wait, False)
