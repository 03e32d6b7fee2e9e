"""Lowering ``T.atomic_add / max / min``.

The element form at block level is issued by every thread (as every block-level statement
runs in every thread: :mod:`tegula.transform.thread_variance`); inside ``T.Parallel`` (the
``cuda.lane`` rule) by each iteration's thread, once per element even where the layout
replicates it. The tile form: each thread adds the elements its registers hold (a whole
fragment), or elements dealt round-robin (memory, or part of a fragment through its shared
copy); out-of-bounds global elements are dropped.

Before/after (element form)::

    T.atomic_add(C[i], v)                          T.tl_atomic_add(T.address_of(C[i]), v)
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Expr
from tegula.ir.stmt import Atomic, Evaluate, IfThenElse, Stmt
from tegula.ir.tile_rules import tile_rule
from tegula.backends.cuda.passes.lower_tile_ops.context import (Ctx, addr, block_expr, call, guard_primary,
                                                          region_index, strided, whole)

_ATOMIC_FN = {"add": "tl::atomic_add", "max": "tl::atomic_max", "min": "tl::atomic_min"}


def atomic_update(ctx: Ctx, kind: str, buf: Buffer, idx: tuple, value: Expr) -> Stmt:
    """One atomic update of ``buf[idx]``."""
    target = ctx.load(buf, idx)
    return Evaluate(call(_ATOMIC_FN[kind], addr(target), E.cast(buf.dtype, value)))


def _guarded(ctx: Ctx, s: Atomic, didx: tuple, value: Expr) -> Stmt:
    st = atomic_update(ctx, s.kind, s.dst.buffer, didx, value)
    cond = ctx.in_bounds(s.dst.buffer, didx) if s.dst.buffer.is_global else None
    return IfThenElse(cond, st) if cond is not None else st


@tile_rule(Atomic, "cuda")
def lower_atomic(ctx: Ctx, s: Atomic) -> Stmt:
    if isinstance(s.value, E.Expr):
        idx = tuple(st for st, _ in s.dst.ranges)
        return atomic_update(ctx, s.kind, s.dst.buffer, idx, block_expr(ctx, s.value))
    v = s.value
    if v.buffer.is_fragment and whole(v):
        lay = ctx.layout(v.buffer)

        def one(k: Any) -> Stmt:
            tile = tuple(i for i, (_, e) in zip(lay.coords(ctx.tid, k), v.ranges)
                         if not (isinstance(e, int) and e == 1))
            didx = region_index(s.dst, tile)
            return guard_primary(lay, ctx.tid, k, _guarded(ctx, s, didx, ctx.load(v.buffer, (), k)))

        return ctx.unroll("k", lay.local_size, one)
    staged = v.buffer.is_fragment

    def put(idx: tuple) -> Stmt:
        tile = tuple(i - st for i, (st, e) in zip(idx, v.ranges) if not (isinstance(e, int) and e == 1))
        didx = region_index(s.dst, tile)
        return _guarded(ctx, s, didx, ctx.load(v.buffer, idx, staged=staged))

    return ctx.staged(strided(ctx, v, put), reads=[v.buffer] if staged else [])


@tile_rule(Atomic, "cuda.lane")
def lower_lane_atomic(tb: Any, s: Atomic) -> Stmt:
    """An element atomic inside a T.Parallel body (``tb`` is the body's ThreadBody)."""
    ctx = tb.ctx
    idx = tuple(tb.expr(st) for st, _ in s.dst.ranges)
    if not isinstance(s.value, E.Expr):
        raise UnsupportedError("tile atomics inside T.Parallel", s.span)
    st = atomic_update(ctx, s.kind, s.dst.buffer, idx, tb.expr(s.value))
    if tb.drive is not None and tb.k is not None:
        st = guard_primary(tb.drive, ctx.tid, tb.k, st)
    return st
