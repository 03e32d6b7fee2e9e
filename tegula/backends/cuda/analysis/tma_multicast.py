"""TMA multicast over thread-block clusters (sm_90a), for WarpSpecialize's split GEMM loops.

Two neighbouring blocks of a GEMM that read the same operand tile (the A tile of one row of
C tiles, for blocks side by side along ``blockIdx.x``) can load it once: launched as a cluster of
2 blocks, each loads half of the tile's rows and the copy engine writes that half into the shared
memory of both (``cp.async.bulk.tensor ... .multicast::cluster``, CTA mask ``0b11``), counting
the bytes on the mbarrier at the same offset in each. Every block still announces the whole tile
on its own full barrier. Since a block's producer now writes into its peer's stage too, a stage
is free only when the consumers of *both* blocks have released it: each consumer thread arrives
on its own empty barrier and the first thread of each consumer warp on the peer's (``mapa`` +
``mbarrier.arrive.shared::cluster``), and the empty barriers count both. A cluster barrier after the barrier
initialization (a peer may arrive on them or copy into the stage they guard before this block's
own threads got there) and one before the end (no block exits while its peer still arrives on its
barriers) close the kernel.

The rule (:func:`cluster_plan`): a kernel its author launches in clusters of 2
(``T.Kernel(..., cluster_dims=(2, 1))`` or ``(1, 2)``), whose loop WarpSpecialize splits is a loop
of gemms, in a 2-d static grid;

- the tiles the loop copies are chosen by one block index each (the operand chosen by
  ``blockIdx.y`` is shared by blocks side by side along x: a 2x1 cluster multicasts it; the one
  chosen by ``blockIdx.x`` is shared along y: 1x2);
- 2x1 needs blocks of a pair seeing the same ``blockIdx.y``: launch order, or RasterBlocks' /
  ``T.use_swizzle``'s row strips of an even width; 1x2 needs launch order;
- the shared tiles' rows split in two parts of whole 8-row swizzle groups (rows a multiple of 16).

In other forms, or where the rule does not hold, the kernel's blocks run in its clusters as they
are. (Picking clusters for kernels that asked for none, ``tegula.cluster``, measured 0.63-0.81x
and then 0.95-1.02x of the unclustered GEMM on an H200, was deleted: BENCHMARKS.md.)

Before/after (the producer of a 2x1 cluster; ``rank`` is ``%cluster_ctarank``)::

    T.tma_copy(A[by * 128, k * 64], A_s[s], barrier=full[s])     # annotation tma_multicast = (rank, 2)
        -> expect_tx(full[s], 16384); tma_load_multicast(&A_s[s][rank * 64, 0], A_map(64x64), &full[s], 0b11,
                                                           k * 64, by * 128 + rank * 64)
    T.mbarrier_arrive(empty[s])                                  # the consumers
        -> T.mbarrier_arrive(empty[s]); if lane == 0: tl::mbarrier_arrive_cluster(&empty[s], rank ^ 1)
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tegula.ir.annotations import CLUSTER, SWIZZLE
from tegula.arith.simplify import const_int
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.expr import Builtin, Var
from tegula.ir.stmt import Copy, IfThenElse, Kernel, Stmt, seq
from tegula.ir.visitor import substitute, uses_var
from tegula.backends.cuda.analysis.pipelined_loop import let_values
from tegula.backends.cuda.analysis.tma import call_stmt

# blocks of a cluster (the multicast shares a tile between 2)
CLUSTER_SIZE = 2


@dataclasses.dataclass(frozen=True)
class ClusterPlan:
    """How a split GEMM kernel multicasts in its clusters: ``dims`` (2, 1) or (1, 2), the copies
    whose tile the blocks of a cluster share (multicast, by identity) and the block's ``rank``
    variable."""

    dims: tuple
    shared: tuple
    rank: Var

    def multicast(self, c: Copy) -> bool:
        return any(c is s for s in self.shared)


def _axis_copies(k: Kernel, producers: list, lets: list) -> Optional[tuple[list, list]]:
    """(copies chosen by blockIdx.y alone, by blockIdx.x alone), or None if a copy is neither."""
    bx, by = k.block_vars[0], k.block_vars[1]
    values = let_values(lets)
    on_y, on_x = [], []
    for c in producers:
        starts = [substitute(s, values) for s in c.src.starts]
        ux, uy = any(uses_var(s, bx) for s in starts), any(uses_var(s, by) for s in starts)
        if ux == uy:
            return None
        (on_y if uy else on_x).append(c)
    return on_y, on_x


def _rows_split(copies: list) -> bool:
    return all(int(c.dst.buffer.shape[-2]) % (8 * CLUSTER_SIZE) == 0 for c in copies)


def cluster_plan(k: Kernel, producers: list, lets: list) -> Optional[ClusterPlan]:
    """The multicast of kernel ``k``, launched in clusters by its author, whose split loop of gemms
    loads ``producers`` (lets: the kernel's index lets), or None (module docstring: the rule)."""
    dims = CLUSTER.get(k.annotations)  # T.Kernel(..., cluster_dims=)
    if dims is None or tuple(dims) not in ((2, 1), (1, 2)) or len(k.block_vars) != 2 or len(k.grid) != 2:
        return None
    dims = tuple(dims)
    grid = [const_int(E.as_expr(g)) for g in k.grid]
    if any(g is None for g in grid):
        return None
    parts = _axis_copies(k, producers, lets)
    if parts is None:
        return None
    on_y, on_x = parts
    swz = SWIZZLE.get(k.annotations)
    along, shared = (0, on_y) if dims == (2, 1) else (1, on_x)
    if grid[along] % CLUSTER_SIZE or not shared or not _rows_split(shared):
        return None
    if dims == (2, 1) and swz and not (swz[1] == "row" and int(swz[0]) % CLUSTER_SIZE == 0):
        return None
    if dims == (1, 2) and swz:
        return None
    return ClusterPlan(dims, tuple(shared), Var("cta_rank", dt.int32))


def rank_value() -> Builtin:
    return Builtin("tl::cluster_cta_rank", (), dt.int32)


def release(plan: Optional[ClusterPlan], addr: Builtin) -> Stmt:
    """A consumer frees a stage: every thread arrives on its empty barrier, and in a cluster the
    first thread of each warp on the peer's too (after the warp's ``wait_group`` retired the
    wgmma that read the stage; one remote arrive per warp, not per thread, on the interconnect)."""
    local = call_stmt("tl::mbarrier_arrive", addr)
    if plan is None:
        return local
    lane = E.binary("bitand", Builtin("thread_idx", (), dt.int32), 31)
    return seq(local, IfThenElse(E.compare("eq", lane, 0),
                                 call_stmt("tl::mbarrier_arrive_cluster", addr, E.binary("bitxor", plan.rank, 1))))


def frees(plan: Optional[ClusterPlan], threads: int) -> int:
    """Arrivals that free a stage: the block's consumer threads, and in a cluster a warp's first
    thread for each warp of the peer's consumers."""
    return threads + (threads // 32 if plan is not None else 0)


def cluster_sync() -> Stmt:
    return call_stmt("tl::cluster_sync")


def annotate(c: Copy, plan: Optional[ClusterPlan]) -> dict:
    """The extra annotations of producer copy ``c``: its multicast (rank, blocks) when shared."""
    return {"tma_multicast": (plan.rank, CLUSTER_SIZE)} if plan is not None and plan.multicast(c) else {}
