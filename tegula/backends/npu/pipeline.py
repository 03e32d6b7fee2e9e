"""The NPU pipeline: tile-level IR of an Ascend kernel in, pipe-level IR out (then the emulator or
an emitter). Each step is a function from IR to IR in ``passes/``; this table is the pipeline
(``tegula.transform.pipeline_for("ascend-emu:a2a3")`` makes it a Pipeline, the machine filled in).
"""
from __future__ import annotations

from typing import Optional

from tegula.ir.stmt import PrimFunc
from tegula.passconfig import PassConfigKey
from tegula.target import Target
from tegula.transform.pipeline import PassSpec, Pipeline, check_pipeline

from tegula.backends.npu.machine import machine
from tegula.backends.npu.passes.auto_schedule import auto_schedule
from tegula.backends.npu.passes.assign_npu_scopes import assign_npu_scopes
from tegula.backends.npu.passes.check_paths import check_npu_ops
from tegula.backends.npu.passes.infer_core_scope import infer_core_scope
from tegula.backends.npu.passes.infer_fractal_layout import infer_fractal_layout
from tegula.backends.npu.passes.insert_sync import insert_sync
from tegula.backends.npu.passes.lower_gemm_v0 import lower_gemm_v0
from tegula.backends.npu.passes.multi_buffer import multi_buffer
from tegula.backends.npu.passes.parallel_to_vec import parallel_to_vec
from tegula.backends.npu.passes.plan_memory import plan_npu_memory


def check_ops_on(func: PrimFunc, arch: str) -> PrimFunc:
    """CheckNpuOps on the machine ``arch`` names."""
    return check_npu_ops(func, machine(arch))


def plan_memory_on(func: PrimFunc, arch: str) -> PrimFunc:
    """PlanNpuMemory on the machine ``arch`` names."""
    return plan_npu_memory(func, machine(arch))


def auto_schedule_on(func: PrimFunc, arch: str, solver: Optional[str] = None) -> PrimFunc:
    """AutoSchedule on the machine ``arch`` names, with ``solver`` ("auto", "z3", "list")."""
    return auto_schedule(func, machine(arch), solver)


def insert_sync_on(func: PrimFunc, arch: str, every_kernel: Optional[bool] = None) -> PrimFunc:
    """InsertSync on the machine ``arch`` names: on every kernel with ``tl.ascend_auto_sync``,
    else on developer-level kernels only (they have no flags of their own)."""
    return insert_sync(func, machine(arch), every_kernel=bool(every_kernel))


NPU_PASSES: tuple[PassSpec, ...] = (
    PassSpec("AssignNpuScopes", assign_npu_scopes,
             "developer-level kernels: NPU memories by use, the grid flattened, vector code on "
             "the first vector core"),
    PassSpec("InferCoreScope", infer_core_scope,
             "every tile op and flag inside the T.Scope of the core that runs it"),
    PassSpec("CheckNpuOps", check_ops_on,
             "copies on legal paths, flag ids in range (errors at the user's line)",
             target_options=("arch",)),
    PassSpec("LowerGemmV0", lower_gemm_v0,
             "gemm_v0 on L1 operands: K in L0-sized chunks moved by MTE1 into ping-pong L0A / L0B "
             "halves, each multiplied into L0C; its own pipe flags in hand-synced kernels",
             target_options=("arch",),
             config_options=(("auto_sync", PassConfigKey.TL_ASCEND_AUTO_SYNC),)),
    PassSpec("AutoSchedule", auto_schedule_on,
             "modulo schedules of T.Pipelined loops (II, buffer versions, stages, task order) and "
             "makespan-minimal straight-line code, from the cost model",
             target_options=("arch",),
             config_options=(("solver", PassConfigKey.TEGULA_NPU_SCHEDULER),)),
    PassSpec("MultiBuffer", multi_buffer,
             "the versions AutoSchedule chose become rings (buf[k % n])"),
    PassSpec("InferFractalLayout", infer_fractal_layout,
             "NZ / ZZ / ZN fractal layouts of cube buffers, padded to whole fractals"),
    PassSpec("PlanNpuMemory", plan_memory_on,
             "byte offsets, alignment, capacity (an error naming every buffer otherwise)",
             target_options=("arch",)),
    PassSpec("InsertSync", insert_sync_on,
             "flags between pipes, barriers within MTE/FIX pipes, ring flags across loop iterations",
             target_options=("arch",), unless=PassConfigKey.TEGULA_DROP_BARRIERS,
             config_options=(("every_kernel", PassConfigKey.TL_ASCEND_AUTO_SYNC),)),
    PassSpec("ParallelToVec", parallel_to_vec,
             "T.Parallel nests that are one elementwise op on whole UB tiles become that vector "
             "op, so the emulator runs what the emitters print"),
)


def lower(func: PrimFunc, target: Target, pass_configs: dict,
          pipeline: Optional[Pipeline] = None) -> PrimFunc:
    """Lower ``func`` to pipe-level IR for ``target`` with ``pipeline`` (default: the target's)."""
    return check_pipeline(pipeline, target, pass_configs).run(func)
