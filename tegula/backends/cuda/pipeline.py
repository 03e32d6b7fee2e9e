"""The CUDA pipeline: tile-level IR in, thread-level IR out (then codegen).

This table is the pipeline; ``tegula.transform.pipeline_for("cuda:sm_80")`` turns it into a
:class:`~tegula.transform.Pipeline` (the rows whose pass config is not set, the arch filled in),
which users print, edit and pass to ``tegula.compile(..., pipeline=...)``. ``cuda-emu`` runs
the same pipeline (``tegula/target.py`` says so).
"""
from __future__ import annotations

from typing import Optional

from tegula.arith.simplify import simplify_stmt
from tegula.ir.stmt import PrimFunc
from tegula.passconfig import PassConfigKey
from tegula.target import Target
from tegula.transform.pipeline import PassSpec, Pipeline, check_pipeline
from tegula.transform.specialize_masks import specialize_masks
from tegula.backends.cuda.passes.check_resources import check_resources
from tegula.backends.cuda.passes.drop_barriers import drop_barriers
from tegula.backends.cuda.passes.insert_barriers import insert_barriers
from tegula.backends.cuda.passes.layout_inference import infer_layouts_pass
from tegula.backends.cuda.passes.lower_tile_ops import lower_tile_ops
from tegula.backends.cuda.passes.order_blocks import order_blocks
from tegula.backends.cuda.passes.plan_shared_memory import plan_shared_memory
from tegula.backends.cuda.passes.raster_blocks import raster_blocks
from tegula.backends.cuda.passes.pipeline_copies import pipeline_copies
from tegula.backends.cuda.passes.tma_pipeline import tma_pipeline
from tegula.backends.cuda.passes.tma_stores import tma_stores
from tegula.backends.cuda.passes.use_wgmma import use_wgmma
from tegula.backends.cuda.passes.vectorize_loops import vectorize_loops
from tegula.backends.cuda.passes.warp_specialize import warp_specialize

CUDA_PASSES: tuple[PassSpec, ...] = (
    PassSpec("Simplify", simplify_stmt, "fold the index arithmetic the frontend left"),
    # causal attention, ragged tails: most tiles take the copy without the mask
    PassSpec("SpecializeMasks", specialize_masks,
             "mask-free copies of masked T.Parallel loops, for tiles where the mask holds"),
    PassSpec("OrderBlocks", order_blocks,
             "blocks whose pipelined loop grows with blockIdx.x start longest first",
             unless=PassConfigKey.TEGULA_DISABLE_BLOCK_ORDER, archs=("sm_90a",)),
    # after OrderBlocks, whose kernels keep its order
    PassSpec("RasterBlocks", raster_blocks,
             "GEMM-shaped grids launch in strips of columns, so the blocks running at once share tiles in L2",
             archs=("sm_90a",), config_options=(("panel", PassConfigKey.TEGULA_BLOCK_RASTER),)),
    # before TmaPipeline: the loops it takes are no longer T.Pipelined
    PassSpec("WarpSpecialize", warp_specialize,
             "a pipelined loop of TMA loads split: a producer warpgroup loads, the kernel's threads compute",
             unless=PassConfigKey.TL_DISABLE_WARP_SPECIALIZED, archs=("sm_90a",),
             config_options=(("tma_off", PassConfigKey.TL_DISABLE_TMA_LOWER),
                             ("force", PassConfigKey.TEGULA_WARP_SPECIALIZE),
                             ("overlap", PassConfigKey.TEGULA_WGMMA_OVERLAP),
                             ("min_blocks", PassConfigKey.TEGULA_MIN_BLOCKS_PER_SM),
                             ("softmax", PassConfigKey.TEGULA_SOFTMAX_OVERLAP),
                             ("tma_prologue", PassConfigKey.TEGULA_WS_TMA_PROLOGUE))),
    # the loops it takes are no longer T.Pipelined, so PipelineCopies leaves them
    PassSpec("TmaPipeline", tma_pipeline,
             "T.Pipelined loops whose copies the copy engine can do: TMA into stages, on mbarriers",
             unless=PassConfigKey.TL_DISABLE_TMA_LOWER, archs=("sm_90a",),
             config_options=(("overlap", PassConfigKey.TEGULA_WGMMA_OVERLAP),
                             ("softmax_overlap", PassConfigKey.TEGULA_SOFTMAX_OVERLAP))),
    # must see tile-level copies, so it runs before lowering
    PassSpec("PipelineCopies", pipeline_copies,
             "T.Pipelined: multi-buffered shared tiles, copies issued stages ahead (cp.async)"),
    # after the pipelines: the shared memory their stages take is known
    PassSpec("TmaStores", tma_stores,
             "whole tiles stored to global memory by TMA (shared tiles; fragments staged through one)",
             unless=PassConfigKey.TL_DISABLE_TMA_LOWER, archs=("sm_90a",), target_options=("arch",),
             config_options=(("force", PassConfigKey.TEGULA_TMA_STORE),)),
    # layout inference decides per gemm
    PassSpec("UseWgmma", use_wgmma, "T.gemm on wgmma where its shapes allow",
             unless=PassConfigKey.TEGULA_DISABLE_WGMMA, archs=("sm_90a",)),
    PassSpec("InferLayouts", infer_layouts_pass,
             "layouts of fragments and shared tiles, written into each kernel's layout map"),
    PassSpec("LowerTileOps", lower_tile_ops,
             "tile ops and parallel loops to per-thread code, through those layouts",
             target_options=("arch",)),
    PassSpec("InsertBarriers", insert_barriers,
             "barriers wherever threads hand shared memory to each other",
             unless=PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION),
    PassSpec("SimplifyLowered", simplify_stmt, "fold the index arithmetic lowering produced"),
    # after the index arithmetic is folded, so that offsets show their alignment
    PassSpec("VectorizeLoops", vectorize_loops,
             "T.vectorized element copies become 16/8/4-byte vector copies where aligned"),
    PassSpec("PlanSharedMemory", plan_shared_memory,
             "byte offsets of shared buffers; buffers whose lifetimes do not overlap share bytes",
             config_options=(("no_reuse", PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE),
                             ("no_barriers", PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION))),
    # a user error naming every buffer otherwise
    PassSpec("DropBarriers", drop_barriers,
             "tegula.drop_barriers: every barrier and mbarrier wait removed, to watch cuda-emu report the races",
             only_if=PassConfigKey.TEGULA_DROP_BARRIERS),
    PassSpec("CheckResources", check_resources,
             "shared memory and threads per block within the arch's limits",
             target_options=("arch", "interpret")),
)


def lower(func: PrimFunc, target: Target, pass_configs: dict,
          pipeline: Optional[Pipeline] = None) -> PrimFunc:
    """Lower ``func`` to thread-level IR for ``target`` (see codegen's docstring for that IR) with
    ``pipeline`` (default: the target's own) and the instruments the settings ask for."""
    return check_pipeline(pipeline, target, pass_configs).run(func)
