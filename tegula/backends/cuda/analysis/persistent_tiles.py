"""Persistent tiles (sm_90a, part of WarpSpecialize, ``tegula.persistent``): a warp-specialized
GEMM whose grid of ``gx x gy`` output tiles is more than one wave is launched as ``P`` blocks that
each loop over tiles ``pid, pid + P, pid + 2P, ...``; both roles walk the same tiles, and their
ring of stages runs on across tiles (iteration ``t * n + k`` of the ``t``-th tile), so the
producer loads the next tile's first stages while the consumers finish the last one's k-loop and
store its tile (the epilogue), instead of every block filling its pipeline from nothing.

A tile's ``(bx, by)`` are the block indices the launch order would have given it: with
``T.use_swizzle`` / RasterBlocks' strips (``annotations["swizzle"]``) the same formula the
generated code uses for the blocks of a grid (:func:`tegula.ir.raster.block_coords`), so the ``P`` blocks
run at step ``t`` the tiles one wave would have run together.

The rule: a kernel WarpSpecialize splits into a loop of gemms (not attention, not a promoting
loop), with a static 2-d grid of more than ``P`` blocks, in launch order or in strips. ``P`` is
:data:`PERSISTENT_BLOCKS` (one per SM of an H100 / H200 SXM) or the number ``tegula.persistent``
gives; off by default (not yet measured on the GPU).

Before/after (a grid of 4 x 8 tiles on P = 8 blocks)::

    with T.Kernel(4, 8, threads=256) as (bx, by):      with T.Kernel(8, threads=384) as pid:
                                                           ...                          # barrier init
        T.clear(C)                                         if tx >= 256:                # producer
        for k in T.Pipelined(n, num_stages=S):                 for t in T.serial(4):
            T.copy(A[by * 128, k * 64], A_s)                       tile = pid + t * 8
            ...                                                    bx = tile % 4; by = tile // 4
        T.copy(C, D[by * 128, bx * 256])                           for k in T.serial(n): ...  # ring at t * n + k
                                                           else:                        # consumers
                                                               for t in T.serial(4):
                                                                   tile = ...; bx = ...; by = ...
                                                                   T.clear(C)
                                                                   for k in T.serial(n): ...
                                                                   T.copy(C, D[by * 128, bx * 256])
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tegula.arith.simplify import const_int
from tegula.errors import ConfigError
from tegula.ir import expr as E
from tegula.ir.expr import Var
from tegula.ir.raster import block_coords, strips
from tegula.ir.stmt import For, Kernel, LetStmt, Stmt, seq

# blocks of a persistent grid by default: one per SM of an H100 / H200 SXM (132 SMs)
PERSISTENT_BLOCKS = 132


def check_option(value: Any) -> Optional[int]:
    """``tegula.persistent`` as a block count (None: off). True: :data:`PERSISTENT_BLOCKS`; an
    int above 0: that many blocks. Raises ConfigError for anything else."""
    if value is None or value is False or value == 0:
        return None
    if value is True:
        return PERSISTENT_BLOCKS
    if isinstance(value, int) and value > 0:
        return value
    raise ConfigError(f"pass config tegula.persistent must be a bool or a number of blocks (an int > 0), "
                      f"got {value!r}", hint="True launches one block per SM (132), False keeps one block per tile")


def persistent_blocks(k: Kernel, blocks: Optional[int]) -> int:
    """How many blocks kernel ``k`` runs persistently (0: it keeps one block per tile)."""
    if not blocks or len(k.block_vars) != 2 or k.annotations.get("blocks_reversed"):
        return 0
    grid = [const_int(E.as_expr(g)) for g in k.grid]
    if len(grid) != 2 or any(g is None for g in grid):
        return 0
    if k.annotations.get("swizzle") and strips(k.annotations) is None:
        return 0
    return blocks if grid[0] * grid[1] > blocks else 0


def tile_coords(k: Kernel, tile: E.Expr) -> tuple[E.Expr, E.Expr]:
    """(bx, by) of the ``tile``-th block of ``k``'s grid in launch order, through its strips."""
    gx, gy = (const_int(E.as_expr(g)) for g in k.grid)
    return block_coords(tile, gx, gy, strips(k.annotations))


def tile_loop(k: Kernel, pid: Var, t: Var, blocks: int, lets: list, body: list) -> Stmt:
    """``body`` (with the kernel's index ``lets``) for each tile of block ``pid``, the ``t``-th
    of them being tile ``pid + t * blocks``."""
    gx, gy = (const_int(E.as_expr(g)) for g in k.grid)
    tile = Var(f"{t.name}_tile")
    bx, by = k.block_vars
    cx, cy = tile_coords(k, tile)
    count = (gx * gy - pid + (blocks - 1)) // blocks
    return For(t, E.const(0), count, seq(LetStmt(tile, pid + t * blocks), LetStmt(bx, cx), LetStmt(by, cy),
                                         *lets, *body), "serial")


def as_persistent(k: Kernel, pid: Var, blocks: int) -> Kernel:
    """``k`` (whose body already loops over its tiles) launched as ``blocks`` blocks of index ``pid``."""
    ann = {key: v for key, v in k.annotations.items() if key != "swizzle"}
    return dataclasses.replace(k, grid=(blocks,), block_vars=(pid,), annotations={**ann, "persistent": blocks})
