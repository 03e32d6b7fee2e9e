"""Helpers for the Hopper emulator tests: the lowered sm_90a kernels, and mutants of them with one
synchronization statement removed."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from tegula.backends.cuda.pipeline import lower
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.target import Target

from emu_util import ex

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))
from gemm_util import gemm  # noqa: E402

# what orders memory or threads in the lowered Hopper code
SYNC = ("tl::mbarrier_wait", "tl::mbarrier_arrive", "tl::mbarrier_arrive_expect_tx", "tl::mbarrier_expect_tx",
        "sync_threads", "tl::named_barrier_sync", "tl::named_barrier_arrive", "tl::fence_proxy_async", "tl::fence_barrier_init",
        "tl::wgmma_fence", "tl::wgmma_commit_group", "tl::wgmma_wait_group", "tl::wgmma_fence_operands",
        "tl::cp_async_wait", "tl::cp_async_commit", "tl::tma_store_wait", "tl::tma_store_commit",
        "tl::cluster_sync", "tl::mbarrier_arrive_cluster")

KERNELS: dict[str, Callable[[], Any]] = {
    # two consumer warpgroups: a stage refilled while the other warpgroup still reads it is a race
    "gemm_tma": lambda: ex("gemm").matmul.get_tir(256, 128, 192, 128, 64, 32, 3, 256),
    # rows of 140 bytes are no TMA box: cp.async (generic proxy) feeds wgmma
    "gemm_cp_async": lambda: ex("gemm").matmul.get_tir(128, 64, 70, 128, 64, 32, 3, 256),
    "flash_attention": lambda: ex("flash_attention").flash_attention(1, 1, 192, 64, block_M=128, num_stages=2,
                                                                     threads=256),
    # WarpSpecialize with one k-tile of wgmma in flight in two consumer warpgroups
    "gemm_ws_overlap": lambda: ex("gemm").matmul.get_tir(128, 256, 192, 128, 128, 32, 3, 256),
    # the softmax overlap (G2 of block j - 1 beside the softmax of block j): TmaPipeline's form,
    # and the warp-specialized one (a producer warpgroup on K and V rings; 4 key blocks, so that
    # the producer waits for a stage the loop frees, not only the peeled first block)
    "flash_attention_overlap": lambda: ex("flash_attention").flash_attention(1, 1, 192, 64, block_M=128,
                                                                             num_stages=2, threads=256),
    "flash_attention_ws": lambda: ex("flash_attention").flash_attention(1, 1, 256, 64, block_M=128, num_stages=2,
                                                                        threads=256),
    # the accumulator staged through shared memory and stored by TMA (tegula.tma_store)
    "gemm_tma_store": lambda: ex("gemm").matmul.get_tir(128, 256, 128, 128, 128, 32, 2, 256),
    # the default sm_90a GEMM: warp-specialized, one k-tile of wgmma in flight, the accumulator
    # staged and stored by TMA after the consumers' loop
    "gemm_ws_tma_store": lambda: ex("gemm").matmul.get_tir(128, 256, 128, 128, 128, 32, 2, 256),
    # a 2x1 cluster (T.Kernel(..., cluster_dims=(2, 1))): the two blocks load half of the A tile
    # each and multicast it, every consumer frees its stage in both blocks (a remote arrive per
    # warp), cluster barriers after the barrier init and before the end; 6 k-tiles on a ring of 3 (with 2 stages
    # the producer waits for every remote arrive, and the barrier before the end orders nothing more)
    "gemm_cluster": lambda: gemm(128, 256, 192, 128, 128, 32, 3, 256, cluster_dims=(2, 1)),
}


# the checks here are written against TmaPipeline's lowering of these kernels (one warpgroup
# set issuing and computing); WarpSpecialize, which takes some of them by default, has its own
# set, and their epilogues store from registers (TmaStores' staged tile has a kernel of its own)
NO_WS = {"tl.disable_warp_specialized": True, "tegula.tma_store": False}
CONFIGS = {"gemm_ws_overlap": {"tegula.warp_specialize": True, "tegula.wgmma_overlap": True, "tegula.tma_store": False},
           "flash_attention_overlap": {**NO_WS, "tegula.softmax_overlap": True},
           "flash_attention_ws": {"tegula.warp_specialize": True, "tegula.softmax_overlap": True},
           "gemm_tma_store": {"tl.disable_warp_specialized": True, "tegula.tma_store": True},
           "gemm_ws_tma_store": {"tegula.warp_specialize": True, "tegula.wgmma_overlap": True, "tegula.tma_store": True},
           "gemm_cluster": {"tegula.warp_specialize": True, "tegula.wgmma_overlap": True, "tegula.tma_store": True}}


def lowered(name: str, configs: Optional[dict] = None) -> tuple[Any, Any]:
    """(tile-level function, its sm_90a lowering) of kernel ``name``."""
    f = KERNELS[name]()
    return f, lower(f, Target("cuda", "sm_90a"), CONFIGS.get(name, NO_WS) if configs is None else configs)


class Mutate:
    """Walks the statements in order, counting the synchronization statements (``seen``);
    ``drop``: the index of the one removed, ``change``: a function rewriting it instead. Only
    statement containers are rebuilt (expressions and variables stay the same objects)."""

    CHILDREN = {S.SeqStmt: ("stmts",), S.IfThenElse: ("then", "else_"), S.For: ("body",),
                S.While: ("body",), S.AttrStmt: ("body",), S.Kernel: ("body",),
                S.PrimFunc: ("body",)}

    def __init__(self, drop: int = -1, change: Optional[Callable] = None):
        self.drop, self.change = drop, change
        self.seen: list = []

    def visit(self, node: Any) -> Any:
        if isinstance(node, S.Evaluate):
            if isinstance(node.value, E.Builtin) and node.value.name in SYNC:
                self.seen.append(node)
                if len(self.seen) - 1 == self.drop:
                    return self.change(node) if self.change is not None else S.SeqStmt(())
            return node
        fields = self.CHILDREN.get(type(node))
        if fields is None:
            return node
        changes = {}
        for f in fields:
            v = getattr(node, f)
            if isinstance(v, tuple):
                new = tuple(self.visit(c) for c in v)
            else:
                new = self.visit(v) if v is not None else None
            if new is not v:
                changes[f] = new
        return dataclasses.replace(node, **changes) if changes else node


class _Every(Mutate):
    def __init__(self, name: str, change: Callable):
        super().__init__(change=change)
        self.name = name

    def visit(self, node: Any) -> Any:
        if isinstance(node, S.Evaluate) and isinstance(node.value, E.Builtin) and node.value.name == self.name:
            return self.change(node)
        return super().visit(node)


def every(low: Any, name: str, change: Callable) -> Any:
    """``low`` with every statement calling ``name`` rewritten by ``change``."""
    return _Every(name, change).visit(low)


def sync_statements(low: Any) -> list:
    m = Mutate()
    m.visit(low)
    return m.seen


def without(low: Any, i: int) -> Any:
    """``low`` without its ``i``-th synchronization statement (in visiting order)."""
    return Mutate(i).visit(low)


def nth(low: Any, name: str, k: int = 0) -> int:
    """The index (in visiting order) of the ``k``-th synchronization statement called ``name``."""
    idx = [i for i, s in enumerate(sync_statements(low)) if s.value.name == name]
    return idx[k]
