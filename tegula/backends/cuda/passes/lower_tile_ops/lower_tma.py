"""Lowering a ``T.copy`` that ``TmaPipeline`` marked for the copy engine (sm_90).

One thread announces the tile's bytes on the stage's mbarrier and issues one bulk tensor load per
block of the tile's shared layout; the copy engine fills out-of-bounds parts of a box with zeros,
as ``T.copy`` promises::

    T.copy(A[by * 128, k * 64], A_s[s])      if (tx == 0) {
      (A_s: WgmmaShared, 128B swizzle)          tl::mbarrier_expect_tx(&k_full[s], 16384);
                                                tl::tma_load(&A_s[s * 8192], A_tmap_0, &k_full[s], k * 64, by * 128);
                                              }

Each (global buffer, box, swizzle) gets a tensor map, a kernel parameter the launcher encodes with
``cuTensorMapEncodeTiled`` (``tma_host``); they are listed in ``Kernel.annotations["tma_maps"]``.
A tile whose layout no swizzle mode reproduces is copied by all threads with ordinary loads (the
loop's barrier orders it like the others).

A copy from a whole shared tile to global memory that ``TmaStores`` marked (``tma_store``) is the
reverse: ``lower_tma_store`` (every thread fences its generic writes for the async proxy, a
barrier, one thread's bulk tensor stores, their commit and the wait until they read the tile).

A ``T.tma_copy`` the user wrote (annotation ``tma_user``) lowers the same way on sm_90; for an
older arch it is a plain copy under ``AttrStmt("hopper_only", "T.tma_copy")``, which the
interpreter runs and ``CheckResources`` rejects for a GPU build.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Builtin, BufferLoad, Var
from tegula.errors import UnsupportedError
from tegula.ir.stmt import AttrStmt, Copy, Evaluate, IfThenElse, Stmt, seq
from tegula.layout.shared import RowMajor, Swizzled
from tegula.layout.wgmma import WgmmaShared
from tegula.backends.cuda.analysis.tma import tma_copy_ok
from tegula.backends.cuda.passes.lower_tile_ops.context import Ctx, addr, call, region_index, sync

# the copy engine's swizzle modes (CUtensorMapSwizzle) by swizzle width in bytes
TMA_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}


@dataclass(frozen=True, eq=False)
class TmaMap:
    """One tensor map: ``buffer`` (a kernel parameter) seen in boxes of ``box`` elements
    (innermost dimension first) with swizzle mode ``swizzle``; ``var`` names it in the kernel."""

    var: Var
    buffer: Buffer
    box: tuple[int, ...]
    swizzle: int

    def __repr__(self) -> str:
        return f"TmaMap({self.buffer.name}, box={self.box}, swizzle={self.swizzle})"


def _block_width(lay: Any, cols: int, eb: int) -> Optional[tuple[int, int]]:
    """(elements per box row, swizzle bytes) that reproduce the shared layout, or None."""
    if isinstance(lay, WgmmaShared):
        return lay.W, lay.swizzle_bytes
    if isinstance(lay, RowMajor):
        return (cols, 0) if cols <= 256 else None
    if isinstance(lay, Swizzled) and lay.cpr in (2, 4, 8):
        return cols, lay.cpr * 16
    return None


def _map(ctx: Ctx, buf: Buffer, box: tuple, swizzle: int) -> Var:
    for m in ctx.tma_maps:
        if m.buffer is buf and m.box == box and m.swizzle == swizzle:
            return m.var
    m = TmaMap(Var(f"{buf.name}_tmap_{len(ctx.tma_maps)}", dt.uint64), buf, box, swizzle)
    ctx.tma_maps.append(m)
    return m.var


def lower_tma_copy(ctx: Ctx, c: Copy, plain: Any) -> Stmt:
    """The copy engine's loads for ``c``; ``plain(copy)`` lowers a copy the ordinary way."""
    bars, stage = c.annotations["tma_bar"], c.annotations["tma_stage"]
    src, dst = c.src, c.dst
    rest = {k: v for k, v in c.annotations.items() if k not in ("tma_bar", "tma_stage", "tma_user", "tma_multicast")}
    if c.annotations.get("tma_user"):
        if not ctx.hopper:
            return AttrStmt("hopper_only", "T.tma_copy", plain(Copy(src, dst, rest, span=c.span)),
                            span=c.span)
        if not tma_copy_ok(c):
            raise UnsupportedError(
                f"T.tma_copy: the copy engine cannot load '{src.buffer.name}' into "
                f"'{dst.buffer.name}' (it needs a static global shape with 16-byte aligned row "
                f"strides, boxes of at most 256 elements per dimension, and a whole 2-d shared "
                f"tile of the same dtype)", c.span, hint="use T.copy for this tile")
    multicast = c.annotations.get("tma_multicast")  # (rank in the cluster, blocks sharing the tile)
    boxes = _boxes(ctx, src, dst, multicast)
    if boxes is None:  # every block of the cluster loads its whole tile the same way
        return plain(Copy(src, dst, rest, span=c.span))
    rows, cols = (int(d) for d in dst.buffer.shape[-2:])
    bar = Builtin("address_of", (ctx.load(bars, (stage,)),), dt.int64, (("ctype", "uint64_t"),))
    # the whole tile lands here (with multicast: this block's part and its peers')
    stmts: list[Stmt] = [Evaluate(call("tl::mbarrier_expect_tx", bar, rows * cols * src.buffer.dtype.itemsize))]
    if multicast:
        mask = E.const((1 << int(multicast[1])) - 1, dt.uint16)
        stmts += [Evaluate(call("tl::tma_load_multicast", d, tmap, bar, mask, *coords)) for tmap, d, coords in boxes]
    else:
        stmts += [Evaluate(call("tl::tma_load", d, tmap, bar, *coords)) for tmap, d, coords in boxes]
    return IfThenElse(E.compare("eq", ctx.tid, 0), seq(*stmts))


def _boxes(ctx: Ctx, glob: Any, tile: Any, part: Optional[tuple] = None) -> Optional[list]:
    """(tensor map, shared address, coordinates innermost first) of each box that moves the whole
    shared tile ``tile`` to or from region ``glob`` (one box per block of the tile's shared
    layout), or None when no swizzle mode reproduces that layout. ``part`` = (rank, n): only
    rows ``rank * rows / n ..`` of each box (the part of a multicast tile one block of a cluster
    loads; a block of the swizzled layout is row-major in rows of its width, so its rows split
    into contiguous parts)."""
    flat, lay = ctx.shared(tile.buffer)
    rows, cols = (int(d) for d in tile.buffer.shape[-2:])
    got = _block_width(lay, cols, glob.buffer.dtype.itemsize)
    if got is None:
        return None
    W, sw = got
    if sw:  # the copy engine swizzles by address bits: the tile starts at the pattern's repeat
        ctx.smem_align[flat] = max(ctx.smem_align.get(flat, 0), 1024)
    starts = list(glob.starts)
    box = [1 if (isinstance(e, int) and e == 1) else int(e) for e in glob.extents]
    box[-1] = W
    row0: Any = 0
    if part is not None:
        rank, n = part
        dim = max(i for i in range(len(box) - 1) if box[i] == rows)  # the global dimension of the tile's rows
        box[dim] = rows // int(n)
        row0 = rank * (rows // int(n))
        starts[dim] = starts[dim] + row0
    tmap = _map(ctx, glob.buffer, tuple(reversed(box)), TMA_SWIZZLE[sw])
    out = []
    for b in range(cols // W):
        coords = starts[:-1] + [starts[-1] + b * W]
        out.append((tmap, addr(BufferLoad(flat, (lay.offset(region_index(tile, (row0, b * W))),))),
                    tuple(reversed(coords))))
    return out


def lower_tma_store(ctx: Ctx, c: Copy, plain: Any) -> Stmt:
    """The copy engine's stores for ``c`` (a shared tile to global memory, marked ``tma_store``
    by ``TmaStores``): every thread makes its generic writes of the tile visible to the async
    proxy (``fence.proxy.async``), a barrier orders them before one thread issues the stores, which waits until they have read the tile (``cp.async.bulk.wait_group.read``),
    so the tile may be written again after the next barrier. Elements of a box past the
    tensor's edge are not written, as ``T.copy`` drops out-of-bounds writes."""
    rest = {k: v for k, v in c.annotations.items() if k != "tma_store"}
    boxes = _boxes(ctx, c.dst, c.src)
    if boxes is None:
        return plain(Copy(c.src, c.dst, rest, span=c.span))
    issue = [Evaluate(call("tl::tma_store", tmap, s, *coords)) for tmap, s, coords in boxes]
    return seq(Evaluate(call("tl::fence_proxy_async")), sync(),
               IfThenElse(E.compare("eq", ctx.tid, 0), seq(
                   *issue, Evaluate(call("tl::tma_store_commit")),
                   Evaluate(call("tl::tma_store_wait", template=(0,))))))
