"""RasterBlocks (sm_90a): a GEMM-shaped kernel (a 2-d grid whose pipelined loop loads one operand
tile chosen by ``blockIdx.x`` and another chosen by ``blockIdx.y``) whose operands do not fit in
L2 is launched in strips of ``P`` columns, the blocks of a strip walked row by row (what
``T.use_swizzle(P)`` writes): the blocks the GPU runs at once then share operand tiles in L2,
and a strip's x-tiles stay there for all its rows, instead of every few rows of ``A`` sweeping
all of ``B``. Blocks are independent, so nothing changes in meaning; kernels that choose their own
order (``T.use_swizzle``, also ``T.use_swizzle(..., enable=False)``: launch order, OrderBlocks)
are left alone, and so are kernels whose operands fit in L2 (:data:`L2_BYTES`), where launch
order measured faster.

``P`` is half the width that makes a wave square in bytes: a wave of ``W`` blocks
(:data:`WAVE_BLOCKS`, one per SM) in strips of ``P`` columns reads ``P`` x-tiles of ``b`` bytes
per k-step and ``W / P`` y-tiles of ``a`` bytes, square at ``P = sqrt(W * a / b)`` (the k
extent cancels). Measured on an H200 (fp8 8192^3, 128x256 tiles, BENCHMARKS.md): the square
wave (P = 8) ran at 1210 TFLOP/s, half its width (P = 4) at 1319, launch order at 1167.
Grids no wider than ``P`` keep their order. ``tegula.block_raster`` sets ``P`` for every
GEMM-shaped kernel, whatever its size (0 or False: off).

Before/after (64 x 64 tiles of fp16, grid 64 x 64, K = 4096)::

    with T.Kernel(64, 64, threads=128) as (bx, by):     with T.Kernel(64, 64, threads=128) as (bx, by):
                                                            T.use_swizzle(6, order="row")
        for k in T.Pipelined(128, num_stages=3):            for k in T.Pipelined(128, num_stages=3):
            T.copy(A[by * 64, k * 32], A_s)                     T.copy(A[by * 64, k * 32], A_s)
            T.copy(B[k * 32, bx * 64], B_s)                     T.copy(B[k * 32, bx * 64], B_s)
"""
from __future__ import annotations

import dataclasses
import math
from typing import Optional

from tegula.ir.annotations import SWIZZLE
from tegula.arith.simplify import const_int
from tegula.errors import ConfigError
from tegula.ir import expr as E
from tegula.ir.stmt import Copy, For, Kernel, LetStmt, PrimFunc
from tegula.ir.visitor import Mutator, post_order_visit, substitute, uses_var
from tegula.backends.cuda.machine import L2_BYTES, SM_COUNT
from tegula.backends.cuda.analysis.pipelined_loop import let_values

# blocks of one wave: one 1-block-per-SM GEMM tile per SM
WAVE_BLOCKS = SM_COUNT


def _tile_bytes(c: Copy) -> Optional[int]:
    n = c.src.buffer.dtype.itemsize
    for e in c.dst.extents:
        v = const_int(E.as_expr(e))
        if v is None:
            return None
        n *= v
    return n


def operand_bytes(k: Kernel) -> Optional[tuple[int, int, Optional[int]]]:
    """(bytes per k-step of the tiles chosen by ``blockIdx.y`` alone, of those chosen by
    ``blockIdx.x`` alone, k-steps of the loop or None when not static) that the kernel's
    pipelined loop copies from global memory, or None when either kind is missing or not static
    or there is not one pipelined loop."""
    bx, by = k.block_vars[0], k.block_vars[1]
    loops: list = []
    lets: list = []  # index lets (``m0 = by * 128``), in order, seen through
    post_order_visit(k.body, lambda n: loops.append(n) if isinstance(n, For) and n.kind == "pipelined" else None)
    post_order_visit(k.body, lambda n: lets.append(n) if isinstance(n, LetStmt) else None)
    values = let_values(lets)
    if len(loops) != 1:
        return None
    copies: list = []
    post_order_visit(loops[0].body, lambda n: copies.append(n) if isinstance(n, Copy) else None)
    a = b = 0
    for c in copies:
        if not (c.src.buffer.is_global and c.dst.buffer.is_shared):
            continue
        starts = [substitute(s, values) for s in c.src.starts]
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
    return (a, b, const_int(E.as_expr(loops[0].extent))) if a and b else None


def raster_panel(k: Kernel, panel=None) -> int:
    """The strip width RasterBlocks gives kernel ``k`` (0: left in launch order)."""
    if panel is not None and not panel:
        return 0
    ann = k.annotations
    if len(k.block_vars) < 2 or any(ann.get(key) for key in (SWIZZLE.name, "swizzle_disabled", "blocks_reversed")):
        return 0
    grid = [const_int(E.as_expr(g)) for g in k.grid]
    if any(g is None for g in grid) or grid[0] < 2 or grid[1] < 2 or any(g != 1 for g in grid[2:]):
        return 0
    got = operand_bytes(k)
    if got is None:
        return 0
    a, b, steps = got
    if panel is not None:
        p = int(panel)
    elif steps is not None and (a * grid[1] + b * grid[0]) * steps <= L2_BYTES:
        return 0
    else:
        p = round(math.sqrt(WAVE_BLOCKS * a / b) / 2)
    return p if 1 < p < grid[0] else 0


def raster_blocks(func: PrimFunc, panel=None) -> PrimFunc:
    """Launch GEMM-shaped kernels in strips of ``panel`` columns (``tegula.block_raster``; unset:
    half the width that makes a wave square in bytes, module docstring; True: the same; 0 or False:
    launch order). Raises ConfigError for a ``panel`` that is no non-negative int or bool."""
    if panel is True:
        panel = None
    if panel is not None and (not isinstance(panel, int) or panel < 0):
        raise ConfigError(f"pass config tegula.block_raster must be a strip width (an int >= 0) or a bool, "
                          f"got {panel!r}", hint="0 or False keeps launch order, True the automatic width")

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            p = raster_panel(k, panel)
            if not p:
                return k
            return dataclasses.replace(k, annotations={**k.annotations, SWIZZLE.name: (p, "row")})

    return M().visit(func)
