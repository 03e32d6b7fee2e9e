"""Lowering ``T.fill`` / ``T.clear``.

A whole fragment: every thread sets its registers. ``local`` buffers: every thread sets all of
its elements. Shared and global regions: elements dealt round-robin to the threads (global
ones guarded by the bounds). Part of a fragment goes through its shared copy.

Before/after (a whole fragment in a layout of 64 registers per thread)::

    T.fill(acc, 0)                                 for k in T.unroll(64):
                                                       acc[k] = T.float32(0)
"""
from __future__ import annotations

from tegula.ir.stmt import Fill, IfThenElse, Stmt
from tegula.ir.tile_rules import tile_rule
from tegula.backends.cuda.passes.lower_tile_ops.context import Ctx, strided, whole


@tile_rule(Fill, "cuda")
def lower_fill(ctx: Ctx, s: Fill) -> Stmt:
    d = s.dst
    buf = d.buffer
    if buf.is_fragment and whole(d):
        lay = ctx.layout(buf)
        return ctx.unroll("k", lay.local_size, lambda k: ctx.store(buf, (), s.value, k=k))
    if buf.is_local:
        return strided(ctx, d, lambda idx: ctx.store(buf, idx, s.value), every_thread=True)
    staged = buf.is_fragment

    def put(idx: tuple) -> Stmt:
        st = ctx.store(buf, idx, s.value, staged=staged)
        cond = ctx.in_bounds(buf, idx) if buf.is_global else None
        return IfThenElse(cond, st) if cond is not None else st

    frag = [buf] if staged else []
    return ctx.staged(strided(ctx, d, put), reads=frag, writes=frag)
