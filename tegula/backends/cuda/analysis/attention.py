"""Softmax overlap (sm_90a, part of ``TmaPipeline``): in an attention-shaped pipelined loop the
second gemm of block ``j - 1`` runs on the tensor cores while the threads compute the softmax of
block ``j`` (intra-warpgroup pipelining of the two gemms around the code between them).

An attention-shaped loop body is ``lets; G1; L; G2``: ``G1`` writes a fragment from scratch
(``clear_accum``), ``G2`` reads a fragment as its A operand (the probabilities, from registers),
``L`` is the code between them, and nothing else follows ``G2``. ``L`` splits at its first
statement that touches what ``G2`` reads or writes (``acc_o *= rescale``, ``P = S``): the part
before it (masks, row maxima, exponentials, row sums) overlaps ``G2`` of the previous block, the
rest waits for it. The producers split in two rings of stages, each on its own mbarriers: the
*early* tiles (read by ``G1`` and ``L``: K) run ``S - 1`` iterations ahead as before, the *late*
ones (read by ``G2`` only: V) ``S - 2``, since their stage is still read by the ``G2`` that the
next iteration issues.

Before/after (S = 2; ``async``: committed, not waited for: ``AttrStmt("wgmma_async", ...)``)::

    for j in T.Pipelined(n, num_stages=2):      issue K[0]
        T.copy(K[j], K_s)                       iteration 0: wait K[0]; issue K[1], V[0]
        T.gemm(Q_s, K_s, S, clear_accum=True)               G1(0); L(0)
        softmax(S)  # L1                        for j in 1 .. n - 1:
        acc_o *= rescale; P = S  # L2               wait K[j % 2]; sync; issue K[j + 1], V[j]
        T.copy(V[j], V_s)                           async T.gemm(Q_s, K_s[j % 2], S)
        T.gemm(P, V_s, acc_o)                       wait V[(j - 1) % 2]
                                                    async T.gemm(P, V_s[(j - 1) % 2], acc_o)
                                                    wgmma_wait(1, S)            # G1 done
                                                    L1(j)                       # G2 still running
                                                    wgmma_wait(0, acc_o, P)     # G2 done
                                                    L2(j)
                                                wait V[(n - 1) % 2]; T.gemm(P, V_s[(n - 1) % 2], acc_o)

``WarpSpecialize`` builds the same schedule for the consumers of a split loop (``rings``: a
producer warpgroup fills K and V, the consumers free each stage on its empty barrier as the wgmma
reading it retires, and the loop has no block barrier and no loads).

``tegula.softmax_overlap`` forces it on or off; unset, it is taken when the fragments that stay
live across the overlap fit the registers (:data:`AUTO_MAX_REGS`) and shared memory already
limits the SM to one block (:func:`wanted`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.stmt import AttrStmt, Copy, For, Gemm, IfThenElse, Kernel, LetStmt, Stmt, seq
from tegula.ir.visitor import substitute
from tegula.backends.cuda.machine import smem_limit
from tegula.backends.cuda.analysis.pipelined_loop import (Restage, used_buffers, written_buffers, let_values,
                                                        serial_annotations, staged_tiles)

# registers per thread that the fragments live across the overlap (G1's result, G2's accumulator
# and its A operand) may take for the pass to choose the schedule by itself: 160 is 128x128
# tiles of 256 threads at d128 (64 + 64 + 32); 128 threads with a 128-row tile at d128 is 224
AUTO_MAX_REGS = 160
# shared memory the driver keeps per block: an SM holds the most one block may opt in to
# (check_resources.smem_limit) and this
SMEM_RESERVED = 1024


def _elems(r: Any) -> int:
    n = 1
    for e in r.extents:
        if not isinstance(e, int):
            return 1 << 30
        n *= e
    return n


def _conflicts(s: Stmt, g: Gemm) -> bool:
    """``s`` and ``g`` touch a buffer one of them writes."""
    gw, gu = set(written_buffers(g)), used_buffers(g)
    return bool(set(written_buffers(s)) & gu) or bool(used_buffers(s) & gw)


@dataclasses.dataclass(frozen=True)
class AttentionParts:
    """An attention-shaped loop body: ``lets`` first, then ``g1`` (S = Q K^T into a cleared
    fragment), ``l1`` (the softmax: what G2 does not wait for), ``l2`` (what must follow G2's
    previous block), ``g2`` (O += P V); ``early`` are the producer copies the body up to G2 reads
    (K), ``late`` the rest (V)."""

    lets: list
    g1: Gemm
    l1: list
    l2: list
    g2: Gemm
    early: list
    late: list


def attention_parts(consumers: list[Stmt], producers: list[Copy]) -> Optional[AttentionParts]:
    """The parts of an attention-shaped loop body, else None."""
    body = list(consumers)
    lets: list[Stmt] = []
    while body and isinstance(body[0], LetStmt):
        lets.append(body.pop(0))
    if len(body) < 3 or not isinstance(body[0], Gemm) or not isinstance(body[-1], Gemm):
        return None
    g1, g2, mid = body[0], body[-1], body[1:-1]
    if not (g1.clear_accum and g1.C.buffer.is_fragment and g2.A.buffer.is_fragment and g2.C.buffer.is_fragment):
        return None
    if any(isinstance(s, LetStmt) for s in mid) or _conflicts(g1, g2):
        return None
    cut = next((i for i, s in enumerate(mid) if _conflicts(s, g2)), len(mid))
    l1, l2 = mid[:cut], mid[cut:]
    if not l1:
        return None
    early_uses = used_buffers(seq(*lets, g1, *mid))
    g2_uses = used_buffers(g2)
    early = [p for p in producers if p.dst.buffer in early_uses]
    late = [p for p in producers if p.dst.buffer not in early_uses]
    if any(p.dst.buffer in g2_uses for p in early) or not early:
        return None
    return AttentionParts(lets, g1, l1, l2, g2, early, late)


def _smem_bytes(kernel: Kernel, S: int, producers: list[Copy]) -> int:
    """Shared bytes of the kernel once the producers' tiles have ``S`` stages."""
    staged = {p.dst.buffer for p in producers}
    total = 0
    for b in kernel.allocs:
        if b.is_shared and all(isinstance(d, int) for d in b.shape):
            total += b.numel() * b.dtype.itemsize * (S if b in staged else 1)
    return total


def wanted(parts: AttentionParts, kernel: Kernel, S: int, force: Optional[bool], arch: str = "sm_90a") -> bool:
    """Whether to take the schedule: ``force`` (``tegula.softmax_overlap``) when set, else when
    G1's result, G2's accumulator and G2's A operand fit :data:`AUTO_MAX_REGS` per thread and
    shared memory already keeps the SM to one block. The schedule keeps P live across the
    softmax (about 20 more registers per thread), which at d64 (80 KB of tiles, two blocks per
    SM before) cost the second block: -17% measured on an H200. ``arch``: whose shared memory
    per SM (the passes that call this run for sm_90a only)."""
    if force is not None:
        return bool(force)
    g1, g2 = parts.g1, parts.g2
    threads = kernel.num_threads
    nbytes = (_elems(g1.C) + _elems(g2.C)) * 4 + _elems(g2.A) * g2.A.buffer.dtype.itemsize
    return nbytes // 4 <= AUTO_MAX_REGS * threads and one_block_per_sm(parts, kernel, S, arch)


def one_block_per_sm(parts: AttentionParts, kernel: Kernel, S: int, arch: str = "sm_90a") -> bool:
    """Shared memory keeps an SM of ``arch`` to one block of ``kernel`` once the loop's tiles
    (``attention_parts``) have ``S`` stages."""
    early, late = parts.early, parts.late
    return 2 * (_smem_bytes(kernel, S, early + late) + SMEM_RESERVED) > smem_limit(arch) + SMEM_RESERVED


def _fresh_lets(stmts: list[Stmt]) -> list[Stmt]:
    """The statements with every let renamed (a second copy of the same code in one scope)."""
    vmap: dict = {}
    out = []
    for s in stmts:
        s = substitute(s, vmap) if vmap else s
        if isinstance(s, LetStmt):
            nv = Var(s.var.name, s.var.var_dtype)
            vmap[s.var] = nv
            s = LetStmt(nv, s.value, span=s.span)
        out.append(s)
    return out


@dataclasses.dataclass(frozen=True)
class Rings:
    """The mbarrier rings of a warp-specialized split (:mod:`warp_specialize`): a producer
    warpgroup fills the stages, and the loop built by :func:`overlap_loop` is the consumers'.
    ``full_*`` complete when a stage's tiles have landed, ``empty_*`` when every consumer thread
    is done with it; ``*_late`` are V's (None when the loop has no late tiles); ``mb`` the
    staged tiles (:func:`staged_tiles`)."""

    full: Buffer
    empty: Buffer
    full_late: Optional[Buffer]
    empty_late: Optional[Buffer]
    mb: dict


def overlap_loop(loop: For, S: int, parts: AttentionParts, new_allocs: dict, one_thread: Callable, call_stmt: Callable,
                 barrier_addr: Callable, rings: Optional[Rings] = None) -> Stmt:
    """The loop scheduled as the module docstring shows; with ``rings``, the consumers' side of
    it in a warp-specialized kernel: no loads, no block barrier, and each stage freed on its
    empty barrier once the wgmma reading it has retired (K's after ``wgmma_wait(1)``, V's after
    ``wgmma_wait(0)``)."""
    lets, g1, l1, l2, g2 = parts.lets, parts.g1, parts.l1, parts.l2, parts.g2
    early, late = parts.early, parts.late
    mb = rings.mb if rings is not None else staged_tiles(early + late, S, new_allocs)
    k, n, start = loop.var, E.as_expr(loop.extent), E.as_expr(loop.start)

    def ring(name: str) -> Buffer:
        b = Buffer(f"{k.name}_{name}", (S,), dt.uint64, "shared.dyn", span=loop.span)
        new_allocs[b] = b
        return b

    if rings is not None:
        full_e, full_l = rings.full, rings.full_late
    else:
        full_e = ring("full")
        full_l = ring("full_late") if late else None

    def free(bars: Optional[Buffer], it: E.Expr) -> list[Stmt]:
        """The consumers' release of stage ``it % S`` of a ring (warp-specialized only)."""
        return [] if bars is None else [call_stmt("tl::mbarrier_arrive", barrier_addr(bars, it % S))]

    def free_e(it: E.Expr) -> list[Stmt]:
        return free(rings.empty if rings is not None else None, it)

    def free_l(it: E.Expr) -> list[Stmt]:
        return free(rings.empty_late if rings is not None else None, it)

    def issue(prods: list[Copy], bars: Buffer, it: E.Expr) -> Stmt:
        stage = it % S
        out: list[Stmt] = [Copy(substitute(p.src, {k: start + it}), Restage(mb, stage).visit(p.dst),
                                {**p.annotations, "tma_bar": bars, "tma_stage": stage}, span=p.span)
                           for p in prods]
        out.append(one_thread(call_stmt("tl::mbarrier_arrive", barrier_addr(bars, stage))))
        return seq(*out)

    def guarded(cond: E.Expr, s: Stmt) -> Stmt:
        if isinstance(cond, E.Const):
            return s if cond.value else seq()
        return IfThenElse(cond, s)

    def issue_ahead(it: E.Expr) -> Stmt:
        """At the top of iteration ``it``: the early tiles of ``it + S - 1``, the late of ``it + S - 2``."""
        out = [guarded(E.compare("lt", it + (S - 1), n), issue(early, full_e, it + (S - 1)))]
        if late:
            out.append(guarded(E.compare("lt", it + (S - 2), n), issue(late, full_l, it + (S - 2))))
        return AttrStmt("pipeline_issue", S, seq(*out), span=loop.span)

    def wait(bars: Buffer, it: E.Expr) -> Stmt:
        return call_stmt("tl::mbarrier_wait", barrier_addr(bars, it % S), (it // S) % 2)

    def wgmma_wait(keep: int, *bufs: Buffer, after: tuple = ()) -> Stmt:
        return AttrStmt("wgmma_wait", (keep, bufs, after), seq(), span=loop.span)

    # L2's statements that touch neither G1's buffers nor the rest of L2 (acc_o *= rescale) wait
    # for the next iteration, where they run while its G1 is on the tensor cores (before G2)
    l2a = [s for s in l2 if not _conflicts(s, g1)]
    l2a = [s for s in l2a if not any(_conflicts(s, t) for t in l2 if t not in l2a)]
    l2b = [s for s in l2 if s not in l2a]

    vals = let_values(lets)

    def of_iteration(stmts: list[Stmt], it: E.Expr) -> list[Stmt]:
        """``stmts`` as iteration ``it`` runs them, with the loop body's lets inlined."""
        return [Restage(mb, it % S).visit(substitute(substitute(s, vals), {k: start + it})) for s in stmts]

    def second(it: E.Expr) -> list[Stmt]:
        """The deferred part of L2 and G2 of iteration ``it``."""
        return of_iteration(l2a, it) + ([wait(full_l, it)] if late else []) + of_iteration([g2], it)

    sync = call_stmt("sync_threads")
    zero = E.const(0)
    out: list[Stmt] = []
    if rings is None:
        out += [AttrStmt("pipeline_issue", S, one_thread(seq(
            *[call_stmt("tl::mbarrier_init", barrier_addr(b, E.const(s)), 1)
              for b in (full_e, full_l) if b is not None for s in range(S)],
            call_stmt("tl::fence_barrier_init"))), span=loop.span), sync]
        for s in range(S - 1):
            out.append(AttrStmt("pipeline_issue", S, guarded(E.compare("lt", E.const(s), n),
                                                             issue(early, full_e, E.const(s))), span=loop.span))
        for s in range(S - 2):
            if late:
                out.append(AttrStmt("pipeline_issue", S, guarded(E.compare("lt", E.const(s), n),
                                                                 issue(late, full_l, E.const(s))), span=loop.span))
    # iteration 0: the first G1 and softmax, nothing to overlap yet (G1 waited for: K's stage is free)
    first = _fresh_lets([substitute(s, {k: start}) for s in lets + [g1] + free_e(zero) + l1 + l2b])
    first = [Restage(mb, zero).visit(s) for s in first]
    # no barrier: the stages it refills were never read
    peeled = seq(wait(full_e, zero), *([] if rings is not None else [issue_ahead(zero)]), *first)
    out.append(guarded(E.compare("lt", zero, n), peeled))
    # iterations 1 .. n - 1
    it = k - start
    stage_a = Restage(mb, it % S)
    # in the loop the gemms need no fence.proxy.async when no generic store inside it writes their
    # shared operands (the copy engine fills the stages, and iteration 0's fence covered the rest);
    # G2 needs no wgmma.fence of its own when G1's, just before, follows the last access of its
    # registers (nothing of L2 deferred)
    written = set(written_buffers(seq(*lets, *l1, *l2)))

    def in_flight(g: Stmt, *also: str) -> Stmt:
        """``g`` committed and left in flight, without the fences ``also`` and, where no generic
        store in the loop writes its shared operands, without the proxy fence."""
        ops = [r.buffer for r in (g.A, g.B) if r.buffer.is_shared]  # type: ignore[attr-defined]
        opts = ("no_wait",) + also + (() if any(b in written for b in ops) else ("no_proxy_fence",))
        return AttrStmt("wgmma_async", opts, g, span=g.span)

    g2_prev = second(it - 1)
    # what the softmax computes must stay before the wait for G2 (ptxas would hoist it)
    l1_frags = tuple(dict.fromkeys(b for b in written_buffers(seq(*l1)) if b.is_fragment))
    # warp-specialized: no block barrier and no loads here (the producer's), the stages freed as
    # the wgmma reading them retire: K's after G1 of this block, V's after G2 of the previous
    top = [wait(full_e, it)] + ([] if rings is not None else [sync, issue_ahead(it)])
    body = seq(*top, *[stage_a.visit(s) for s in lets],
               in_flight(stage_a.visit(g1)), *g2_prev[:-1], in_flight(g2_prev[-1], *(() if l2a else ("no_register_fence",))),
               wgmma_wait(1, g1.C.buffer), *free_e(it),
               *[stage_a.visit(s) for s in l1], wgmma_wait(0, g2.C.buffer, g2.A.buffer, after=l1_frags),
               *free_l(it - 1), *[stage_a.visit(s) for s in l2b])
    ann = serial_annotations(loop)
    out.append(For(k, start + 1, n - 1, body, "serial", 1, ann, span=loop.span))
    # the last block's G2
    last = n - 1
    out.append(guarded(E.compare("lt", zero, n), seq(*second(last))))
    return seq(*out)
