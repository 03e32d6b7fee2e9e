"""RasterBlocks (sm_90a): a GEMM-shaped kernel (a 2-d grid whose pipelined loop loads one operand
tile chosen by ``blockIdx.x`` and another chosen by ``blockIdx.y``) is launched in strips of
``P`` columns, the blocks of a strip walked row by row (what ``T.use_swizzle(P)`` writes), so the
blocks the GPU runs at once share operand tiles in L2 instead of sweeping all of ``B`` for every
few rows of ``A``. Blocks are independent, so nothing changes in meaning; kernels that choose
their own order (``T.use_swizzle``, OrderBlocks) are left alone.

``P`` makes the wave of blocks that run together about square in bytes: a wave of ``W`` blocks
(:data:`WAVE_BLOCKS`, one per SM) in strips of ``P`` columns reads ``P`` x-tiles of ``b`` bytes
each and ``W / P`` y-tiles of ``a`` bytes, and ``P * b = (W / P) * a`` gives
``P = sqrt(W * a / b)``, where ``a`` and ``b`` are the bytes one k-step copies per y- and per
x-tile (the k extent cancels). Grids no wider than ``P`` keep their order.
``tegula.block_raster`` sets ``P`` for every such kernel (0 or False: off).

Before/after (64 x 64 tiles of fp16, grid 16 x 16)::

    with T.Kernel(16, 16, threads=128) as (bx, by):     with T.Kernel(16, 16, threads=128) as (bx, by):
                                                            T.use_swizzle(11, order="row")
        for k in T.Pipelined(32, num_stages=3):             for k in T.Pipelined(32, num_stages=3):
            T.copy(A[by * 64, k * 32], A_s)                     T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)                     T.copy(B[k * 32, bx * 64], B_s)
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from tegula.arith.simplify import const_int
from tegula.ir import expr as E
from tegula.ir.stmt import Copy, For, Kernel, LetStmt, PrimFunc
from tegula.ir.visitor import Mutator, post_order_visit, substitute, uses_var

# blocks of one wave: one 1-block-per-SM GEMM tile per SM of an H100 / H200 SXM (132 SMs)
WAVE_BLOCKS = 132


def _tile_bytes(c: Copy) -> Optional[int]:
    n = c.src.buffer.dtype.itemsize
    for e in c.dst.extents:
        v = const_int(E.as_expr(e))
        if v is None:
            return None
        n *= v
    return n


def operand_bytes(k: Kernel) -> Optional[tuple[int, int]]:
    """(bytes per k-step of the tiles chosen by ``blockIdx.y`` alone, of those chosen by
    ``blockIdx.x`` alone) that the kernel's pipelined loops copy from global memory, or None when
    either is missing or not static."""
    bx, by = k.block_vars[0], k.block_vars[1]
    loops: list = []
    lets: dict = {}  # index lets (``m0 = by * 128``) seen through
    post_order_visit(k.body, lambda n: loops.append(n) if isinstance(n, For) and n.kind == "pipelined" else None)
    post_order_visit(k.body, lambda n: lets.__setitem__(n.var, n.value) if isinstance(n, LetStmt) else None)
    copies: list = []
    for loop in loops:
        post_order_visit(loop.body, lambda n: copies.append(n) if isinstance(n, Copy) else None)
    a = b = 0
    for c in copies:
        if not (c.src.buffer.is_global and c.dst.buffer.is_shared):
            continue
        starts = [substitute(substitute(s, lets), lets) for s in c.src.starts]
        on_x, on_y = any(uses_var(s, bx) for s in starts), any(uses_var(s, by) for s in starts)
        if on_x == on_y:
            continue
        size = _tile_bytes(c)
        if size is None:
            return None
        if on_y:
            a += size
        else:
            b += size
    return (a, b) if a and b else None


def raster_panel(k: Kernel, panel=None) -> int:
    """The strip width RasterBlocks gives kernel ``k`` (0: left in launch order)."""
    if panel is not None and not panel:
        return 0
    if len(k.block_vars) < 2 or k.annotations.get("swizzle") or k.annotations.get("blocks_reversed"):
        return 0
    grid = [const_int(E.as_expr(g)) for g in k.grid]
    if any(g is None for g in grid) or grid[0] < 2 or grid[1] < 2 or any(g != 1 for g in grid[2:]):
        return 0
    ab = operand_bytes(k)
    if ab is None:
        return 0
    p = int(panel) if panel is not None else max(1, round(math.sqrt(WAVE_BLOCKS * ab[0] / ab[1])))
    return p if 1 < p < grid[0] else 0


def raster_blocks(func: PrimFunc, panel=None) -> PrimFunc:
    """Launch GEMM-shaped kernels in strips of ``panel`` columns (``tegula.block_raster``; unset:
    the width that makes a wave square in bytes, module docstring)."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            p = raster_panel(k, panel)
            if not p:
                return k
            return dataclasses.replace(k, annotations={**k.annotations, "swizzle": (p, "row")})

    return M().visit(func)
