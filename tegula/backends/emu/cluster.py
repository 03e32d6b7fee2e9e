"""Thread block clusters on the emulator (sm_90a): the blocks of a cluster run together.

A kernel launched with cluster dimensions (``Kernel.annotations["cluster"]``, ``(cx, cy)``) has
its blocks grouped as the GPU groups them: the ``cx * cy`` blocks whose hardware indices differ
only in ``blockIdx.x % cx`` and ``blockIdx.y % cy`` form one cluster, of rank ``x % cx + (y % cy)
* cx`` (``%cluster_ctarank``). They run as tasks of one scheduler (:mod:`.tasks`), taking turns at
their waits, so a block can wait for what a peer does; clusters run one after another.

What the PTX ISA defines, as the cluster lowering uses it:

- ``tl::cluster_cta_rank()``: the block's rank.
- ``tl::cluster_sync()`` (``barrier.cluster.arrive`` + ``wait``): every thread of every block of
  the cluster arrives, then all go on, ordered after everything any of them saw.
- ``tl::mbarrier_arrive_cluster(bar, cta)``: an arrive on the mbarrier at ``bar``'s offset in the
  shared memory of block ``cta`` (``mapa`` + ``mbarrier.arrive.release.cluster``).
- ``tl::tma_load_multicast(dst, map, bar, mask, c...)``: one box, written at ``dst``'s offset
  into the shared memory of every block whose bit is set in ``mask``, its bytes counted on the
  mbarrier at ``bar``'s offset in each of them.

The blocks of a cluster share one vector clock (:func:`cluster_clock`; each block's
:class:`~tegula.backends.emu.races.Tracker` holds its rows), so a remote arrive, a multicast copy
and the cluster barrier order exactly what they cover, across blocks. Reported as
:class:`~tegula.errors.SyncError`: a remote arrive or multicast on a peer's mbarrier not yet
initialized, or whose initialization is not ordered before it (the cluster barrier after the
initialization is missing); a block that exits while an access of a peer into its shared memory
(a remote arrive, a multicast copy) is not ordered before its exit (the cluster barrier before
the end is missing), or that a peer accesses after it exited; a cluster barrier some block never
reaches (a deadlock).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import SyncError, UnsupportedError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, CExpr, compile_expr
from tegula.backends.emu.builtins import compile_addr
from tegula.backends.emu.context import STATE, Ctx, builtin_rule, lanes_of, lanes_text, where
from tegula.backends.emu.mbarrier import Bar, settle


def cluster_clock(blocks: int, size: int) -> np.ndarray:
    """The vector clock of a cluster of ``blocks`` blocks of ``size`` agents each."""
    clock = np.zeros((blocks * size, blocks * size), np.int32)
    np.fill_diagonal(clock, 1)
    return clock


class Cluster:
    """The blocks of one cluster while they run: their states by rank, the cluster barrier."""

    def __init__(self, dims: tuple, names: list, clock: np.ndarray):
        self.dims = dims
        self.clock = clock          # :func:`cluster_clock`, shared by the blocks' trackers
        self.names = names          # "block (x, y)" by rank
        self.states: list = []      # BlockState by rank
        self.exited: list = []      # by rank: None, or the span of the statement it ended after
        self.remote: list = []      # by rank: [(peer state, lane, clock, span, what)] into its memory
        self.arrived: list = []     # lanes of each rank at the cluster barrier
        self.generation = 0

    def add(self, st: Any) -> None:
        st.rank, st.cluster = len(self.states), self
        self.states.append(st)
        self.exited.append(None)
        self.remote.append([])
        self.arrived.append([])


def _peer(env: list, cta: int, span: Any, what: str) -> Any:
    st = env[STATE]
    cl = st.cluster
    if cl is None:
        if cta == 0:
            return st
        raise SyncError(f"{what} names block {cta} of the cluster, but the kernel is not launched in "
                        f"clusters ({st.rep.block})", span)
    if not 0 <= cta < len(cl.states):
        raise SyncError(f"{what} names block {cta} of a cluster of {len(cl.states)} ({st.rep.block})", span)
    return cl.states[cta]


def _remote_bar(env: list, peer: Any, addr: Any, elem: int, lanes: np.ndarray, span: Any, what: str) -> Bar:
    """The mbarrier at ``addr``'s offset in ``peer``'s shared memory, used by ``lanes`` of the
    running block: it must be initialized and its initialization ordered before them, and the
    peer still running; the access is noted for the peer's exit check."""
    st = env[STATE]
    cl = st.cluster
    if peer is st:
        from tegula.backends.emu.mbarrier import bar_of
        return bar_of(env, addr, elem, span, what, lanes)
    name = cl.names[peer.rank]
    if cl.exited[peer.rank] is not None:
        raise SyncError(f"{what} by {lanes_text(lanes)} of {st.rep.block} on mbarrier '{addr.buf.name}[{elem}]' "
                        f"of {name}, which has exited: its shared memory is gone\n"
                        f"  {lanes_text(lanes)}: {where(span)}\n  {name} ended: {where(cl.exited[peer.rank])}",
                        span, hint="a cluster barrier (tl::cluster_sync) before the end of the kernel keeps every "
                        "block of the cluster until its peers no longer touch its shared memory")
    b = peer.mbarriers.get((addr.buf.index, elem))
    hint = ("a cluster barrier (tl::cluster_sync) after the mbarrier initialization, before any block "
            "arrives on or copies into a peer's barriers")
    if b is None:
        raise SyncError(f"{what} by {lanes_text(lanes)} of {st.rep.block} on mbarrier '{addr.buf.name}[{elem}]' "
                        f"of {name}, which was never initialized there\n  {lanes_text(lanes)}: {where(span)}",
                        span, hint=hint)
    seen = st.tracker.vc[lanes, peer.tracker.base + b.init_thread]
    late = lanes[seen < b.init_clk]
    if len(late):
        raise SyncError(f"{what} by {lanes_text(late)} of {st.rep.block} on mbarrier '{b.name}' of {name} before "
                        f"its initialization there is ordered before them\n  {lanes_text(late)}: {where(span)}\n"
                        f"  thread {b.init_thread} of {name}: {where(b.init_span)}", span, hint=hint)
    for lane in lanes:
        cl.remote[peer.rank].append((st, int(lane), int(st.tracker.own(int(lane))), span,
                                     f"{what} on mbarrier '{b.name}'"))
    return b


def check_exit(st: Any, span: Any) -> None:
    """Block ``st`` of a cluster ends: every access of a peer into its shared memory must be
    ordered before the end of one of its threads (the block's memory goes when all have ended)."""
    cl = st.cluster
    if cl is None:
        return
    rows = st.tracker.vc[:st.nthreads]
    for peer, lane, clk, where_, what in cl.remote[st.rank]:
        if int(rows[:, peer.tracker.base + lane].max()) < clk:
            raise SyncError(f"{cl.names[st.rank]} of the cluster exits while {what} by thread {lane} of "
                            f"{cl.names[peer.rank]} into its shared memory is not ordered before its end "
                            f"(no cluster barrier in between)\n  thread {lane} of {cl.names[peer.rank]}: "
                            f"{where(where_)}", where_,
                            hint="a cluster barrier (tl::cluster_sync) by every thread before the end of the "
                            "kernel: no block may exit while a peer still writes into its shared memory")
    for b in st.mbarriers.values():  # arrivals still to come can only be a peer's, into gone memory
        if b.pending != b.count and not b.inflight:
            at = b.last_arrive or b.init_span
            raise SyncError(f"{cl.names[st.rank]} of the cluster exits while its mbarrier '{b.name}' is in the middle "
                            f"of phase {b.phase}: {b.state()}, which only a peer's remote arrives can still bring, "
                            f"into shared memory that is gone (no cluster barrier before the end)\n"
                            f"  last arrival: {where(at)}", at,
                            hint="a cluster barrier (tl::cluster_sync) by every thread before the end of the "
                            "kernel: no block may exit while a peer still writes into its shared memory")
    cl.exited[st.rank] = span


@builtin_rule("tl::cluster_cta_rank")
def _rank(e: E.Builtin, ctx: Ctx) -> CExpr:
    np_t = e.ret.np
    return CExpr(lambda env: np_t.type(env[STATE].rank), False)


@builtin_rule("tl::cluster_sync")
def _cluster_sync(e: E.Builtin, ctx: Ctx) -> CExpr:
    n, span = ctx.nthreads, e.span or ctx.span

    def sync(env: list) -> Any:
        st = env[STATE]
        lanes = lanes_of(env[MASK], n)
        cl = st.cluster
        if cl is None:  # a cluster of one block: a block barrier
            if len(lanes) != n:
                raise SyncError(f"cluster barrier reached by {lanes_text(lanes)} only ({st.rep.block})", span)
            st.tracker.barrier()
            return np.True_
        cl.arrived[st.rank].append(lanes)
        total = len(cl.states) * n
        if sum(len(x) for rk in cl.arrived for x in rk) == total:
            clock = cl.clock
            rows = np.concatenate([p.tracker.base + np.arange(n) for p in cl.states])
            clock[rows] = clock[rows].max(0)
            clock[rows, rows] += 1
            for p in cl.states:
                p.tracker.forget_thread_reads()
            cl.arrived = [[] for _ in cl.states]
            cl.generation += 1
            return np.True_
        gen = cl.generation

        def missing() -> SyncError:
            absent = [cl.names[r] for r, rk in enumerate(cl.arrived) if sum(len(x) for x in rk) < n]
            return SyncError(f"deadlock: the cluster barrier waits for every thread of the cluster; "
                             f"{', '.join(absent)} never arrive(s) ({st.rep.block} waits)\n"
                             f"  {lanes_text(lanes)} of {st.rep.block}: {where(span)}"
                             + st.scheduler.describe_waits(), span,
                             hint="every thread of every block of the cluster must reach tl::cluster_sync")
        st.scheduler.block(lambda: cl.generation != gen, env, missing,
                           what=f"{lanes_text(lanes)} of {st.rep.block} wait at the cluster barrier: {where(span)}")
        return np.True_
    return CExpr(sync, False)


@builtin_rule("tl::mbarrier_arrive_cluster")
def _arrive_cluster(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, _ = compile_addr(e.args[0], ctx, e.name)
    fc = compile_expr(e.args[1], ctx).fn
    n, span = ctx.nthreads, e.span or ctx.span

    def run(env: list) -> Any:
        st = env[STATE]
        addr = fa(env)
        lanes = lanes_of(env[MASK], n)
        flat = np.broadcast_to(np.asarray(addr.flat), (n,))
        cta = np.broadcast_to(np.asarray(fc(env)), (n,))
        for key in np.unique(np.stack([flat[lanes], cta[lanes]]), axis=1).T:
            elem, rank = int(key[0]), int(key[1])
            mine = lanes[(flat[lanes] == elem) & (cta[lanes] == rank)]
            peer = _peer(env, rank, span, "a remote arrive")
            b = _remote_bar(env, peer, addr, elem, mine, span, "a remote arrive")
            if len(mine) > b.pending:
                raise SyncError(f"{len(mine)} threads ({lanes_text(mine)}) of {st.rep.block} arrive on mbarrier "
                                f"'{b.name}' of {peer.rep.block} whose phase {b.phase} expects {b.pending} more "
                                f"arrival(s)\n  {lanes_text(mine)}: {where(span)}\n  initialized: {where(b.init_span)}",
                                span, hint="the arrive count of the barrier is the number of threads of the "
                                "whole cluster that arrive per phase")
            b.pending -= len(mine)
            b.vec = np.maximum(b.vec, st.tracker.release(mine))
            b.last_arrive = span
            phase = b.phase
            settle(peer, b)
            if b.phase != phase and st.scheduler is not None:
                st.scheduler.yield_(env)
        return np.True_
    return CExpr(run, False)


def multicast_targets(env: list, mask: int, span: Any) -> list:
    """The block states a multicast with CTA mask ``mask`` writes into."""
    st = env[STATE]
    size = len(st.cluster.states) if st.cluster is not None else 1
    if mask <= 0 or mask >> size:
        raise UnsupportedError(f"tl::tma_load_multicast: CTA mask {mask:#x} names blocks outside a cluster of "
                               f"{size} ({st.rep.block})", span)
    return [_peer(env, r, span, "a multicast TMA load") for r in range(size) if mask >> r & 1]


def remote_bar(env: list, peer: Any, addr: Any, elem: int, lanes: np.ndarray, span: Any, what: str) -> Bar:
    """:func:`_remote_bar` for the multicast load (:mod:`.hopper`)."""
    return _remote_bar(env, peer, addr, elem, lanes, span, what)
