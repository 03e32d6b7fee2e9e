"""The NPU pipeline: tile-level IR of an Ascend kernel in, pipe-level IR out (then the emulator or
an emitter). Each step is a function from IR to IR in ``passes/``; ``passes`` lists them in order.
"""
from __future__ import annotations

from typing import Callable

from tegula.ir.stmt import PrimFunc
from tegula.passconfig import PassConfigKey
from tegula.target import Target

from tegula.backends.npu.machine import machine


def passes(target: Target, pass_configs: dict) -> list[tuple[str, Callable[[PrimFunc], PrimFunc]]]:
    """The passes of the NPU pipeline for ``target`` (its arch names the machine), in order."""
    from tegula.backends.npu.passes.check_paths import check_npu_ops
    from tegula.backends.npu.passes.infer_core_scope import infer_core_scope
    from tegula.backends.npu.passes.infer_fractal_layout import infer_fractal_layout
    from tegula.backends.npu.passes.insert_sync import insert_sync
    from tegula.backends.npu.passes.lower_gemm_v0 import lower_gemm_v0
    from tegula.backends.npu.passes.multi_buffer import multi_buffer
    from tegula.backends.npu.passes.plan_memory import plan_npu_memory

    m = machine(target.arch)
    out: list[tuple[str, Callable[[PrimFunc], PrimFunc]]] = [
        # every tile op and flag inside the T.Scope of the core that runs it
        ("InferCoreScope", infer_core_scope),
        # copies on legal paths, flag ids in range (errors at the user's line)
        ("CheckNpuOps", lambda f: check_npu_ops(f, m)),
        # gemm_v0 on L1 operands: MTE1 moves into L0A / L0B, then the cube's mma
        ("LowerGemmV0", lower_gemm_v0),
        # T.Pipelined(num_stages=S): S versions of the tiles its copies from GM fill
        ("MultiBuffer", multi_buffer),
        # NZ / ZZ / ZN fractal layouts of cube buffers, padded to whole fractals
        ("InferFractalLayout", infer_fractal_layout),
        # byte offsets, alignment, capacity (an error naming every buffer otherwise)
        ("PlanNpuMemory", lambda f: plan_npu_memory(f, m)),
    ]
    if pass_configs.get(PassConfigKey.TL_ASCEND_AUTO_SYNC):
        # flags between pipes, barriers within MTE/FIX pipes, ring flags across loop iterations
        out.append(("InsertSync", lambda f: insert_sync(f, m)))
    return out


def lower(func: PrimFunc, target: Target, pass_configs: dict) -> PrimFunc:
    """Lower ``func`` to pipe-level IR for ``target``."""
    for _name, p in passes(target, pass_configs):
        func = p(func)
    return func
