"""Lowering ``T.reduce_*`` and the scans ``T.cumsum`` / ``T.cummax``.

A reduction along the last dimension of a fragment whose destination holds the rows of the
source layout runs in three steps: each thread combines the registers of a row it holds; the
threads sharing the row combine by warp shuffles (xor); if the row spans several warps, one lane
per warp puts its partial in shared memory and every thread combines the partials of its row.

Every other reduction (other dimensions, shared-memory operands, layouts that do not line up)
goes through shared memory: the source is staged there, then each destination element is
computed by the thread that holds it, serially along the reduced dimension.
"""
from __future__ import annotations

from typing import Any, Callable

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import SHARED_DYN, Buffer
from tegula.ir.expr import Builtin, BufferLoad, Expr, Var
from tegula.ir.combiners import COMBINERS
from tegula.ir.stmt import BufferStore, CumSum, For, IfThenElse, Reduce, Stmt, seq
from tegula.ir.tile_rules import tile_rule
from tegula.layout.fragment import MmaLayout, RowLayout, RowsOf
from tegula.backends.cuda.passes.lower_tile_ops.context import (Ctx, region_index, sync, whole)

def _init(kind: str, t: dt.DType) -> Expr:
    """What the accumulator starts from: the identity of the kind's combiner."""
    return E.const(COMBINERS[kind].identity(t), t)


def _elem(kind: str, v: Expr) -> Expr:
    return E.call("abs", v) if COMBINERS[kind].absolute else v


def _row_members(lay: Any, r: Any) -> tuple[list[int], Callable[..., Expr]]:
    """Loop extents and register index of the members of row-register ``r`` of ``lay``."""
    if isinstance(lay, MmaLayout):
        return [lay.NI, 2], lambda ni, c: ((r // 2) * lay.NI + ni) * 4 + (r % 2) * 2 + c
    assert isinstance(lay, RowLayout)
    return [lay.Q, lay.v], lambda qq, e: (r * lay.Q + qq) * lay.v + e


@tile_rule(Reduce, "cuda")
def lower_reduce(ctx: Ctx, red: Reduce) -> Stmt:
    s, d = red.src.buffer, red.dst.buffer
    if s.is_fragment and d.is_fragment and whole(red.src) and whole(red.dst) \
            and s.ndim == 2 and red.dim == 1:
        ls, ld = ctx.layout(s), ctx.layout(d)
        rows = ls.rows() if isinstance(ls, (MmaLayout, RowLayout)) else None
        if rows is not None and isinstance(ld, RowsOf) and rows.same(ld):
            return _row_reduce(ctx, red, ls, rows)
    return _staged_reduce(ctx, red)


def _row_reduce(ctx: Ctx, red: Reduce, ls: Any, rows: RowsOf) -> Stmt:
    s, d = red.src.buffer, red.dst.buffer
    acc_t = d.dtype if not (d.dtype.is_float and d.dtype.bits < 32) else dt.float32
    comb = COMBINERS[red.kind].combine
    acc = ctx.registers("red", rows.local_size, acc_t)
    t = ctx.tid
    stmts: list[Stmt] = []

    def per_row(r: Any) -> Stmt:
        exts, kfn = _row_members(ls, r)
        a = BufferLoad(acc, (r,))
        v0, v1 = Var(ctx.fresh("m")), Var(ctx.fresh("e"))
        val = E.cast(acc_t, _elem(red.kind, ctx.load(s, (), kfn(v0, v1))))
        inner = For(v1, E.const(0), exts[1], BufferStore(acc, (r,), comb(a, val)), "unroll")
        body = [BufferStore(acc, (r,), _init(red.kind, acc_t)),
                For(v0, E.const(0), exts[0], inner, "unroll")]
        for mask in ls.row_shuffle_masks():
            body.append(BufferStore(acc, (r,), comb(a, Builtin("shfl_xor", (a, E.const(mask), E.const(32)), acc_t))))
        return seq(*body)

    stmts.append(ctx.unroll("r", rows.local_size, per_row))
    nw = ls.row_cross_warp()
    if nw > 1:
        # partials of the warps sharing a row meet in shared memory
        R = ls.shape[0]
        part = Buffer(ctx.fresh("red_part"), (R * nw,), acc_t, SHARED_DYN)
        ctx.allocs.append(part)
        ctx.smem_private.append(part)  # no value outlives this reduction: loops do not stretch it
        if isinstance(ls, MmaLayout):
            wslot = ls.row_warp_slot(t)
            leader = E.compare("eq", t % 4, 0)
        else:
            wslot = (t % ls.tpr) // 32
            leader = E.compare("eq", t % 32, 0)

        def put(r: Any) -> Stmt:
            row = rows.coords(t, r)[0]
            return IfThenElse(leader, BufferStore(part, (row * nw + wslot,), BufferLoad(acc, (r,))))

        def gather(r: Any) -> Stmt:
            row = rows.coords(t, r)[0]
            w = Var(ctx.fresh("w"))
            a = BufferLoad(acc, (r,))
            return seq(BufferStore(acc, (r,), BufferLoad(part, (row * nw,))),
                       For(w, E.const(1), nw - 1, BufferStore(acc, (r,), comb(a, BufferLoad(part, (row * nw + w,)))), "unroll"))

        # the barrier after the gather frees the partials for their next writer (this reduction
        # again, in a loop, or the next reduction, whose partials share these bytes); a buffer
        # used before them in the same bytes gets its barrier from PlanSharedMemory, so none is
        # needed before the put
        stmts += [ctx.unroll("r", rows.local_size, put), sync(),
                  ctx.unroll("r", rows.local_size, gather), sync()]

    def write(r: Any) -> Stmt:
        v = BufferLoad(acc, (r,))
        if not red.clear:
            v = comb(E.cast(acc_t, ctx.load(d, (), r)), v)
        return ctx.store(d, (), v, k=r)

    stmts.append(ctx.unroll("r", rows.local_size, write))
    return seq(*stmts)


def _read_src(ctx: Ctx, buf: Buffer, idx: tuple) -> Expr:
    return ctx.load(buf, idx, staged=buf.is_fragment)


def _staged_reduce(ctx: Ctx, red: Reduce) -> Stmt:
    s, d = red.src, red.dst
    reads = [s.buffer] if s.buffer.is_fragment else []
    src_ext = [int(e) for e in s.extents]
    n_red = src_ext[red.dim]
    out_ext = src_ext[:red.dim] + src_ext[red.dim + 1:]
    acc_t = d.dtype if not (d.dtype.is_float and d.dtype.bits < 32) else dt.float32
    comb = COMBINERS[red.kind].combine
    acc = ctx.registers("red", 1, acc_t)
    z = E.const(0)

    def compute(out_idx: tuple, dst_store: Callable[[Expr], Stmt], old: Callable[[], Expr]) -> Stmt:
        kv = Var(ctx.fresh("kr"))
        full = list(out_idx[:red.dim]) + [kv] + list(out_idx[red.dim:])
        src_idx = tuple(st + i for (st, _), i in zip(s.ranges, full))
        a = BufferLoad(acc, (z,))
        v = E.cast(acc_t, _elem(red.kind, _read_src(ctx, s.buffer, src_idx)))
        res: Expr = a if red.clear else comb(E.cast(acc_t, old()), a)
        return seq(BufferStore(acc, (z,), _init(red.kind, acc_t)),
                   For(kv, E.const(0), n_red, BufferStore(acc, (z,), comb(a, v)), "serial"),
                   dst_store(res))

    if d.buffer.is_fragment and whole(d):
        lay = ctx.layout(d.buffer)

        def mine(k: Any) -> Stmt:
            didx = lay.coords(ctx.tid, k)
            oidx = _dst_to_out(d, didx, out_ext)
            return compute(oidx, lambda v: ctx.store(d.buffer, (), v, k=k), lambda: ctx.load(d.buffer, (), k))

        return ctx.staged(ctx.unroll("k", lay.local_size, mine), reads=reads)
    # shared (or part of a fragment) destination: threads share out the output elements
    staged = d.buffer.is_fragment
    writes = [d.buffer] if staged else []
    n_out = 1
    for e in out_ext:
        n_out *= e
    # a local destination is private to each thread: every thread computes all of it
    threads = 1 if d.buffer.is_local else ctx.threads
    tid = E.const(0) if threads == 1 else ctx.tid
    per = -(-n_out // threads)
    from tegula.layout.fragment import unflatten

    def share(i: Any) -> Stmt:
        o = i * threads + tid
        oidx = unflatten(o, out_ext) if out_ext else ()
        didx = _out_to_dst(d, oidx)
        st = compute(oidx, lambda v: ctx.store(d.buffer, didx, v, staged=staged),
                     lambda: ctx.load(d.buffer, didx, staged=staged))
        return IfThenElse(E.compare("lt", o, n_out), st) if n_out % threads else st

    return ctx.staged(ctx.unroll("i", per, share), reads=reads + writes, writes=writes)


def _dst_to_out(d: Any, didx: tuple, out_ext: list) -> tuple:
    """Output coordinates from destination buffer coordinates (drops a kept unit dim)."""
    if len(didx) == len(out_ext):
        return tuple(didx)
    return tuple(i for i, e in zip(didx, d.extents) if not (isinstance(e, int) and e == 1))[:len(out_ext)] \
        if len(out_ext) else ()


def _out_to_dst(d: Any, oidx: tuple) -> tuple:
    if len(oidx) == len(d.ranges):
        return tuple(st + i for (st, _), i in zip(d.ranges, oidx))
    return region_index(d, oidx)


@tile_rule(CumSum, "cuda")
def lower_cumsum(ctx: Ctx, cs: CumSum) -> Stmt:
    """Inclusive scan (``T.cumsum``, ``T.cummax``) along ``dim``: staged in shared memory, one
    thread per line, serially."""
    s, d = cs.src, cs.dst
    ext = [int(e) for e in s.extents]
    n = ext[cs.dim]
    lines = ext[:cs.dim] + ext[cs.dim + 1:]
    n_lines = 1
    for e in lines:
        n_lines *= e
    acc_t = d.dtype if not (d.dtype.is_float and d.dtype.bits < 32) else dt.float32
    comb = COMBINERS[cs.kind].combine
    acc = ctx.registers("scan", 1, acc_t)
    staged_d = d.buffer.is_fragment
    # results go to the destination's shared copy when it is a fragment
    out_buf = d.buffer
    from tegula.layout.fragment import unflatten

    per = -(-n_lines // ctx.threads)
    z = E.const(0)

    def line(i: Any) -> Stmt:
        li = i * ctx.threads + ctx.tid
        lidx = list(unflatten(li, lines)) if lines else []
        kv = Var(ctx.fresh("ks"))
        pos = (n - 1 - kv) if cs.reverse else kv
        full = lidx[:cs.dim] + [pos] + lidx[cs.dim:]
        sidx = tuple(st + x for (st, _), x in zip(s.ranges, full))
        didx = tuple(st + x for (st, _), x in zip(d.ranges, full))
        a = BufferLoad(acc, (z,))
        v = E.cast(acc_t, _elem(cs.kind, _read_src(ctx, s.buffer, sidx)))
        body = seq(BufferStore(acc, (z,), comb(a, v)), ctx.store(out_buf, didx, a, staged=staged_d))
        st = seq(BufferStore(acc, (z,), _init(cs.kind, acc_t)), For(kv, E.const(0), n, body, "serial"))
        return IfThenElse(E.compare("lt", li, n_lines), st) if n_lines % ctx.threads else st

    # a fragment destination is written through its shared copy (kept whole when only part
    # of it is the destination)
    reads = [s.buffer] if s.buffer.is_fragment else []
    if staged_d and not whole(d):
        reads.append(d.buffer)
    return ctx.staged(ctx.unroll("i", per, line), reads=reads, writes=[d.buffer] if staged_d else [])
