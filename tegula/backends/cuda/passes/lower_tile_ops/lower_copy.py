"""Lowering ``T.copy`` to per-thread code.

- fragment -> fragment with the same layout: register moves;
- into / out of a fragment: each thread moves the elements its registers hold;
- everything else (global <-> shared, shared <-> shared): the tile is cut into 16-byte vectors
  (when dtypes match and the innermost dimension is contiguous and aligned in both buffers) dealt
  to the threads round-robin, so consecutive threads touch consecutive 16-byte chunks (coalesced).
  With ``async`` (set by the pipeline pass) global -> shared vectors use ``cp.async`` with
  zero-fill, so out-of-bounds reads give zero without a branch.

Out-of-bounds global reads give zero and out-of-bounds global writes are dropped, as the
interpreter defines.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.arith.simplify import const_int, simplify
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import BufferLoad, Expr
from tegula.ir.stmt import Copy, Evaluate, IfThenElse, Stmt, seq
from tegula.ir.tile_rules import tile_rule
from tegula.layout.fragment import unflatten
from tegula.backends.cuda.passes.lower_tile_ops.context import (Ctx, addr, call, guard_primary,
                                                          region_index, whole)


def _guarded_load(ctx: Ctx, buf: Buffer, idx: tuple, k: Any = None) -> Expr:
    v = ctx.load(buf, idx, k)
    if buf.is_global:
        cond = ctx.in_bounds(buf, idx)
        if cond is not None:
            return E.select(cond, v, E.cast(buf.dtype, 0))
    return v


def _guarded_store(ctx: Ctx, buf: Buffer, idx: tuple, value: Expr, k: Any = None) -> Stmt:
    st = ctx.store(buf, idx, value, k)
    if buf.is_global:
        cond = ctx.in_bounds(buf, idx)
        if cond is not None:
            return IfThenElse(cond, st)
    return st


def _tile_idx(r: BufferRegion, buf_idx: tuple) -> tuple:
    """Tile coordinates (non-unit extents) of buffer index ``buf_idx`` inside whole-buffer ``r``."""
    return tuple(i for i, (_, e) in zip(buf_idx, r.ranges) if not (isinstance(e, int) and e == 1))


@tile_rule(Copy, "cuda")
def lower_copy(ctx: Ctx, c: Copy) -> Stmt:
    if "tma_bar" in c.annotations:  # marked by TmaPipeline (sm_90a) or written as T.tma_copy
        from tegula.backends.cuda.passes.lower_tile_ops.lower_tma import lower_tma_copy

        return lower_tma_copy(ctx, c, lambda plain: lower_copy(ctx, plain))
    if "tma_store" in c.annotations:  # marked by TmaStores (sm_90a)
        from tegula.backends.cuda.passes.lower_tile_ops.lower_tma import lower_tma_store

        return lower_tma_store(ctx, c, lambda plain: lower_copy(ctx, plain))
    s, d = c.src, c.dst
    sf, df = s.buffer.is_fragment, d.buffer.is_fragment
    if sf and df and whole(s) and whole(d) and ctx.layout(s.buffer).same(ctx.layout(d.buffer)):
        lay = ctx.layout(d.buffer)
        return ctx.unroll("k", lay.local_size, lambda k: ctx.store(
            d.buffer, (), ctx.load(s.buffer, (), k), k=k))
    if df and whole(d) and not sf:
        vec = _fragment_vector(ctx, c, d, s)
        if vec is not None:
            return vec
    if sf and whole(s) and not df:
        vec = _fragment_vector(ctx, c, s, d)
        if vec is not None:
            return vec
    if df and whole(d):
        lay = ctx.layout(d.buffer)

        def into(k: Any) -> Stmt:
            tile = _tile_idx(d, lay.coords(ctx.tid, k))
            src_idx = region_index(s, tile)
            v = ctx.load(s.buffer, src_idx, staged=True) if sf else _guarded_load(ctx, s.buffer, src_idx)
            return ctx.store(d.buffer, (), v, k=k)

        # different layouts: the source goes through its shared copy
        return ctx.staged(ctx.unroll("k", lay.local_size, into), reads=[s.buffer] if sf else [])
    if sf and whole(s):
        lay = ctx.layout(s.buffer)

        def out(k: Any) -> Stmt:
            tile = _tile_idx(s, lay.coords(ctx.tid, k))
            return guard_primary(lay, ctx.tid, k, _guarded_store(
                ctx, d.buffer, region_index(d, tile), ctx.load(s.buffer, (), k)))

        return ctx.unroll("k", lay.local_size, out)
    if sf or df:
        # a part of a fragment: go through its shared copy
        frags = [r.buffer for r, f in ((s, sf), (d, df)) if f]
        return ctx.staged(_flat_copy(ctx, c, staged_src=sf, staged_dst=df), reads=frags,
                          writes=[d.buffer] if df else [])
    return _flat_copy(ctx, c)


def _vector_width(ctx: Ctx, c: Copy, tile: tuple) -> int:
    s, d = c.src, c.dst
    if s.dtype != d.dtype or not tile:
        return 1
    elt = s.dtype.itemsize
    v = 16 // elt
    while v > 1:
        if tile[-1] % v == 0 and all(_contiguous_aligned(ctx, r, v) for r in (s, d)):
            return v
        v //= 2
    return 1


def _contiguous_aligned(ctx: Ctx, r: BufferRegion, v: int) -> bool:
    buf = r.buffer
    last_start, last_ext = r.ranges[-1]
    if isinstance(last_ext, int) and last_ext == 1:
        return False  # the innermost tile dim is not the buffer's last dim
    if buf.is_fragment:
        return False
    dim = buf.shape[-1]
    if not isinstance(dim, int) or dim % v:
        return False
    if buf.is_shared:
        lay = ctx.shared(buf)[1]
        if hasattr(lay, "chunk") and lay.chunk % v:  # vectors must not straddle moved chunks
            return False
    m = const_int(simplify(last_start % v))
    return m == 0


def _flat_copy(ctx: Ctx, c: Copy, staged_src: bool = False, staged_dst: bool = False) -> Stmt:
    s, d = c.src, c.dst
    tile = tuple(e for e in s.tile_shape())
    if not all(isinstance(e, int) for e in tile):
        from tegula.errors import UnsupportedError

        raise UnsupportedError("T.copy with a runtime tile size is not supported on CUDA yet", c.span)
    tile = tuple(int(e) for e in tile) or (1,)
    n = 1
    for e in tile:
        n *= e
    v = 1 if (staged_src or staged_dst) else _vector_width(ctx, c, tile)
    chunks = n // v
    # a local buffer is private to each thread: every thread fills the whole of its own copy
    private = d.buffer.is_local
    T = 1 if private else ctx.threads
    tid = E.const(0) if private else ctx.tid
    per = -(-chunks // T)
    use_async = bool(c.annotations.get("async")) and s.buffer.is_global and d.buffer.is_shared

    def one(i: Any) -> Stmt:
        ch = i * T + tid
        idx = unflatten(ch * v, tile) if len(tile) > 1 or tile != (1,) else (E.const(0),)
        if s.tile_shape() == ():
            idx = ()
        si, di = region_index(s, idx), region_index(d, idx)
        body: Stmt
        if v == 1:
            val = ctx.load(s.buffer, si, staged=staged_src) if staged_src else _guarded_load(ctx, s.buffer, si)
            body = ctx.store(d.buffer, di, val, staged=staged_dst) if staged_dst else \
                _guarded_store(ctx, d.buffer, di, val)
        else:
            src_ok = ctx.in_bounds(s.buffer, si) if s.buffer.is_global else None
            dst_ok = ctx.in_bounds(d.buffer, di) if d.buffer.is_global else None
            sa, da = addr(ctx.load(s.buffer, si)), addr(ctx.load(d.buffer, di))
            nbytes = v * s.dtype.itemsize
            if use_async:
                body = Evaluate(call("tl::cp_async_zfill", da, sa,
                                     src_ok if src_ok is not None else E.const(True), template=(nbytes,)))
            else:
                body = Evaluate(call("tl::copy_vec", da, sa, template=(nbytes,)))
                if src_ok is not None:
                    zero = seq(*[ctx.store(d.buffer, di[:-1] + (di[-1] + e,), E.cast(d.dtype, 0))
                                 for e in range(v)])
                    body = IfThenElse(src_ok, body, zero)
            if dst_ok is not None:
                body = IfThenElse(dst_ok, body)
        if chunks % T:
            body = IfThenElse(E.compare("lt", ch, chunks), body)
        return body

    return ctx.unroll("i", per, one)


def _fragment_vector(ctx: Ctx, c: Copy, frag_r: BufferRegion, mem_r: BufferRegion) -> Optional[Stmt]:
    """A fragment <-> memory copy moving whole vectors: the ``v`` registers from ``k0 = v*i``
    hold consecutive elements of the last dimension, which are consecutive in memory too.

    Loads go memory -> a small register array of the memory's dtype -> converted into the
    fragment; stores the other way. Returns None when the vector form does not apply."""
    frag = frag_r.buffer
    lay = ctx.layout(frag)
    v = lay.vec_width()
    mem = mem_r.buffer
    while v > 1 and (v * mem.dtype.itemsize > 16 or not _contiguous_aligned(ctx, mem_r, v)
                     or lay.local_size % v):
        v //= 2
    if v <= 1 or frag_r.tile_shape()[-1:] != mem_r.tile_shape()[-1:]:
        return None
    load = frag_r is c.dst
    nbytes = v * mem.dtype.itemsize
    tmp = ctx.registers("vec", v, mem.dtype)

    def one(i: Any) -> Stmt:
        k0 = i * v
        tile = _tile_idx(frag_r, lay.coords(ctx.tid, k0))
        midx = region_index(mem_r, tile)
        ok = ctx.in_bounds(mem, midx) if mem.is_global else None
        m_addr = addr(ctx.load(mem, midx))
        t_addr = addr(BufferLoad(tmp, (E.const(0),)))
        if load:
            move: Stmt = Evaluate(call("tl::copy_vec", t_addr, m_addr, template=(nbytes,)))
            if ok is not None:
                move = IfThenElse(ok, move, seq(*[ctx.store(tmp, (E.const(e),), E.cast(mem.dtype, 0)) for e in range(v)]))
            conv = seq(*[ctx.store(frag, (), ctx.load(tmp, (E.const(e),)), k=k0 + e) for e in range(v)])
            return seq(move, conv)
        conv = seq(*[ctx.store(tmp, (E.const(e),), ctx.load(frag, (), k0 + e)) for e in range(v)])
        move = Evaluate(call("tl::copy_vec", m_addr, t_addr, template=(nbytes,)))
        if ok is not None:
            move = IfThenElse(ok, move)
        return guard_primary(lay, ctx.tid, k0, seq(conv, move))

    return ctx.unroll("k", lay.local_size // v, one)

