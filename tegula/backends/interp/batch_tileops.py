"""Tile operations while blocks run side by side (:mod:`.batch`): one tile per block of the batch.

A region is read as an array of shape ``(blocks,) + extents``: a view of a stacked buffer, the
same global tile for every block (broadcast), or a gather where its starts differ per block;
out-of-bounds elements read as zero. Writes drop out-of-bounds elements and skip inactive blocks
(lane masks of block-dependent branches and loop counts); writes into global memory record the
elements each block wrote. The arithmetic is the block-by-block rules' (:mod:`.tileops`), along
one more leading axis, so results are bit for bit the same.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tegula.errors import ShapeError, UnsupportedError
from tegula.ir import ops
from tegula.ir.buffer import BufferRegion
from tegula.ir.combiners import COMBINERS
from tegula.ir.expr import Const
from tegula.ir.stmt import Atomic, Copy, CumSum, Fill, Gemm, Reduce
from tegula.backends.closure import F32, StmtFn, checks_unwritten, compile_expr, is_narrow, unwritten_read
from tegula.backends.interp.batch import block_mask, per_block, recorded_write
from tegula.backends.interp.context import Ctx
from tegula.backends.interp.operands import KEPT, widened
from tegula.backends.interp.tileops import (BATCHED, _acc_dtype, _clip, _prod, _reduce_tile, _scanned,
                                            accumulated, apply_copy_flags)


class BatchRegion:
    """A compiled :class:`BufferRegion` read and written for every block of a batch."""

    def __init__(self, r: BufferRegion, ctx: Ctx, node: Any):
        self.node = node
        self.buffer = r.buffer
        self.bslot = ctx.slot(r.buffer)
        self.size = ctx.batch.size
        self.stacked = id(r.buffer) in ctx.batch.stacked
        self.record = ctx.batch.writes if r.buffer.is_global else None
        if r.buffer.is_var:
            raise UnsupportedError("a tile operation on a T.alloc_var", node.span)
        ranges = r.ranges[1:] if self.stacked else r.ranges
        self.starts: list = []
        self.exts: list = []
        self.vec = False
        for st, ex in ranges:
            if isinstance(st, Const):
                self.starts.append(int(st.value))
            else:
                ce = compile_expr(st, ctx)
                self.vec |= ce.vec
                self.starts.append((ce.fn, ce.vec))
            if isinstance(ex, int):
                self.exts.append(ex)
            else:
                ce = compile_expr(ex, ctx)
                if ce.vec:
                    raise UnsupportedError("a tile whose extents differ per block", node.span)
                self.exts.append(ce.fn)
        self.nd = len(self.exts)

    def resolve(self, env: list) -> tuple:
        """(array, starts: ints or one int64 per block, extents)."""
        st: list = []
        for s in self.starts:
            if type(s) is int:
                st.append(s)
            elif s[1]:
                st.append(per_block(s[0](env), self.size).astype(np.int64))
            else:
                st.append(int(s[0](env)))
        ex = [e if type(e) is int else max(0, int(e(env))) for e in self.exts]
        return env[self.bslot], st, ex

    def extents(self, env: list) -> list:
        return self.resolve(env)[2]

    def _index(self, a: np.ndarray, st: list, ex: list) -> tuple:
        """Index arrays (broadcasting to ``(blocks,) + ex``) and the in-bounds mask (None when
        every element is in bounds; out-of-bounds indices are then clipped)."""
        size, nd = self.size, self.nd
        shape = a.shape[1:] if self.stacked else a.shape
        ix: list = []
        valid = None
        for d, (s, e, n) in enumerate(zip(st, ex, shape)):
            s = s.reshape((size,) + (1,) * nd) if isinstance(s, np.ndarray) else s
            i = s + np.arange(e, dtype=np.int64).reshape((1,) * (d + 1) + (e,) + (1,) * (nd - d - 1))
            lo, hi = (s.min(), s.max()) if isinstance(s, np.ndarray) else (s, s)
            if lo < 0 or hi + e > n:
                ok = (i >= 0) & (i < n)
                valid = ok if valid is None else valid & ok
                i = np.clip(i, 0, n - 1)
            ix.append(i)
        if self.stacked:
            ix.insert(0, np.arange(size).reshape((size,) + (1,) * nd))
        return tuple(ix), valid

    def read(self, env: list) -> np.ndarray:
        """The tiles, shape ``(blocks,) + extents``; out-of-bounds elements read as zero."""
        a, st, ex = self.resolve(env)
        size = self.size
        if not self.vec:
            lead = (slice(None),) if self.stacked else ()
            shape = a.shape[1:] if self.stacked else a.shape
            if all(0 <= s and s + e <= n for s, e, n in zip(st, ex, shape)):
                tile = a[lead + tuple(slice(s, s + e) for s, e in zip(st, ex))]
            else:
                tile = np.zeros(((size,) if self.stacked else ()) + tuple(ex), a.dtype)
                src, dst = _clip(shape, st, ex)
                if src is not None:
                    tile[lead + dst] = a[lead + src]
            return tile if self.stacked else np.broadcast_to(tile, (size,) + tile.shape)
        tile = self._windows(a, st, ex)
        if tile is not None:
            return tile
        ix, valid = self._index(a, st, ex)
        tile = a[ix]
        if valid is not None:
            tile = np.where(valid, tile, np.zeros((), a.dtype))
        return tile

    def _windows(self, a: np.ndarray, st: list, ex: list) -> Optional[np.ndarray]:
        """The tiles at per-block starts, every one inside the array, gathered as whole windows
        (a view of every ``ex``-sized window, indexed by the starts: rows are copied, not
        elements by index arrays); None when some tile crosses the array's bounds."""
        size, nd = self.size, self.nd
        shape = a.shape[1:] if self.stacked else a.shape
        if not nd or any(e <= 0 for e in ex):
            return None
        starts = []
        for s, e, n in zip(st, ex, shape):
            lo, hi = (int(s.min()), int(s.max())) if isinstance(s, np.ndarray) else (s, s)
            if lo < 0 or hi + e > n:
                return None
            starts.append(s if isinstance(s, np.ndarray) else np.full(size, s, np.int64))
        axes = tuple(range(1, nd + 1)) if self.stacked else tuple(range(nd))
        # numpy's stride tricks rebuild the array from its type string, which ml_dtypes' types
        # (fp8 '<f1', bfloat16) do not round-trip: take the windows of their bits
        bits = a.dtype.type.__module__.startswith("ml_dtypes")
        base = a.view(f"u{a.dtype.itemsize}") if bits else a
        windows = np.lib.stride_tricks.sliding_window_view(base, tuple(ex), axis=axes)
        if self.stacked:
            starts.insert(0, np.arange(size))
        out = windows[tuple(starts)]
        return out.view(a.dtype) if bits else out

    def write(self, env: list, tile: np.ndarray, mask: Optional[np.ndarray]) -> None:
        """Store one tile per block, dropping out-of-bounds elements and inactive blocks."""
        a, st, ex = self.resolve(env)
        size, nd = self.size, self.nd
        want = (size,) + tuple(ex)
        if tile.shape != want:
            if tile.size != _prod(want):
                raise ShapeError(f"tile of shape {tile.shape[1:]} does not fit region of "
                                 f"'{self.buffer.name}' with extents {tuple(ex)}", self.node.span)
            tile = tile.reshape(want)
        if self.stacked and not self.vec:
            dst, src = _clip(a.shape[1:], st, ex)
            if dst is None:
                return
            view = a[(slice(None),) + dst]
            part = tile[(slice(None),) + src]
            if mask is None:
                view[...] = part
            else:
                np.copyto(view, part, casting="unsafe", where=mask.reshape((size,) + (1,) * nd))
            return
        ix, valid = self._index(a, st, ex)
        sel = valid
        if mask is not None:
            m = mask.reshape((size,) + (1,) * nd)
            sel = m if sel is None else sel & m
        if sel is not None:
            sel = np.broadcast_to(sel, want)
            ix = tuple(np.broadcast_to(x, want)[sel] for x in ix)
            tile = tile[sel]
        if self.record is None:
            a[ix] = tile
            return
        if sel is None:
            ix = tuple(np.broadcast_to(x, want) for x in ix)
        flat, old = recorded_write(a, ix, tile)
        blocks = np.broadcast_to(np.arange(size).reshape((size,) + (1,) * nd), want)
        env[self.record].append((self.bslot, flat, blocks if sel is None else blocks[sel], old))

    def view(self, env: list) -> np.ndarray:
        """The tiles of a stacked buffer as a writable view (raises when not inside it)."""
        a, st, ex = self.resolve(env)
        if not self.stacked or self.vec or \
                not all(0 <= s and s + e <= n for s, e, n in zip(st, ex, a.shape[1:])):
            raise UnsupportedError("a gemm accumulator outside a block's own tile", self.node.span)
        return a[(slice(None),) + tuple(slice(s, s + e) for s, e in zip(st, ex))]


def _active(env: list, size: int) -> tuple:
    m = block_mask(env, size)
    return m, m is None or bool(m.any())


def _copy(s: Copy, ctx: Ctx) -> StmtFn:
    src, dst = BatchRegion(s.src, ctx, s), BatchRegion(s.dst, ctx, s)
    sd, dd = s.src.buffer.dtype, s.dst.buffer.dtype
    narrow_dst = is_narrow(dd) and sd != dd and sd.np != F32
    to_int = sd.is_float and dd.is_int
    size = ctx.batch.size
    flagged = bool(s.annotations.get("relu") or s.annotations.get("transpose_tile"))

    def copy(env: list) -> None:
        m, any_ = _active(env, size)
        if not any_:
            return
        tile = src.read(env)
        if flagged:
            tile = apply_copy_flags(tile, s.annotations, batched=True)
        if narrow_dst:
            tile = ops.widen(tile)
        elif to_int:
            tile = ops.cast_array(tile, sd, dd)
        dst.write(env, tile, m)
    return copy


def _as3d(x: np.ndarray, node: Any, what: str) -> np.ndarray:
    if x.ndim == 3:
        return x
    if x.ndim > 3 and _prod(x.shape[1:-2]) == 1:
        return x.reshape(x.shape[:1] + x.shape[-2:])
    raise ShapeError(f"T.gemm: {what} must be a 2-D tile, got shape {x.shape[1:]}", node.span)


def _gemm(s: Gemm, ctx: Ctx) -> StmtFn:
    ra, rb, rc = BatchRegion(s.A, ctx, s), BatchRegion(s.B, ctx, s), BatchRegion(s.C, ctx, s)
    if not rc.stacked or rc.vec:
        raise UnsupportedError("a gemm accumulator outside a block's own tile", s.span)
    cd = s.C.buffer.dtype
    ta, tb, clear = s.transpose_A, s.transpose_B, s.clear_accum
    comp = np.dtype(np.float64) if cd.is_int or cd.bits == 64 else F32
    size = ctx.batch.size
    kept = ctx.slot(KEPT)
    checked = {id(r): checks_unwritten(r.buffer) for r in (ra, rb, rc)}

    def gemm(env: list) -> None:
        m, any_ = _active(env, size)
        if not any_:
            return
        c = rc.view(env)
        a, b = _as3d(ra.read(env), s, "A"), _as3d(rb.read(env), s, "B")
        # never-written operands (a missing T.clear): the rerun block by block names the block
        for r, x, what in ((ra, a, "A"), (rb, b, "B"), (rc, None if clear else c, "C")):
            if x is not None and checked[id(r)]:
                unwritten_read(r.buffer, x if m is None else x[m], s.span, f"T.gemm reads {what}: a read")
        if m is not None and m.all():
            m = None
        if m is not None:  # the products of active blocks only
            m = np.flatnonzero(m)
            a, b = a[m], b[m]
        a = widened(env, kept, a, comp)
        b = widened(env, kept, b, comp)
        if ta:
            a = a.transpose(0, 2, 1)
        if tb:
            b = b.transpose(0, 2, 1)
        if a.shape[2] != b.shape[1]:
            raise ShapeError(f"T.gemm: op(A) is {a.shape[1:]} but op(B) is {b.shape[1:]}", s.span)
        p = a @ b
        c3 = _as3d(c, s, "C")
        if m is not None:  # active blocks only: their accumulators, written back below
            c3 = c3[m]
        if c3.shape != p.shape:
            raise ShapeError(f"T.gemm: C is {c3.shape[1:]} but op(A) @ op(B) is {p.shape[1:]}",
                             s.span)
        r = accumulated(p, c3, c.dtype, comp, clear,
                        m is None and (c3 is c or np.may_share_memory(c3, c)))
        if r is None:
            return
        if m is None:
            c[...] = r.reshape(c.shape)
        else:
            c[m] = r.reshape((len(m),) + c.shape[1:])
    return gemm


def _reduce(s: Reduce, ctx: Ctx) -> StmtFn:
    src, dst = BatchRegion(s.src, ctx, s), BatchRegion(s.dst, ctx, s)
    dim = s.dim + src.nd if s.dim < 0 else s.dim
    if not 0 <= dim < src.nd:
        raise ShapeError(f"T.reduce_{s.kind}: dim {s.dim} is out of range", s.span)
    dtype = s.dst.buffer.dtype
    acc = _acc_dtype(dtype)
    c = COMBINERS[s.kind]
    clear = s.clear
    size = ctx.batch.size
    check_src, check_dst = checks_unwritten(src.buffer), not clear and checks_unwritten(dst.buffer)

    def reduce(env: list) -> None:
        m, any_ = _active(env, size)
        if not any_:
            return
        tile = src.read(env)
        if check_src:   # never-written elements: the rerun block by block names the block
            unwritten_read(src.buffer, tile if m is None else tile[m], s.span, f"T.reduce_{s.kind} reads its source: a read")
        r = _reduce_tile(c, tile, dim + 1, acc, dtype)
        if not clear:
            old = dst.read(env)
            if check_dst:
                unwritten_read(dst.buffer, old if m is None else old[m], s.span,
                               f"T.reduce_{s.kind}(clear=False) combines with its destination: a read")
            if old.size != r.size:
                raise ShapeError(f"T.reduce_{s.kind}: destination holds {old.size // size} "
                                 f"elements but the reduction gives {r.shape[1:]}", s.span)
            r = c.ufunc(r, old.reshape(r.shape).astype(acc, copy=False))
        dst.write(env, r, m)
    return reduce


def _cumsum(s: CumSum, ctx: Ctx) -> StmtFn:
    src, dst = BatchRegion(s.src, ctx, s), BatchRegion(s.dst, ctx, s)
    dim = (s.dim + src.nd if s.dim < 0 else s.dim) + 1
    acc = _acc_dtype(s.dst.buffer.dtype)
    rev = s.reverse
    c = COMBINERS[s.kind]
    size = ctx.batch.size

    def scan(env: list) -> None:
        m, any_ = _active(env, size)
        if not any_:
            return
        dst.write(env, _scanned(src.read(env), c, dim, rev, acc), m)
    return scan


def _fill(s: Fill, ctx: Ctx) -> StmtFn:
    dst = BatchRegion(s.dst, ctx, s)
    fv = compile_expr(s.value, ctx).fn
    npd = s.dst.buffer.dtype.np
    narrow = is_narrow(s.dst.buffer.dtype)
    size = ctx.batch.size

    def fill(env: list) -> None:
        m, any_ = _active(env, size)
        if not any_:
            return
        v = np.asarray(fv(env))
        if narrow:
            v = v.astype(F32)
        v = v.astype(npd)
        ex = dst.extents(env)
        if v.ndim:
            v = per_block(v, size).reshape((size,) + (1,) * len(ex))
        dst.write(env, np.broadcast_to(v, (size,) + tuple(ex)), m)
    return fill


def _atomic(s: Atomic, ctx: Ctx) -> StmtFn:
    """Recorded, not made: the batch's atomics are made when it ends (``batch.apply_atomics``)."""
    dst = BatchRegion(s.dst, ctx, s)
    kind = s.kind
    size = ctx.batch.size
    slot = ctx.batch.atomics
    if isinstance(s.value, BufferRegion):
        val = BatchRegion(s.value, ctx, s)
        times = 1

        def value(env: list, want: tuple) -> np.ndarray:
            t = val.read(env)
            if t.size != _prod(want):
                raise ShapeError(f"T.atomic_{kind}: value tile {t.shape[1:]} does not match "
                                 f"destination extents {want[1:]}", s.span)
            return t.reshape(want)
    else:
        fv = compile_expr(s.value, ctx).fn
        # block-level code runs in every thread: each makes the update (max / min: once is the same)
        times = ctx.threads if kind == "add" else 1

        def value(env: list, want: tuple) -> np.ndarray:
            v = per_block(fv(env), size).reshape((size,) + (1,) * (len(want) - 1))
            return np.broadcast_to(v, want)

    def atomic(env: list) -> None:
        m, any_ = _active(env, size)
        if not any_:
            return
        a, st, ex = dst.resolve(env)
        want = (size,) + tuple(ex)
        v = value(env, want)
        ix, valid = dst._index(a, st, ex)
        sel = valid
        if m is not None:
            mk = m.reshape((size,) + (1,) * dst.nd)
            sel = mk if sel is None else sel & mk
        ix = [np.broadcast_to(x, want) for x in ix]
        blocks = np.broadcast_to(np.arange(size).reshape((size,) + (1,) * dst.nd), want)
        if sel is not None:
            sel = np.broadcast_to(sel, want)
            ix, v, blocks = [x[sel] for x in ix], v[sel], blocks[sel]
        flat = np.ravel_multi_index(tuple(ix), a.shape).ravel()
        v, blocks = np.ravel(v).astype(a.dtype), np.ravel(blocks)
        if times > 1:  # each element's updates one after another, block by block
            flat, v, blocks = (np.repeat(x, times) for x in (flat, v, blocks))
        env[slot].append((dst.bslot, kind, flat, v, blocks))
    return atomic


BATCHED.update({Copy: _copy, Gemm: _gemm, Reduce: _reduce, CumSum: _cumsum, Fill: _fill,
                Atomic: _atomic})
