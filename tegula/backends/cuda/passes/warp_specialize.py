"""WarpSpecialize (sm_90a): a kernel's ``T.Pipelined`` loop whose producer copies the copy engine
can do is split between warpgroups: one extra *producer* warpgroup issues the TMA loads into
``S`` stages, the kernel's own threads (the *consumers*) wait for each stage, compute, and free it.
Two rings of mbarriers hand the stages over: ``full[s]`` (the producer's 128 arrivals and the
bytes of the stage) and ``empty[s]`` (every consumer thread's arrival). The producer gives up
registers (``setmaxnreg`` down to 40) and the consumers take them (up to 232).

It can take a kernel of tile-level code with a block of 128 or 256 threads whose only pipelined
loop sits at the top of the kernel body (the other top-level statements, except lets of index
arithmetic, go to the consumers) and whose producers all pass ``tma_copy_ok``. By default it
takes loops of nothing but gemms over tiles up to 64x128, and over tiles of at least 128x256 with
the overlap below (see :func:`_wanted`); ``tegula.warp_specialize`` forces it on or off for every
loop it can take. The rest is left to ``TmaPipeline``. ``tl.disable_warp_specialized`` (or
``tl.disable_tma_lower``) removes the pass.

An attention-shaped loop (:func:`softmax_overlap.attention_parts`) that the softmax overlap suits
(:func:`softmax_overlap.wanted`, or ``tegula.softmax_overlap``) is split into that schedule
(:func:`_split_attention`): the producer loads K and V into rings of their own (full/empty
mbarriers each), the consumers run :func:`softmax_overlap.overlap_loop` on those rings with no
block barrier in the loop, freeing K's stage after ``wait_group 1`` (G1 retired) and the previous
V stage after ``wait_group 0``; by default (:data:`WS_ATTENTION`) where every block runs the same
number of key blocks. Where the trip count grows with the block (causal), the block has two
consumer warpgroups and shared memory keeps the SM to one block anyway, the loop is split with the
consumers running it as written (each gemm waited for, the two consumer warpgroups drifting apart
so that one's softmax runs beside the other's gemms); see :func:`_attention_split`.
``tegula.warp_specialize`` forces a split on or off.

With the overlap (``tegula.wgmma_overlap``, by default for accumulators of at least 128x256) the
consumers keep one k-tile of wgmma in flight: each gemm waits for all but the group it just
committed (``wait_group 1``), after which k-tile ``k - 1`` has retired and its stage is freed
(``empty[(k - 1) % S]``, from the second iteration on); the last k-tile runs after the loop with
``wait_group 0``, before anything reads the accumulators.

In a kernel its author launched in clusters of two blocks (``T.Kernel(..., cluster_dims=(2, 1))``),
a split loop of gemms has the blocks of a cluster share one operand's tiles by TMA multicast (:mod:`.tma_multicast`): each consumer frees its stage
in both blocks, and cluster barriers follow the barrier initialization and end the kernel.

Before/after (S = 2, 256 threads; the kernel gets 384)::

    T.clear(C)                              bars = T.alloc_barrier([128, 128, 256, 256])  # full, empty
    for k in T.Pipelined(n, num_stages=2):  if tx >= 256:
        T.copy(A[.., k * 64], A_s)              with T.ws(2):                           # producer
        T.gemm(A_s, B_s, C)                         T.set_max_nreg(40, 0)
    T.copy(C, D[..])                                for k in T.serial(n):
                                                        T.mbarrier_wait_parity(bars[2 + k % 2], (k // 2) % 2 ^ 1)
                                                        T.tma_copy(A[.., k * 64], A_s[k % 2], barrier=bars[k % 2])
                                                        T.mbarrier_arrive(bars[k % 2])
                                            else:
                                                with T.ws(0, 1):                        # consumers
                                                    T.set_max_nreg(232, 1)
                                                    T.clear(C)
                                                    for k in T.serial(n):
                                                        T.mbarrier_wait_parity(bars[k % 2], (k // 2) % 2)
                                                        T.gemm(A_s[k % 2], B_s, C)
                                                        T.mbarrier_arrive(bars[2 + k % 2])
                                                    T.copy(C, D[..])

Each role runs its own copy of the loop in one branch of an if / else: warps of one role never
wait for the other's, so the producer runs ahead by up to ``S`` stages; ptxas applies
``setmaxnreg`` only to code wholly inside one role (it ignores it, C7507, when the roles share a
loop) and keeps wgmma groups in flight across the consumers' back edge only in
warpgroup-uniform code (it serializes them, C7518, across divergent branches).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tegula.ir.annotations import LAYOUT_MAP
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.stmt import (WARP_SPECIALIZE, WARPGROUP, AttrStmt, Copy, For, Gemm, IfThenElse, Kernel,
                            LetStmt, PrimFunc, SeqStmt, Stmt, seq)
from tegula.ir.visitor import Mutator, post_order_visit, substitute, uses_var
from tegula.backends.cuda.analysis.pipelined_loop import (Restage, used_buffers, written_buffers, let_values, pipeline_parts,
                                                         restaged_annotations, serial_annotations, staged_tiles)
from tegula.backends.cuda.analysis.attention import AttentionParts, Rings, attention_parts, one_block_per_sm, overlap_loop
from tegula.backends.cuda.analysis.attention import wanted as softmax_wanted
from tegula.backends.cuda.analysis.tma import one_thread, barrier_addr, call_stmt, tile_numel, tma_copy_ok
from tegula.backends.cuda.analysis import tma_multicast as mc

# registers per thread after setmaxnreg: the producer's and the consumers'
# (40 * 128 + 232 * 256 fits the 64K registers of an SM with one block of 384 threads)
PRODUCER_REGS, CONSUMER_REGS = 40, 232


def _reg_budget(k: Kernel, name: str, role: int, default: int) -> list:
    """The ``setmaxnreg`` of one role (0: producer, 1: consumers): the kernel's ``ws_regs``
    annotation (``T.disable_warp_group_reg_alloc``: None, none at all;
    ``T.annotate_producer_reg_dealloc`` / ``annotate_consumer_reg_alloc``: the counts) or the
    default budget."""
    regs = k.annotations.get("ws_regs", (None, None))
    if regs is None:
        return []
    return [call_stmt(name, template=(regs[role] or default,))]


def _reads_memory(e: Any) -> bool:
    found: list = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, BufferLoad) else None)
    return bool(found)


def _pipelined_loops(s: Stmt) -> int:
    n: list = []
    post_order_visit(s, lambda x: n.append(x) if isinstance(x, For) and x.kind == "pipelined" else None)
    return len(n)


# Largest accumulator tile the pass takes by default without overlap. Measured on an H200
# (BENCHMARKS.md): +12% at 64x128 (M = 64); the corpus's 128x128x32 3-stage GEMM with 128 threads
# ran 1.46x slower split (0.376 ms against 0.257 ms at 4096^3 fp16; fp8 0.197 against 0.156 ms).
WS_AUTO_MAX_ELEMS = 64 * 128
# Smallest accumulator tile per block the pass takes by default with one k-tile of wgmma kept in
# flight in the consumers (each releases a stage one iteration late, after ``wait_group 1``).
WS_OVERLAP_MIN_ELEMS = 128 * 256
# Attention loops that the softmax overlap suits (softmax_overlap.wanted) split by default, the
# consumers running that schedule on K and V rings of their own. Measured on an H200
# (BENCHMARKS.md), d128 128x128 tiles: +7% (4x16x4096) and +10% (16k tokens) over TmaPipeline's
# overlap. Causal loops (trip counts growing with blockIdx.x) in that form measured -6% and -8%
# with a named barrier of the consumers in every iteration, and -3% / -7% without it (the barrier
# went before the loop, 2026-12-01 20:10 UTC), against TmaPipeline's loop; the plain split (the
# consumers wait for each gemm, TileLang's schedule) takes them.
WS_ATTENTION = True


def _same_trip_count(k: Kernel, loop: For, lets: list) -> bool:
    """The loop's extent (through the kernel's lets) depends on no block index."""
    return not uses_var(substitute(E.as_expr(loop.extent), let_values(lets)), list(k.block_vars))


def _attention_split(k: Kernel, loop: For, lets: list, S: int, att: Optional[AttentionParts], force: Optional[bool],
                     softmax: Optional[bool]) -> tuple[bool, bool]:
    """(split an attention loop into the softmax overlap's schedule, split it with the
    consumers running the body as written) for ``att`` (:func:`attention.attention_parts`,
    None for other loops). Forced (``tegula.warp_specialize``): the overlap's form where the
    overlap suits (:func:`softmax_overlap.wanted`), else :func:`_wanted`'s plain split. By
    default (:data:`WS_ATTENTION`) where shared memory keeps the SM to one block anyway: the
    overlap's form where every block runs the same number of key blocks, the plain form where
    the trip count grows with the block (causal) and the block has two consumer warpgroups,
    unless ``tegula.softmax_overlap`` is set (on: the overlap's form; off: no split,
    TmaPipeline's loop)."""
    if att is None:
        return False, False
    uniform = _same_trip_count(k, loop, lets)
    if force is not None:
        return bool(force) and softmax_wanted(att, k, S, softmax), False
    if not WS_ATTENTION:
        return False, False
    if uniform or softmax:
        return softmax_wanted(att, k, S, softmax), False
    # two consumer warpgroups, which drift apart (one warpgroup alone has nothing beside its softmax)
    return False, softmax is None and k.num_threads == 2 * WARPGROUP and one_block_per_sm(att, k, S)


def _gemm_loop(consumers: list) -> bool:
    """A loop body of nothing but gemms (and lets): what the overlap and the default rule take."""
    return any(isinstance(c, Gemm) for c in consumers) and all(isinstance(c, (Gemm, LetStmt)) for c in consumers)


# Smallest accumulator tile per block of 256 threads the pass takes by default for a promoting loop
# (gemms, then register code that adds the accumulator into a second one and clears it: TileLang's
# 2xAcc FP8 GEMM). Measured on an H200 (BENCHMARKS.md, fp8 4096^3 / 8192^3): 128x128 +16% / +4%,
# 128x192 +20% / +17% split; one warpgroup's promotion runs while the other's wgmma computes.
WS_PROMOTE_MIN_ELEMS = 128 * 128


def _promoting_loop(consumers: list) -> bool:
    """Gemms of shared tiles, then code that touches no shared memory (fragment arithmetic,
    global reads of scales): the periodic promotion of an FP8 GEMM. Its accumulators are read in
    the same iteration, so it runs without the overlap. (Attention is not one: a gemm follows
    its softmax.)"""
    work = [c for c in consumers if not isinstance(c, LetStmt)]
    n = next((i for i, c in enumerate(work) if not isinstance(c, Gemm)), len(work))
    gemms, rest = work[:n], work[n:]
    return (bool(gemms) and bool(rest) and all(g.A.buffer.is_shared and g.B.buffer.is_shared for g in gemms)
            and not any(isinstance(c, Gemm) or any(b.is_shared for b in used_buffers(c)) for c in rest))


def _max_elems(consumers: list) -> int:
    return max((tile_numel(g.C.extents) for g in consumers if isinstance(g, Gemm)), default=0)


def _wanted(S: int, consumers: list, force: Optional[bool], overlap: Optional[bool],
            threads: int = 0) -> tuple[bool, bool]:
    """(split the loop, keep one k-tile of wgmma in flight in the consumers) for a loop the pass
    can take. ``overlap`` (``tegula.wgmma_overlap``) forces the second on or off for loops of
    gemms. By default, measured on an H200 (BENCHMARKS.md): split loops of gemms over tiles up to
    64x128 without overlap (+12% for the 64-row tiles of M = 64), and over tiles of at least
    128x256 with it; split promoting loops (:func:`_promoting_loop`) of 256 threads over tiles
    of at least 128x128 without it; leave 128x128 tiles of 128 threads (-32% split) and
    attention (-5..-22%: the softmax between the gemms) to TmaPipeline, except the attention
    loops :func:`_specialize` splits into the softmax overlap's schedule."""
    gemm_loop = _gemm_loop(consumers)
    elems = _max_elems(consumers)
    ov = gemm_loop and (overlap if overlap is not None else elems >= WS_OVERLAP_MIN_ELEMS)
    if force is not None:
        return bool(force), bool(force) and ov
    if _promoting_loop(consumers):
        return threads == 256 and elems >= WS_PROMOTE_MIN_ELEMS, False
    if not gemm_loop:
        return False, False
    if elems >= WS_OVERLAP_MIN_ELEMS:
        return ov, ov  # without the overlap, TmaPipeline's own (at 4 stages) measured as fast
    if elems > WS_AUTO_MAX_ELEMS:
        return False, False
    return True, ov


def _prologue_copies(before: list, rest: list, pinned: Any) -> list[Copy]:
    """The copies among ``before`` (the statements ahead of the loop) that the producer can load
    by TMA (``tegula.ws_tma_prologue``): global memory into a whole 2-d shared tile that no other
    statement of the kernel (``before`` and ``rest``) writes."""
    out = []
    for s in before:
        if isinstance(s, Copy) and s.dst.buffer.is_shared and s.dst.buffer not in pinned and tma_copy_ok(s):
            if not any(t is not s and s.dst.buffer in set(written_buffers(t)) for t in before + rest):
                out.append(s)
    return out


def _specialize(k: Kernel, force: Optional[bool], overlap: Optional[bool], min_blocks: int = 0,
                softmax: Optional[bool] = None,
                tma_prologue: Optional[bool] = None) -> Optional[Kernel]:
    T = k.num_threads
    if k.thread_var is not None or len(k.threads) != 1 or T not in (128, 256):
        return None
    # the register budgets assume one block per SM: with two or more, the consumers' setmaxnreg
    # could never be granted
    if int(k.annotations.get("min_blocks_per_sm") or min_blocks or 0) > 1:
        return None
    body = list(k.body.stmts) if isinstance(k.body, SeqStmt) else [k.body]
    loops = [i for i, s in enumerate(body) if isinstance(s, For) and s.kind == "pipelined"]
    if len(loops) != 1 or _pipelined_loops(k.body) != 1:
        return None
    li = loops[0]
    loop = body[li]
    parts = pipeline_parts(loop, body[li + 1:])
    if parts is None:
        return None
    S, producers, consumers = parts.stages, parts.producers, parts.consumers
    if not all(tma_copy_ok(p) for p in producers):
        return None
    att = attention_parts(consumers, producers)
    lets = [s for s in body if isinstance(s, LetStmt)]
    att_ws, att_serial = _attention_split(k, loop, lets, S, att, force, softmax)
    split, ov = (True, False) if att_ws or att_serial else _wanted(S, consumers, force, overlap, T)
    if not split:
        return None
    pinned = LAYOUT_MAP.get(k.annotations) or {}
    if any(p.dst.buffer in pinned for p in producers):  # T.annotate_layout: no TMA box for it
        return None
    # lets of index arithmetic stay where every thread sees them; the rest is the consumers'
    if any(_reads_memory(s.value) for s in lets):
        return None
    before = [s for s in body[:li] if not isinstance(s, LetStmt)]
    after = [s for s in body[li + 1:] if not isinstance(s, LetStmt)]
    if any(isinstance(s, LetStmt) for s in body[li + 1:]):
        return None
    # the producer loads the prologue tiles (attention's Q) by default in the plain split of causal
    # attention: measured +7% / +12% at d128 4x16x4096, level at 16k and in the overlap's split
    if tma_prologue is None:
        tma_prologue = att_serial
    pro = tuple(_prologue_copies(before, [loop, *after], pinned)) if tma_prologue else ()
    before = [s for s in before if not any(s is c for c in pro)]

    new_allocs: dict = {}
    mb = staged_tiles(producers, S, new_allocs)
    tx = Var("tx")
    if att_ws:
        return _split_attention(k, loop, tx, S, att, mb, new_allocs, lets, before, after, pro)
    bars = Buffer(f"{loop.var.name}_bars", (2 * S,), dt.uint64, "shared", span=loop.span)
    kv, n, start = loop.var, loop.extent, loop.start
    local = kv if isinstance(start, E.Const) and start.value == 0 else kv - start
    it = local
    stage = it % S
    parity = (it // S) % 2
    # in the author's clusters (tma_multicast.py): the blocks of a cluster share one operand's tiles
    plan = None if not _gemm_loop(consumers) else mc.cluster_plan(k, producers, lets)
    loads = [Copy(p.src, Restage(mb, stage).visit(p.dst),
                  {**p.annotations, "tma_bar": bars, "tma_stage": stage, "tma_user": True, **mc.annotate(p, plan)},
                  span=p.span)
             for p in producers]
    # each iteration: the producer waits for its stage to be free, loads it and arrives on its
    # full barrier; the consumers wait for it, compute, and free it
    produce = [call_stmt("tl::mbarrier_wait", barrier_addr(bars, S + stage), E.binary("bitxor", parity, 1)),
               *loads, call_stmt("tl::mbarrier_arrive", barrier_addr(bars, stage))]
    ann = serial_annotations(loop)

    def role_loop(body: list, extent: E.Expr = n) -> For:
        return For(kv, start, extent, seq(*body), "serial", 1, ann, span=loop.span)

    def consume(wg_wait: int, release: Stmt) -> list:
        work = [dataclasses.replace(c, wg_wait=wg_wait) if isinstance(c, Gemm) else c for c in consumers]
        return [call_stmt("tl::mbarrier_wait", barrier_addr(bars, stage), parity),
                Restage(mb, stage).visit(seq(*work)), release]

    if ov:
        # the gemms wait for all but the group just committed: k-tile k - 1 has retired and its
        # stage is free. The last k-tile runs after the loop and waits for everything, so the
        # accumulators are complete in straight-line code before the epilogue reads them (ptxas
        # scheduled the reads of a drain after the loop ahead of its wait_group 0)
        free_prev = IfThenElse(E.compare("gt", local, 0), mc.release(plan, barrier_addr(bars, S + (it + S - 1) % S)))
        # it frees no stage: the producer has issued its last load already
        last = substitute(seq(*consume(0, seq())), {kv: start + n - 1})
        nonempty = E.compare("gt", n, 0)
        if isinstance(nonempty, E.Const):
            last = last if nonempty.value else seq()
        else:
            last = IfThenElse(nonempty, last)
        compute = [role_loop(consume(1, free_prev), n - 1), last]
    else:
        compute = [role_loop(consume(0, mc.release(plan, barrier_addr(bars, S + stage))))]

    # a stage is free once every consumer of the cluster released it
    frees = mc.frees(plan, T)
    inits = [(bars, E.const(s), WARPGROUP) for s in range(S)] + [(bars, E.const(S + s), frees) for s in range(S)]
    return _split(k, loop, tx, new_allocs, (bars,), inits, lets, role_loop(produce), [*before, *compute, *after], pro,
                  plan)


def _split(k: Kernel, loop: For, tx: Var, new_allocs: dict, bars: tuple, inits: list, lets: list, produce: Stmt,
           consume: list, prologue: tuple = (), plan: Optional[mc.ClusterPlan] = None) -> Kernel:
    """The kernel with one more warpgroup: ``produce`` for it, ``consume`` for the kernel's own
    threads, after one thread initialized the mbarriers ``inits`` ((buffer, index, arrivals)).
    ``prologue``: copies the producer issues by TMA before ``produce``, on an mbarrier of their
    own that the consumers wait for before their first statement touching those tiles.
    ``plan``: the kernel multicasts in its clusters (:mod:`.tma_multicast`): cluster barriers
    after the initialization and before the end."""
    lo_p = T = k.num_threads
    if prologue:
        zero = E.const(0)
        pbar = Buffer(f"{loop.var.name}_prologue", (1,), dt.uint64, "shared", span=loop.span)
        loads = [Copy(c.src, c.dst, {**c.annotations, "tma_bar": pbar, "tma_stage": zero, "tma_user": True},
                      span=c.span) for c in prologue]
        produce = seq(*loads, call_stmt("tl::mbarrier_arrive", barrier_addr(pbar, zero)), produce)
        tiles = {c.dst.buffer for c in prologue}
        at = next((i for i, s in enumerate(consume) if used_buffers(s) & tiles), len(consume))
        consume = [*consume[:at], call_stmt("tl::mbarrier_wait", barrier_addr(pbar, zero), 0), *consume[at:]]
        bars, inits = (*bars, pbar), [*inits, (pbar, zero, WARPGROUP)]

    def region(lo: int, threads: int, *stmts: Stmt) -> Stmt:
        return AttrStmt(WARP_SPECIALIZE, (lo, threads), seq(*stmts), span=loop.span)

    init = seq(IfThenElse(E.compare("eq", tx, 0), seq(
        *[call_stmt("tl::mbarrier_init", barrier_addr(b, i), count) for b, i, count in inits],
        call_stmt("tl::fence_barrier_init"))), call_stmt("sync_threads") if plan is None else mc.cluster_sync())
    # each role runs its own copy of the loop: a wgmma group in flight across the consumers' back
    # edge stays in warpgroup-uniform code (ptxas serializes wgmma in flight across divergent
    # branches), and setmaxnreg applies to the whole of each role
    # (one if / else: the emulator runs its sides as tasks that take turns at their waits)
    out = [*lets, init, IfThenElse(
        E.compare("ge", tx, lo_p),
        region(lo_p, WARPGROUP, *_reg_budget(k, "tl::warpgroup_reg_dealloc", 0, PRODUCER_REGS), produce),
        region(0, T, *_reg_budget(k, "tl::warpgroup_reg_alloc", 1, CONSUMER_REGS), *consume), span=loop.span)]
    allocs = tuple(new_allocs.get(b, b) for b in k.allocs) + tuple(bars)
    ann = {**restaged_annotations(k.annotations, new_allocs), "warp_specialized": tuple(range(T // WARPGROUP))}
    if plan is not None:
        out = [LetStmt(plan.rank, mc.rank_value(), span=loop.span), *out, mc.cluster_sync()]
    return dataclasses.replace(k, threads=(T + WARPGROUP,), allocs=allocs, body=seq(*out),
                               thread_var=tx, annotations=ann)


def _split_attention(k: Kernel, loop: For, tx: Var, S: int, att: AttentionParts, mb: dict, new_allocs: dict, lets: list,
                     before: list, after: list, prologue: tuple) -> Kernel:
    """The attention loop split: the producer loads K (the early tiles) and V (the late ones) of
    each key block into rings of their own, each stage waited free on its empty barrier; the
    consumers run the softmax overlap's schedule (:func:`overlap_loop` with its rings)."""
    T = k.num_threads
    early, late = att.early, att.late
    kv, n, start = loop.var, loop.extent, loop.start
    it = kv if isinstance(start, E.Const) and start.value == 0 else kv - start
    stage, parity = it % S, (it // S) % 2

    def ring(name: str) -> Buffer:
        return Buffer(f"{kv.name}_{name}", (S,), dt.uint64, "shared", span=loop.span)

    rings = Rings(ring("full"), ring("empty"), ring("full_late") if late else None,
                  ring("empty_late") if late else None, mb)
    produce: list[Stmt] = []
    for prods, full, empty in ((early, rings.full, rings.empty), (late, rings.full_late, rings.empty_late)):
        if not prods:
            continue
        produce += [call_stmt("tl::mbarrier_wait", barrier_addr(empty, stage), E.binary("bitxor", parity, 1)),
                    *[Copy(p.src, Restage(mb, stage).visit(p.dst),
                           {**p.annotations, "tma_bar": full, "tma_stage": stage, "tma_user": True}, span=p.span)
                      for p in prods],
                    call_stmt("tl::mbarrier_arrive", barrier_addr(full, stage))]
    ann = serial_annotations(loop)
    producer = For(kv, start, n, seq(*produce), "serial", 1, ann, span=loop.span)
    consumer = overlap_loop(loop, S, att, new_allocs, one_thread, call_stmt, barrier_addr, rings)
    bars = tuple(b for b in (rings.full, rings.empty, rings.full_late, rings.empty_late) if b is not None)
    inits = [(b, E.const(s), WARPGROUP if b in (rings.full, rings.full_late) else T) for b in bars for s in range(S)]
    return _split(k, loop, tx, new_allocs, bars, inits, lets, producer, [*before, consumer, *after], prologue)


def warp_specialize(func: PrimFunc, tma_off: Optional[bool] = None, force: Optional[bool] = None,
                    overlap: Optional[bool] = None, min_blocks: Optional[int] = None,
                    softmax: Optional[bool] = None,
                    tma_prologue: Optional[bool] = None) -> PrimFunc:
    """Split every qualifying kernel's pipelined loop into a TMA producer warpgroup and its
    consumers (``tma_off``: ``tl.disable_tma_lower`` is set, and the pass does nothing;
    ``force``: ``tegula.warp_specialize``, on or off for every loop it can take, else the
    measured rule of :func:`_wanted`; ``overlap``: ``tegula.wgmma_overlap``; ``min_blocks``:
    ``tegula.min_blocks_per_sm``, above 1 the pass leaves the kernel, as it does a kernel
    annotated with ``T.annotate_min_blocks_per_sm``; ``softmax``: ``tegula.softmax_overlap``,
    whether an attention loop split runs the softmax overlap's schedule; ``tma_prologue``:
    ``tegula.ws_tma_prologue``, the producer loads the tiles copied before the loop, see
    :func:`_prologue_copies`). A split loop of gemms in a kernel its author launched in
    2-block clusters shares one operand's tiles by TMA multicast (:mod:`.tma_multicast`)."""
    if tma_off:
        return func

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            got = _specialize(k, force, overlap, int(min_blocks or 0), softmax, tma_prologue)
            return k if got is None else got

    return M().visit(func)
