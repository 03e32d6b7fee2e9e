"""Tile operation rules of the interpreter (aspect ``"cpu"`` of :mod:`tegula.ir.tile_rules`):
copy, gemm, reductions, cumsum, fill, atomics, print.

Regions are read as whole tiles (numpy views when they lie inside the buffer; out-of-bounds
elements read as zero) and written back with out-of-bounds elements dropped.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tegula.errors import OutOfBoundsError, ScopeError, ShapeError
from tegula.ir import ops
from tegula.ir.buffer import BufferRegion
from tegula.ir.combiners import COMBINERS, Combiner
from tegula.ir.expr import Const
from tegula.ir.stmt import Atomic, Copy, CumSum, Fill, Gemm, Print, Reduce
from tegula.ir.tile_rules import tile_rule
from tegula.backends.closure import (F32, MASK, StmtFn, checks_unwritten, compile_expr, is_narrow,
                                     unwritten_read)
from tegula.backends.interp.context import Ctx
from tegula.backends.interp.operands import KEPT, widened
from tegula.backends.interp.stmts import BLOCK_INDEX


# batched rules of the tile operations (:mod:`.batch_tileops`), used while blocks run side by side
BATCHED: dict = {}


def _batched(s: Any, ctx: Ctx) -> StmtFn:
    rule = BATCHED.get(type(s))
    if rule is None or ctx.depth > 1:
        raise ScopeError(f"{s.op_name} cannot run for blocks side by side here", s.span)
    return rule(s, ctx)


class Region:
    """A compiled :class:`BufferRegion`: resolves its starts/extents and reads or writes tiles."""

    def __init__(self, r: BufferRegion, ctx: Ctx, node: Any):
        self.node = node
        self.buffer = r.buffer
        self.bslot = ctx.slot(r.buffer)
        self.ndim = len(r.ranges)
        starts: list = []
        exts: list = []
        for st, ex in r.ranges:
            if isinstance(st, Const):
                starts.append(int(st.value))
            else:
                ce = compile_expr(st, ctx)
                if ce.vec:
                    raise ScopeError("a tile operation on a region that varies over the lanes of "
                                     "a T.Parallel loop", node.span)
                starts.append(ce.fn)
            exts.append(ex if isinstance(ex, int) else compile_expr(ex, ctx).fn)
        self.starts, self.exts = starts, exts
        # the constant starts / extents, and (position, function) of the others
        self._st = [x if isinstance(x, int) else 0 for x in starts]
        self._ex = [x if isinstance(x, int) else 0 for x in exts]
        self._dyn_st = [(k, f) for k, f in enumerate(starts) if not isinstance(f, int)]
        self._dyn_ex = [(k, f) for k, f in enumerate(exts) if not isinstance(f, int)]
        self.static = not self._dyn_st and not self._dyn_ex
        shape = r.buffer.shape
        self.whole = self.static and all(isinstance(n, int) for n in shape) and \
            all(s == 0 for s in starts) and tuple(exts) == tuple(shape)

    def resolve(self, env: list) -> tuple[np.ndarray, list[int], list[int]]:
        st = self._st[:]
        for k, f in self._dyn_st:
            st[k] = int(f(env))
        return env[self.bslot], st, self.extents(env)

    def extents(self, env: list) -> list[int]:
        ex = self._ex[:]
        for k, f in self._dyn_ex:
            ex[k] = max(0, int(f(env)))
        return ex

    @staticmethod
    def _slices(shape: tuple, st: list, ex: list) -> Optional[tuple]:
        """The region's slices of a buffer of ``shape``; None when it does not lie inside."""
        key = []
        for s, e, n in zip(st, ex, shape):
            if s < 0 or s + e > n:
                return None
            key.append(slice(s, s + e))
        return tuple(key)

    def view(self, env: list) -> np.ndarray:
        """The region as a writable view; raises when it does not lie inside the buffer."""
        if self.whole:
            return env[self.bslot]
        a, st, ex = self.resolve(env)
        key = self._slices(a.shape, st, ex)
        if key is None:
            raise OutOfBoundsError(
                f"region of '{self.buffer.name}' starting at {st} with extents {ex} is out of "
                f"bounds of its shape {a.shape}", self.node.span)
        return a[key]

    def read(self, env: list) -> np.ndarray:
        """The tile (shape = extents); out-of-bounds elements read as zero."""
        if self.whole:
            return env[self.bslot]
        a, st, ex = self.resolve(env)
        key = self._slices(a.shape, st, ex)
        if key is not None:
            return a[key]
        tile = np.zeros(ex, a.dtype)
        src, dst = _clip(a.shape, st, ex)
        if src is not None:
            tile[dst] = a[src]
        return tile

    def write(self, env: list, tile: np.ndarray) -> None:
        """Store ``tile`` (any shape with as many elements) into the region, dropping
        out-of-bounds elements and converting to the buffer's dtype."""
        if self.whole:
            a = env[self.bslot]
            if tile.shape != a.shape:
                tile = self._fit(tile, list(a.shape))
            a[...] = tile
            return
        a, st, ex = self.resolve(env)
        if tile.shape != tuple(ex):
            tile = self._fit(tile, ex)
        key = self._slices(a.shape, st, ex)
        if key is not None:
            a[key] = tile
            return
        dst, src = _clip(a.shape, st, ex)
        if dst is not None:
            a[dst] = tile[src]

    def _fit(self, tile: np.ndarray, ex: list) -> np.ndarray:
        if tile.size != _prod(ex):
            raise ShapeError(f"tile of shape {tile.shape} does not fit region of "
                             f"'{self.buffer.name}' with extents {tuple(ex)}", self.node.span)
        return tile.reshape(ex)


def _prod(xs: Any) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def _clip(shape: tuple, st: list, ex: list) -> tuple[Optional[tuple], Optional[tuple]]:
    """(buffer slices, tile slices) of the in-bounds part of a region; (None, None) if empty."""
    bk, tk = [], []
    for s, e, n in zip(st, ex, shape):
        lo, hi = max(s, 0), min(s + e, n)
        if hi <= lo:
            return None, None
        bk.append(slice(lo, hi))
        tk.append(slice(lo - s, hi - s))
    return tuple(bk), tuple(tk)


def _not_in_parallel(node: Any, ctx: Ctx, what: str) -> None:
    if ctx.in_parallel:
        raise ScopeError(f"{what} cannot be used inside a T.Parallel body", node.span,
                         hint="move it out of the parallel loop; tile operations act on whole tiles")


def _convert(tile: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Narrow float destinations convert through float32 (round to nearest even)."""
    if dst.dtype.itemsize < 4 and dst.dtype.kind not in "iub" and \
            tile.dtype not in (F32, dst.dtype):
        return ops.widen(tile)
    return tile


def apply_copy_flags(tile: np.ndarray, ann: dict, batched: bool = False) -> np.ndarray:
    """TileLang-Ascend's ``T.copy`` flags, kept as the copy's annotations: ``"relu"``
    (``enable_relu=True``: ``max(x, 0)``, NaN kept) and ``"transpose_tile"`` (``transpose=True``:
    the destination gets the 2-D source tile transposed). ``batched``: axis 0 is the block axis."""
    if ann.get("relu"):
        tile = np.where(tile < 0, tile.dtype.type(0), tile)
    if ann.get("transpose_tile"):
        lead = tile.shape[:1] if batched else ()
        rc = tuple(e for e in tile.shape[len(lead):] if e != 1)
        rc = ((1,) + rc)[-2:] if len(rc) < 2 else rc
        tile = np.swapaxes(tile.reshape(lead + rc), -1, -2)
    return tile


@tile_rule(Copy, "cpu")
def _copy(s: Copy, ctx: Ctx) -> StmtFn:
    if ctx.batch is not None:
        return _batched(s, ctx)
    _not_in_parallel(s, ctx, "T.copy")
    src, dst = Region(s.src, ctx, s), Region(s.dst, ctx, s)
    sd, dd = s.src.buffer.dtype, s.dst.buffer.dtype
    narrow_dst = is_narrow(dd) and sd != dd and sd.np != F32
    to_int = sd.is_float and dd.is_int  # saturating, NaN -> 0 (the operator table's cast)
    flagged = bool(s.annotations.get("relu") or s.annotations.get("transpose_tile"))

    def copy(env: list) -> None:   # a move: never-written elements go along (their use is checked)
        tile = src.read(env)
        if flagged:
            tile = apply_copy_flags(tile, s.annotations)
        if narrow_dst:
            tile = ops.widen(tile)
        elif to_int:
            tile = ops.cast_array(tile, sd, dd)
        dst.write(env, tile)
    return copy


def _as2d(x: np.ndarray, node: Any, what: str) -> np.ndarray:
    if x.ndim == 2:
        return x
    if x.ndim > 2 and _prod(x.shape[:-2]) == 1:
        return x.reshape(x.shape[-2:])
    raise ShapeError(f"T.gemm: {what} must be a 2-D tile, got shape {x.shape}", node.span)


@tile_rule(Gemm, "cpu")
def _gemm(s: Gemm, ctx: Ctx) -> StmtFn:
    if ctx.batch is not None:
        return _batched(s, ctx)
    _not_in_parallel(s, ctx, "T.gemm")
    ra, rb, rc = Region(s.A, ctx, s), Region(s.B, ctx, s), Region(s.C, ctx, s)
    cd = s.C.buffer.dtype
    ta, tb, clear = s.transpose_A, s.transpose_B, s.clear_accum
    if cd.is_int:
        comp = np.dtype(np.float64)
    elif cd.bits == 64:
        comp = np.dtype(np.float64)
    else:
        comp = F32

    kept = ctx.slot(KEPT)

    checked = {id(r): checks_unwritten(r.buffer) for r in (ra, rb, rc)}

    def operand(r: Region, env: list, what: str) -> np.ndarray:
        tile = r.read(env)
        if checked[id(r)]:
            unwritten_read(r.buffer, tile, s.span, f"T.gemm reads {what}: a read")
        return widened(env, kept, _as2d(tile, s, what), comp)

    def product(env: list) -> np.ndarray:
        a = operand(ra, env, "A")
        b = operand(rb, env, "B")
        if ta:
            a = a.T
        if tb:
            b = b.T
        if a.shape[1] != b.shape[0]:
            raise ShapeError(f"T.gemm: op(A) is {a.shape} but op(B) is {b.shape}", s.span)
        return a @ b

    def gemm(env: list) -> None:
        c = rc.view(env)
        if not clear and checked[id(rc)]:   # C += A @ B reads C: a missing T.clear shows here
            unwritten_read(rc.buffer, c, s.span, "T.gemm accumulates into C: a read")
        p = product(env)
        c2 = _as2d(c, s, "C")
        if c2.shape != p.shape:
            raise ShapeError(f"T.gemm: C is {c2.shape} but op(A) @ op(B) is {p.shape}", s.span)
        r = accumulated(p, c2, c.dtype, comp, clear, c2 is c or np.may_share_memory(c2, c))
        if r is not None:
            c[...] = r.reshape(c.shape)
    return gemm


def accumulated(p: np.ndarray, acc: np.ndarray, out: np.dtype, comp: np.dtype, clear: bool,
                in_place: bool) -> Optional[np.ndarray]:
    """A gemm's new accumulator (dtype ``out``) from the product ``p`` (dtype ``comp``) and the
    old values ``acc``; None when it was written into ``acc`` (``in_place``: ``acc`` is the
    accumulator's memory and already of dtype ``comp``)."""
    if out.kind in "iu":
        p = p.astype(np.int64)
        if not clear:
            p += acc.astype(np.int64)
        return p.astype(out)  # wraps like the device's integer accumulator
    if acc.dtype == comp:
        if in_place:
            if clear:
                acc[...] = p
            else:
                acc += p
            return None
        return p if clear else p + acc
    return (p if clear else p + acc.astype(comp)).astype(out)


def _reduce_tile(c: Combiner, x: np.ndarray, ax: int, acc: np.dtype, dtype: Any) -> np.ndarray:
    """``x`` combined along axis ``ax`` as row ``c`` says, in accumulator dtype ``acc``."""
    if c.widen and x.dtype != acc:
        x = ops.widen(x, acc)
    if c.absolute:
        x = np.abs(x)
    if not x.shape[ax]:
        return np.full(np.delete(x.shape, ax), c.identity(dtype), acc)
    if c.widen:
        return c.ufunc.reduce(x, axis=ax, dtype=acc)
    return c.ufunc.reduce(x, axis=ax).astype(acc)


def _acc_dtype(d: Any) -> np.dtype:
    return F32 if is_narrow(d) else d.np


@tile_rule(Reduce, "cpu")
def _reduce(s: Reduce, ctx: Ctx) -> StmtFn:
    if ctx.batch is not None:
        return _batched(s, ctx)
    _not_in_parallel(s, ctx, f"T.reduce_{s.kind}")
    src, dst = Region(s.src, ctx, s), Region(s.dst, ctx, s)
    dim = s.dim + src.ndim if s.dim < 0 else s.dim
    if not 0 <= dim < src.ndim:
        raise ShapeError(f"T.reduce_{s.kind}: dim {s.dim} is out of range for a "
                         f"{src.ndim}-D source", s.span)
    dtype = s.dst.buffer.dtype
    acc = _acc_dtype(dtype)
    c = COMBINERS[s.kind]
    clear = s.clear

    check_src, check_dst = checks_unwritten(src.buffer), not clear and checks_unwritten(dst.buffer)

    def reduce(env: list) -> None:
        tile = src.read(env)
        if check_src:
            unwritten_read(src.buffer, tile, s.span, f"T.reduce_{s.kind} reads its source: a read")
        r = _reduce_tile(c, tile, dim, acc, dtype)
        if not clear:
            old = dst.read(env)
            if check_dst:
                unwritten_read(dst.buffer, old, s.span, f"T.reduce_{s.kind}(clear=False) combines with "
                               "its destination: a read")
            if old.size != r.size:
                raise ShapeError(f"T.reduce_{s.kind}: destination holds {old.size} elements but "
                                 f"the reduction gives {r.shape}", s.span)
            r = c.ufunc(r, old.reshape(r.shape).astype(acc, copy=False))
        dst.write(env, r)
    return reduce


@tile_rule(CumSum, "cpu")
def _cumsum(s: CumSum, ctx: Ctx) -> StmtFn:
    if ctx.batch is not None:
        return _batched(s, ctx)
    _not_in_parallel(s, ctx, s.op_name)
    src, dst = Region(s.src, ctx, s), Region(s.dst, ctx, s)
    dim = s.dim + src.ndim if s.dim < 0 else s.dim
    acc = _acc_dtype(s.dst.buffer.dtype)
    rev = s.reverse
    c = COMBINERS[s.kind]

    def scan(env: list) -> None:
        dst.write(env, _scanned(src.read(env), c, dim, rev, acc))
    return scan


def _scanned(x: Any, c: Any, dim: int, rev: bool, acc: Any) -> Any:
    """``T.cumsum``'s values: combiner ``c`` accumulated along ``dim`` (from the end when
    ``rev``) in dtype ``acc``."""
    x = x.astype(acc)
    if c.absolute:
        x = np.abs(x)
    if rev:
        return np.flip(c.ufunc.accumulate(np.flip(x, dim), axis=dim, dtype=acc), dim)
    return c.ufunc.accumulate(x, axis=dim, dtype=acc)


@tile_rule(Fill, "cpu")
def _fill(s: Fill, ctx: Ctx) -> StmtFn:
    if ctx.batch is not None:
        return _batched(s, ctx)
    _not_in_parallel(s, ctx, "T.fill")
    dst = Region(s.dst, ctx, s)
    ce = compile_expr(s.value, ctx)
    fv = ce.fn
    npd = s.dst.buffer.dtype.np
    narrow = is_narrow(s.dst.buffer.dtype)

    def fill(env: list) -> None:
        v = fv(env)
        if narrow:
            v = v.astype(F32)
        v = v.astype(npd)
        if dst.whole:
            env[dst.bslot].fill(v)
            return
        a, st, ex = dst.resolve(env)
        k, _ = _clip(a.shape, st, ex)
        if k is not None:
            a[k] = v
    return fill


_ATOMIC_UFUNCS = {"add": np.add, "max": np.maximum, "min": np.minimum}


def _atomic_apply(kind: str, seg: np.ndarray, v: Any) -> None:
    """``seg = seg (op) v`` in place at seg's dtype (narrow floats round after the add)."""
    if kind == "add":
        if seg.dtype.itemsize < 4 and seg.dtype.kind not in "iub":
            seg[...] = (seg.astype(F32) + np.asarray(v).astype(seg.dtype).astype(F32))
        else:
            seg[...] = seg + np.asarray(v).astype(seg.dtype)
    else:
        _ATOMIC_UFUNCS[kind](seg, np.asarray(v).astype(seg.dtype), out=seg)


@tile_rule(Atomic, "cpu")
def _atomic(s: Atomic, ctx: Ctx) -> StmtFn:
    if ctx.batch is not None:
        return _batched(s, ctx)
    if ctx.in_parallel:
        from tegula.backends.interp.atomics import lane_atomic

        return lane_atomic(s, ctx)
    dst = Region(s.dst, ctx, s)
    kind = s.kind
    if isinstance(s.value, BufferRegion):
        val = Region(s.value, ctx, s)

        def atomic_tile(env: list) -> None:
            a, st, ex = dst.resolve(env)
            t = val.read(env)
            if t.size != _prod(ex):
                raise ShapeError(f"T.atomic_{kind}: value tile {t.shape} does not match "
                                 f"destination extents {tuple(ex)}", s.span)
            t = t.reshape(ex)
            k, tk = _clip(a.shape, st, ex)
            if k is not None:
                _atomic_apply(kind, a[k], t[tk])
        return atomic_tile
    fv = compile_expr(s.value, ctx).fn
    # block-level code runs in every thread: each makes the update (max / min: once is the same)
    times = ctx.threads if kind == "add" else 1

    def atomic(env: list) -> None:
        a, st, ex = dst.resolve(env)
        k, _ = _clip(a.shape, st, ex)
        if k is not None:
            v = fv(env)
            seg = a[k]
            if times > 1 and seg.size == 1 and seg.dtype.type in _NATIVE:
                # one element updated by every thread, one update after another (ufunc.at
                # rounds after each, as a float16 add through float32 does)
                np.add.at(seg.reshape(-1), np.zeros(times, np.intp),
                          np.full(times, np.asarray(v).astype(seg.dtype)))
                return
            for _ in range(times):
                _atomic_apply(kind, seg, v)
    return atomic


_NATIVE = (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
           np.uint8, np.uint16, np.uint32, np.uint64)


@tile_rule(Print, "cpu")
def _print(s: Print, ctx: Ctx) -> StmtFn:
    bslot = ctx.slot(BLOCK_INDEX)
    msg = s.msg
    if isinstance(s.obj, BufferRegion):
        reg = Region(s.obj, ctx, s)
        name = s.obj.buffer.name

        def show_region(env: list) -> None:
            print(f"{msg} block={env[bslot]} {name}:\n{np.array(reg.read(env))}", flush=True)
        return show_region
    f = compile_expr(s.obj, ctx).fn

    def show(env: list) -> None:
        v = f(env)
        m = env[MASK]
        if m is not None and isinstance(v, np.ndarray):
            v = np.broadcast_to(v, np.broadcast_shapes(v.shape, np.shape(m)))[m]
        print(f"{msg} block={env[bslot]} {v}", flush=True)
    return show
