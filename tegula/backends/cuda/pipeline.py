"""The CUDA pipeline: tile-level IR in, thread-level IR out (then codegen).

Each step is a function from IR to IR in ``passes/``; ``lower`` lists them in order, and
``tegula.tools.trace`` prints the IR after each one.
"""
from __future__ import annotations

from typing import Callable

from tegula.arith.simplify import simplify_stmt
from tegula.ir.stmt import PrimFunc
from tegula.passconfig import PassConfigKey
from tegula.target import Target


def passes(target: Target, pass_configs: dict) -> list[tuple[str, Callable[[PrimFunc], PrimFunc]]]:
    """The passes of the CUDA pipeline, in order, with their names."""
    from tegula.backends.cuda.passes.check_resources import check_resources
    from tegula.backends.cuda.passes.insert_barriers import insert_barriers
    from tegula.backends.cuda.passes.lower_tile_ops import lower_tile_ops
    from tegula.backends.cuda.passes.plan_shared_memory import plan_shared_memory
    from tegula.backends.cuda.passes.pipeline_copies import pipeline_copies
    from tegula.transform.specialize_masks import specialize_masks

    out: list[tuple[str, Callable[[PrimFunc], PrimFunc]]] = [
        # fold index arithmetic the frontend left (ceildiv of constants, x*64+64-x*64, ...)
        ("Simplify", simplify_stmt),
        # parallel loops masked by affine conditions get a copy without the mask, taken by the
        # (usually most) tiles where it holds everywhere: causal attention, ragged tails
        ("SpecializeMasks", specialize_masks),
        # T.Pipelined: multi-buffer the shared tiles its copies fill, issue them stages ahead
        # with cp.async; must see tile-level copies, so it runs before lowering
        ("PipelineCopies", pipeline_copies),
        # layouts, then tile ops and parallel loops to per-thread code
        ("LowerTileOps", lower_tile_ops),
    ]
    if not pass_configs.get(PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION):
        # barriers wherever threads hand shared memory to each other
        out.append(("InsertBarriers", insert_barriers))
    # clean up the index arithmetic lowering produced
    out.append(("SimplifyLowered", simplify_stmt))
    # byte offsets of shared buffers; buffers separated by a barrier share bytes
    out.append(("PlanSharedMemory", plan_shared_memory))
    # shared memory and threads within the target's limits (a user error otherwise)
    out.append(("CheckResources", lambda f: check_resources(f, target.arch or "sm_80")))
    return out


def lower(func: PrimFunc, target: Target, pass_configs: dict) -> PrimFunc:
    """Lower ``func`` to thread-level IR for ``target`` (see codegen's docstring for that IR)."""
    from tegula import config

    if config.get().trace_dir:  # TEGULA_TRACE: the same passes, each step written to the directory
        from tegula.tools.trace import dump_lowering

        return dump_lowering(func, target, pass_configs, config.get().trace_dir)
    for _name, p in passes(target, pass_configs):
        func = p(func)
    return func
