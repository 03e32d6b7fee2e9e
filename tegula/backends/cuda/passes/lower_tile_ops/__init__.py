"""Lower tile operations and ``T.Parallel`` loops to per-thread code.

Input: a tile-level kernel and its layouts (those its layout map names, as InferLayouts or
``T.annotate_layout`` wrote them; inferred here for the rest). Then each statement lowers by its
class: control flow here (:data:`_BLOCK`), tile ops by their ``cuda`` rule in
:mod:`tegula.ir.tile_rules` (registered in ``lower_<op>.py``), ``T.Parallel`` nests in
:mod:`.lower_parallel`. Output: a thread-level kernel (the IR codegen reads): fragments are
register arrays, shared tiles flat arrays addressed through their shared layouts, and every
statement is what one thread (``tx = T.get_thread_binding()``) executes.

Block-level code (outside tile ops and parallel loops) runs in every thread, as in TileLang: its
element atomics are made by every thread, and its stores to global or shared memory too, except
those whose index and value are the same in every thread (:mod:`tegula.transform.thread_variance`),
which thread 0 alone makes. Barriers are not placed here
(see ``insert_barriers``), except around the staging of fragments (``Ctx.staged``).

Before/after::

    T.fill(C_local, 0)                             # tile_op: T.fill
                                                   for k in T.unroll(64):
                                                       C_local[k] = T.float32(0)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tegula.ir.annotations import LAYOUT_MAP, TMA_MAPS
from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.stmt import (WARP_SPECIALIZE, AttrStmt, Break, BufferStore, Continue, Evaluate, For,
                            IfThenElse,
                            Kernel, LetStmt, PrimFunc, SeqStmt, Stmt, TileOp, While, seq)
from tegula.ir.tile_rules import TILE_RULES
from tegula.ir.visitor import Mutator
from tegula.backends.cuda.passes.lower_tile_ops import lower_atomic, lower_copy, lower_fill, lower_gemm  # noqa: F401
from tegula.backends.cuda.passes.lower_tile_ops import lower_print, lower_reduce  # noqa: F401 (register rules)
from tegula.backends.cuda.passes.layout_inference import choose_shared_layouts, infer_layouts
from tegula.backends.cuda.passes.lower_tile_ops.lower_parallel import lower_parallel
from tegula.backends.cuda.analysis.pipelined_loop import serial_annotations
from tegula.backends.cuda.passes.lower_tile_ops.context import (Ctx, block_expr, per_thread, require_rows,
                                                          varies)
from tegula.transform.thread_variance import thread_variance, warn_uniform_adds
from tegula.backends.cuda.passes.lower_tile_ops.lower_wgmma import WGMMA_SMEM_ALIGN, lower_wgmma_drain, tma_only_tiles
from tegula.layout.wgmma import WgmmaShared


def lower_tile_ops(func: PrimFunc, arch: str = "sm_80") -> PrimFunc:
    """Lower every kernel of ``func`` to thread-level IR (``arch``: what Hopper-only calls
    such as ``T.tma_copy`` become)."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            return lower_kernel(k, arch)

    warn_uniform_adds(func)
    return M().visit(func)


def lower_kernel(k: Kernel, arch: str = "sm_80") -> Kernel:
    """One kernel in thread-level form, with its layouts recorded in its annotations."""
    plan = infer_layouts(k)
    tid = k.thread_var if k.thread_var is not None else E.Var("tx")  # T.get_thread_binding's
    ctx = Ctx(plan, tid, k.num_threads, hopper=arch.startswith("sm_9"))
    if ctx.hopper:
        ctx.tma_only = tma_only_tiles(k.body)
    # thread-level code: values derived from the thread index vary per thread, and an element
    # store or atomic that depends on one (or sits under control flow that does) is made by
    # every thread instead of by thread 0 alone
    ctx.varying = [tid] if k.thread_var is not None else []
    ctx.variance = thread_variance(k, k.thread_var)
    ctx.divergent = False
    ctx.smem_layouts = choose_shared_layouts(k, plan.threads)
    ctx.layout_spans = k.annotations.get("layout_spans") or {}
    ctx.bind_range(tid, 0, k.num_threads - 1)
    ctx.block_vars = tuple(k.block_vars)
    for v, g in zip(k.block_vars, k.grid):
        if isinstance(g, int):
            ctx.bind_range(v, 0, g - 1)
    body = lower_block(ctx, k.body)
    keep = [b for b in k.allocs if b.is_local]
    shared = [b for b in k.allocs if b.is_shared]
    for b in k.allocs:  # make sure every tile has its storage even if unused
        if b.is_fragment:
            ctx.reg(b)
        elif b.is_shared:
            ctx.shared(b)
    allocs = tuple(keep + ctx.allocs)
    ann = dict(k.annotations)
    ann["layouts"] = {b.name: plan.fragments[b].describe() for b in plan.fragments}
    ann["shared_layouts"] = {b.name: ctx.shared(b)[1].describe() for b in shared}
    ann["shared_shapes"] = {b.name: tuple(b.shape) for b in shared}
    ann.pop(LAYOUT_MAP.name, None)
    align = {**{ctx.shared(b)[0]: WGMMA_SMEM_ALIGN for b, lay in ctx.smem_layouts.items()
                if isinstance(lay, WgmmaShared)}, **ctx.smem_align}
    if align:  # shared tiles that need more than 128-byte alignment (wgmma operands, TMA boxes)
        ann["smem_align"] = align
    if ctx.tma_maps:
        ann[TMA_MAPS.name] = list(ctx.tma_maps)
    if ctx.smem_private:  # shared scratch private to one tile op (see smem_liveness)
        ann["smem_private"] = list(ctx.smem_private)
    return Kernel(k.grid, k.threads, k.block_vars, allocs, body, dict(k.alloc_inits), ann,
                  thread_var=tid, span=k.span)


def lower_block(ctx: Ctx, s: Stmt) -> Stmt:
    """A block-level statement (what every thread runs alike) in thread-level form."""
    rule = _BLOCK.get(type(s))
    if rule is not None:
        return rule(ctx, s)
    if isinstance(s, TileOp):
        return _spanned(TILE_RULES.require(s, "cuda")(ctx, s), s)
    raise UnsupportedError(f"unimplemented op {type(s).__name__} for target cuda", s.span)


def _under(ctx: Ctx, divergent: bool, s: Stmt) -> Stmt:
    old, ctx.divergent = ctx.divergent, ctx.divergent or divergent
    try:
        return lower_block(ctx, s)
    finally:
        ctx.divergent = old


def _spanned(s: Stmt, src: Stmt) -> Stmt:
    """Mark the code one tile op became, with the op's span (for `// file:line` and barriers)."""
    name = "T.Parallel" if isinstance(src, For) else f"T.{type(src).__name__.lower()}"
    return AttrStmt("tile_op", name, s, span=src.span)


def _seq(ctx: Ctx, s: SeqStmt) -> Stmt:
    return seq(*[lower_block(ctx, x) for x in s.stmts])


def _for(ctx: Ctx, s: For) -> Stmt:
    if s.kind == "parallel":
        return _spanned(lower_parallel(ctx, s), s)
    if isinstance(s.extent, int) and isinstance(s.start, E.Const) and s.start.value == 0 \
            and s.step == 1:
        ctx.bind_range(s.var, 0, max(0, s.extent - 1))
    kind = "serial" if s.kind in ("pipelined", "serial") else s.kind
    body = _under(ctx, varies(ctx, s.start, s.extent), s.body)
    extent = block_expr(ctx, s.extent) if isinstance(s.extent, E.Expr) else s.extent
    return For(s.var, block_expr(ctx, s.start), extent, body, kind, s.step, serial_annotations(s), span=s.span)


def _while(ctx: Ctx, s: While) -> Stmt:
    return While(block_expr(ctx, s.cond), _under(ctx, varies(ctx, s.cond), s.body), span=s.span)


def _if(ctx: Ctx, s: IfThenElse) -> Stmt:
    d = varies(ctx, s.cond)
    return IfThenElse(block_expr(ctx, s.cond), _under(ctx, d, s.then),
                      _under(ctx, d, s.else_) if s.else_ is not None else None, span=s.span)


def _let(ctx: Ctx, s: LetStmt) -> Stmt:
    from tegula.arith.bound import bound

    b = bound(s.value, ctx.ranges) if s.value.dtype.is_int else None
    ctx.ranges.pop(s.var, None)  # never keep the range of an earlier copy of the let
    if varies(ctx, s.value):
        ctx.varying.append(s.var)
    if b is not None:
        ctx.bind_range(s.var, *b)  # so guards on it can be proven away
    return LetStmt(s.var, block_expr(ctx, s.value), span=s.span)


def _same(ctx: Ctx, s: Stmt) -> Stmt:
    return s


def _attr(ctx: Ctx, s: AttrStmt) -> Stmt:
    if s.key == "wgmma_drain":  # after a loop that left wgmma groups in flight (TmaPipeline)
        return lower_wgmma_drain(ctx, s.value)
    if s.key == "wgmma_wait":  # (groups kept in flight, fragments to pin, to wait after): softmax_overlap
        return lower_wgmma_drain(ctx, s.value[1], s.value[0], s.value[2])
    if s.key == "wgmma_async":  # a gemm left in flight, or whose fences earlier ones cover (lower_wgmma)
        was, ctx.wgmma_opts = ctx.wgmma_opts, frozenset(s.value)
        try:
            return lower_block(ctx, s.body)
        finally:
            ctx.wgmma_opts = was
    if s.key == WARP_SPECIALIZE:
        return _warp_specialized(ctx, s)
    return AttrStmt(s.key, s.value, lower_block(ctx, s.body), span=s.span)


def _warp_specialized(ctx: Ctx, s: AttrStmt) -> Stmt:
    """``with T.ws(i):``: the region's threads run it, numbered from 0 inside (its tile ops are
    computed by them alone), and its barriers are a named barrier for them.

    Lowered form (warpgroup 1 of 256 threads)::

        attr warp_specialize (128, 128, 2):          # first thread, threads, named barrier id
            if 128 <= tx < 256:
                wg_tx = tx - 128
                ...                                  # __syncthreads() -> bar.sync 2, 128
    """
    lo, n = s.value
    bar_id = 1 + lo // 128  # 0 is __syncthreads'
    old = ctx.tid, ctx.threads, ctx.divergent
    v = E.Var(ctx.fresh("wg_tx"))
    ctx.tid, ctx.threads = v, n
    ctx.varying.append(v)
    ctx.bind_range(v, 0, n - 1)
    try:
        body = lower_block(ctx, s.body)
    finally:
        ctx.tid, ctx.threads, ctx.divergent = old
    tx = old[0]
    cond = E.binary("and", E.compare("ge", tx, lo), E.compare("lt", tx, lo + n)) if lo else E.compare("lt", tx, n)
    body = named_barriers(seq(LetStmt(v, tx - lo if lo else tx + 0), body), bar_id, n)
    return AttrStmt(WARP_SPECIALIZE, (lo, n, bar_id), IfThenElse(cond, body), span=s.span)


def named_barriers(s: Stmt, bar_id: int, n: int) -> Stmt:
    """``s`` with its ``__syncthreads()`` made the named barrier ``bar_id`` for ``n`` threads."""

    class M(Mutator):
        def visit_Evaluate(m, e: Evaluate) -> Stmt:
            if isinstance(e.value, E.Builtin) and e.value.name == "sync_threads":
                return Evaluate(E.Builtin("tl::named_barrier_sync", (E.const(bar_id), E.const(n)),
                                          e.value.dtype), span=e.span)
            return e

    return M().visit(s)


def _store(ctx: Ctx, s: BufferStore) -> Stmt:
    b = s.buffer
    value = block_expr(ctx, s.value)
    if b.is_local:
        return BufferStore(b, tuple(block_expr(ctx, i) for i in s.indices), value, span=s.span)
    if b.is_fragment:  # a one-element fragment written at block level
        lay = ctx.layout(b)
        return ctx.unroll("k", lay.local_size, lambda k: ctx.store(b, (), value, k=k))
    st = dataclasses.replace(ctx.store(b, tuple(block_expr(ctx, i) for i in s.indices), value), span=s.span)
    if per_thread(ctx, *s.indices, s.value):
        return st
    return IfThenElse(E.compare("eq", ctx.tid, 0), st, span=s.span)


def _evaluate(ctx: Ctx, s: Evaluate) -> Stmt:
    v = s.value
    if isinstance(v, E.Builtin) and v.name == "tl::ldmatrix":  # thread-level code's own ldmatrix
        src = v.args[1].args[0] if isinstance(v.args[1], E.Builtin) and v.args[1].args else None
        if isinstance(src, E.BufferLoad) and src.buffer.is_shared:
            require_rows(ctx, src.buffer, 16, "ldmatrix", s.span)
    value = block_expr(ctx, s.value)  # barrier calls: shared operands move to their lowered buffers
    return s if value is s.value else Evaluate(value, span=s.span)


_BLOCK: dict[type, Callable[[Ctx, Any], Stmt]] = {
    SeqStmt: _seq, For: _for, While: _while, IfThenElse: _if, LetStmt: _let, AttrStmt: _attr,
    BufferStore: _store, Break: _same, Continue: _same, Evaluate: _evaluate,
}
