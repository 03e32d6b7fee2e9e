"""TmaPipeline (sm_90a): ``T.Pipelined`` loops whose producer copies the copy engine can do load
their tiles with TMA (``cp.async.bulk.tensor``) into ``S`` stages, each stage completing on an
mbarrier that counts the bytes delivered.

The producers are those of :mod:`pipeline_copies` (same rules). A copy qualifies when its global
source has a static shape of at most 5 dimensions whose row strides are multiples of 16 bytes, its
box (the region's extents) has at most 256 elements per dimension, and it fills a whole 2-d tile of
the same dtype. Loops where any producer does not qualify are left to ``PipelineCopies``.
``tl.disable_tma_lower`` turns the pass off.

Before/after (S = 3)::

    for k in T.Pipelined(n, num_stages=3):     A_s = T.alloc_shared((3, 128, 64), "float16")
        T.copy(A[by * 128, k * 64], A_s)       k_full = T.alloc_shared((3,), "uint64")   # mbarriers
        T.gemm(A_s, B_s, C)                    if tx == 0: init k_full[0..2] (1 arrival each)
                                               T.sync_threads()
                                               for s in (0, 1):                           # prologue
                                                   if s < n: T.copy(A[.., s * 64], A_s[s])  # TMA on k_full[s]
                                                             arrive(k_full[s])
                                               for k in T.serial(n):
                                                   wait(k_full[k % 3], parity (k // 3) % 2)
                                                   T.sync_threads()        # stage (k - 1) % 3 is free
                                                   if k + 2 < n: T.copy(A[.., (k + 2) * 64], A_s[(k + 2) % 3])
                                                                 arrive(k_full[(k + 2) % 3])
                                                   T.gemm(A_s[k % 3], B_s, C)

The copies keep tile form, marked ``tma_bar`` / ``tma_stage``; ``lower_tma`` turns each into one
thread's ``expect_tx`` and bulk tensor loads (one per swizzle block of the tile's shared layout).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.stmt import AttrStmt, Copy, For, Gemm, IfThenElse, Kernel, LetStmt, PrimFunc, Stmt, seq
from tegula.ir.visitor import substitute
from tegula.backends.cuda.analysis.pipelined_loop import Restage, pipeline_parts, rewrite_pipelined_loops, staged_tiles
from tegula.backends.cuda.analysis.tma import barrier_addr, call_stmt, one_thread, tile_numel, tma_copy_ok
from tegula.backends.cuda.analysis.attention import attention_parts, overlap_loop
from tegula.backends.cuda.analysis.attention import wanted as softmax_wanted



# with overlap left to the pass: the smallest stages and accumulator elements per block it is
# taken for (measured on an H200: +9-16% for 128x256 tiles with 4 stages, -11% for 64x128)
AUTO_OVERLAP_STAGES = 4
AUTO_OVERLAP_ELEMS = 128 * 256


def _tma_loop(loop: For, others: list[Stmt], new_allocs: dict, overlap: Optional[bool] = None,
              softmax: Optional[bool] = None, kernel: Optional[Kernel] = None) -> Optional[Stmt]:
    parts = pipeline_parts(loop, others)
    if parts is None:
        return None
    S, producers, consumers = parts.stages, parts.producers, parts.consumers
    if not all(tma_copy_ok(p) for p in producers):
        return None
    att = attention_parts(consumers, producers)
    if att is not None and kernel is not None and softmax_wanted(att, kernel, S, softmax):
        return overlap_loop(loop, S, att, new_allocs, one_thread, call_stmt, barrier_addr)
    # a loop of nothing but gemms may keep one k-tile of them in flight: its stage is refilled
    # one iteration later (loads run S - 2 ahead), and the accumulators are drained after the loop
    gemms = [c for c in consumers if isinstance(c, Gemm)]
    if overlap is None:
        elems = max((tile_numel(g.C.extents) for g in gemms), default=0)
        overlap = S >= AUTO_OVERLAP_STAGES and elems >= AUTO_OVERLAP_ELEMS
    overlap = overlap and S >= 3 and bool(gemms) and all(isinstance(c, (Gemm, LetStmt)) for c in consumers)
    if overlap:
        consumers = [dataclasses.replace(c, wg_wait=1) if isinstance(c, Gemm) else c for c in consumers]
    ahead_by = S - 2 if overlap else S - 1
    mb = staged_tiles(producers, S, new_allocs)
    bars = Buffer(f"{loop.var.name}_full", (S,), dt.uint64, "shared.dyn", span=loop.span)
    new_allocs[bars] = bars
    k, n, start = loop.var, loop.extent, loop.start

    def issue(it: E.Expr) -> Stmt:
        """Iteration ``it``'s tiles (0-based) into stage it % S, counted on its barrier."""
        stage = it % S
        out: list[Stmt] = []
        for p in producers:
            src = substitute(p.src, {k: start + it})
            dst = Restage(mb, stage).visit(p.dst)
            out.append(Copy(src, dst, {**p.annotations, "tma_bar": bars, "tma_stage": stage}, span=p.span))
        out.append(one_thread(call_stmt("tl::mbarrier_arrive", barrier_addr(bars, stage))))
        return seq(*out)

    # one thread initializes the barriers (wrapped so that barrier insertion leaves it whole)
    init = AttrStmt("pipeline_issue", S, one_thread(seq(
        *[call_stmt("tl::mbarrier_init", barrier_addr(bars, E.const(s)), 1) for s in range(S)],
        call_stmt("tl::fence_barrier_init"))), span=loop.span)
    sync = call_stmt("sync_threads")
    prologue: list[Stmt] = [init, sync]
    for s in range(ahead_by):
        guard = E.compare("lt", E.const(s), n)
        st = issue(E.const(s))
        prologue.append(AttrStmt("pipeline_issue", S, st if isinstance(guard, E.Const) and guard.value
                                 else IfThenElse(guard, st), span=loop.span))
    it = k - start
    ahead = it + ahead_by
    wait = call_stmt("tl::mbarrier_wait", barrier_addr(bars, it % S), (it // S) % 2)
    nxt = AttrStmt("pipeline_issue", S, IfThenElse(E.compare("lt", ahead, n), issue(ahead)), span=loop.span)
    cons = Restage(mb, it % S).visit(seq(*consumers))
    # after the barrier every thread has its stage and is done with stage (k - 1) % S, which the
    # loads issued next overwrite
    body = seq(wait, sync, nxt, cons)
    out = [*prologue, For(k, start, n, body, "serial", 1,
                          {a: v for a, v in loop.annotations.items() if a != "num_stages"}, span=loop.span)]
    if overlap:
        out.append(AttrStmt("wgmma_drain", tuple(g.C.buffer for g in gemms), seq(), span=loop.span))
    return seq(*out)


def tma_pipeline(func: PrimFunc, overlap: Optional[bool] = None, softmax_overlap: Optional[bool] = None) -> PrimFunc:
    """Pipeline every qualifying ``T.Pipelined`` loop through TMA and mbarriers (``overlap``:
    loops of gemms keep one k-tile of wgmma in flight, ``tegula.wgmma_overlap``; None: where
    the stages and the accumulator are large enough; ``softmax_overlap``: attention-shaped loops
    run their second gemm beside the next block's softmax, ``tegula.softmax_overlap``, see
    :mod:`softmax_overlap`; None: where the registers allow)."""
    return rewrite_pipelined_loops(
        func, lambda loop, after, new, kern: _tma_loop(loop, after, new, overlap, softmax_overlap, kern),
        with_kernel=True)
