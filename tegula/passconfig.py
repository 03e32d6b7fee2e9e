"""Pass configuration keys accepted by ``tegula.jit(pass_configs=...)`` / ``tegula.compile``.

Every key of TileLang 0.1.15's ``PassConfigKey`` is accepted, by member or by string
(``PassConfigKey.TL_DISABLE_TMA_LOWER`` or ``"tl.disable_tma_lower"``), plus the strings of
earlier releases (``"tir.disable_vectorize"``...) and tegula's own. An unknown key is a
ConfigError with the closest known key, so a typo is never silently ignored. What each key does
in tegula is in :data:`EFFECTS`; most tune passes tegula does not have, and have no effect (a
program that sets them builds and runs the same). ``python -c "import tegula.passconfig as p;
print(p.describe())"`` prints the table.

``pass_context(config)`` gives pass configs to every kernel built inside a ``with`` block (what
``tvm.transform.PassContext(config=...)`` means to TileLang programs); explicit ``pass_configs``
win over it.
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import enum
from typing import Any, Iterator, Mapping, Optional

from tegula.errors import ConfigError

NO_EFFECT = "accepted; no effect in tegula"


class PassConfigKey(str, enum.Enum):
    """TileLang's pass configuration keys (a ``str`` enum: members compare equal to their strings)."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"
    # earlier releases' names that programs still use
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_ENABLE_DEBUG = "tl.enable_debug"
    # Ascend: insert the flags between pipes automatically (TileLang-Ascend's key)
    TL_ASCEND_AUTO_SYNC = "tl.ascend_auto_sync"
    # TileLang-Ascend's other keys: memory planning, cube/vector combination, cross-core sync
    TL_ASCEND_MEMORY_PLANNING = "tl.ascend_memory_planning"
    TL_ASCEND_AUTO_CV_COMBINE = "tl.ascend_auto_cv_combine"
    TL_ASCEND_AUTO_CV_SYNC = "tl.ascend_auto_cross_core_sync"
    # tegula's own
    TEGULA_DISABLE_BARRIER_INSERTION = "tegula.disable_barrier_insertion"
    TEGULA_EMU_RACES_AS_WARNINGS = "tegula.emu_races_as_warnings"
    # watch it break: every barrier tegula places dropped (CUDA), no flags placed (Ascend)
    TEGULA_DROP_BARRIERS = "tegula.drop_barriers"
    # the seed of the Ascend emulator's adversarial pipe order
    TEGULA_NPU_EMU_SEED = "tegula.npu_emu_seed"
    # the Ascend emulator reports two cores writing identical values to the same GM bytes as a race
    TEGULA_NPU_EMU_STRICT = "tegula.npu_emu_strict"
    # NPU AutoSchedule's solver: "auto" (z3 when installed), "z3" or "list"
    TEGULA_NPU_SCHEDULER = "tegula.npu_scheduler"
    # sm_90a: keep T.gemm on mma.sync instead of wgmma
    TEGULA_DISABLE_WGMMA = "tegula.disable_wgmma"
    # sm_90a: a TMA-pipelined or warp-specialized loop of gemms keeps one k-tile of wgmma in flight
    # (its stage is freed one iteration later); True / False force it on / off, unset: on for
    # accumulators of at least 128 x 256 per block (TmaPipeline: and at least 4 stages)
    TEGULA_WGMMA_OVERLAP = "tegula.wgmma_overlap"
    # sm_90a: split pipelined TMA loops into a producer warpgroup and consumers (WarpSpecialize);
    # True / False force it on / off, unset: for loops of gemms over tiles up to 64 x 128 or of at
    # least 128 x 256 (those with the wgmma overlap), attention loops the softmax overlap suits
    # with the same number of key blocks in every block (their consumers run the overlap), and
    # causal ones of 256 threads whose tiles keep the SM to one block (split plainly, each gemm
    # waited for)
    TEGULA_WARP_SPECIALIZE = "tegula.warp_specialize"
    # sm_90a: an attention-shaped TMA-pipelined loop (gemm, softmax, gemm from registers) runs the
    # second gemm of a block beside the next block's softmax (TmaPipeline, or the consumers of a
    # loop WarpSpecialize splits); True / False force it
    # on / off, unset: where the fragments live across the overlap fit 160 registers per thread and
    # shared memory already limits the SM to one block, except causal loops WarpSpecialize splits
    TEGULA_SOFTMAX_OVERLAP = "tegula.softmax_overlap"
    # sm_90a: in a loop WarpSpecialize splits, the whole shared tiles the kernel copies in before
    # the loop and only gemms read (attention's Q) are loaded by the producer warpgroup through TMA
    # on an mbarrier of their own instead of by the consumers; True / False: on / off, unset: on in
    # the plain split of causal attention (measured faster there), off elsewhere
    TEGULA_WS_TMA_PROLOGUE = "tegula.ws_tma_prologue"
    # sm_90a: whole tiles stored to global memory through the copy engine (TmaStores); True / False
    # force it on / off for shared tiles and fragments, unset: shared tiles (TileLang's default)
    TEGULA_TMA_STORE = "tegula.tma_store"
    # sm_90a: keep blockIdx.x in order where the pipelined loop grows with it (OrderBlocks off)
    TEGULA_DISABLE_BLOCK_ORDER = "tegula.disable_block_order"
    # sm_90a: GEMM-shaped kernels launch their blocks in strips of this many columns for L2 reuse
    # (RasterBlocks); 0 / False: launch order, unset: the width that makes a wave square in bytes
    TEGULA_BLOCK_RASTER = "tegula.block_raster"
    # blocks per SM the CUDA compiler must leave room for (the second __launch_bounds__ value):
    # caps registers per thread at 65536 / (threads * value)
    TEGULA_MIN_BLOCKS_PER_SM = "tegula.min_blocks_per_sm"

    def __str__(self) -> str:
        return self.value


# strings of earlier releases, accepted as the same keys
LEGACY_STRINGS = {
    "tir.disable_vectorize": PassConfigKey.TIR_DISABLE_VECTORIZE,
    "tir.enable_debug": PassConfigKey.TIR_ENABLE_DEBUG,
    "tir.merge_static_smem": PassConfigKey.TIR_MERGE_STATIC_SMEM,
    "tir.use_async_copy": PassConfigKey.TIR_USE_ASYNC_COPY,
    "tir.disable_cse_tir": PassConfigKey.TIR_DISABLE_CSE,
    "tir.Simplify": PassConfigKey.TIR_SIMPLIFY,
    "tir.disable_storage_rewrite": PassConfigKey.TIR_DISABLE_STORAGE_REWRITE,
    "tir.add_lower_pass": PassConfigKey.TIR_ADD_LOWER_PASS,
    "tir.noalias": PassConfigKey.TIR_NOALIAS,
}

K = PassConfigKey
# what each key does in tegula; keys not listed here are accepted and have no effect
EFFECTS: dict[PassConfigKey, str] = {
    K.TL_ENABLE_FAST_MATH: "CUDA: fast math intrinsics and --use_fast_math",
    K.TL_DISABLE_FAST_MATH: "CUDA: overrides TL_ENABLE_FAST_MATH",
    K.TL_CONFIG_INDEX_BITWIDTH: "CUDA: 64 makes every index computation 64-bit",
    K.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: "CUDA: ptxas -v (register and spill report in the compile log)",
    K.TL_DEVICE_COMPILE_FLAGS: "CUDA: extra NVRTC / nvcc options (a string or a list of strings)",
    K.TEGULA_DISABLE_BARRIER_INSERTION: "CUDA: skip the InsertBarriers pass",
    K.TL_DISABLE_SHARED_MEMORY_REUSE: "CUDA: PlanSharedMemory gives every shared buffer bytes of its own",
    K.TL_DISABLE_TMA_LOWER: "CUDA sm_90a: no TMA loads (TmaPipeline and WarpSpecialize off; cp.async)",
    K.TL_DISABLE_WARP_SPECIALIZED: "CUDA sm_90a: skip the WarpSpecialize pass",
    K.TEGULA_WARP_SPECIALIZE: "CUDA sm_90a: WarpSpecialize on (True) or off (False) for every loop it can take",
    K.TEGULA_DISABLE_BLOCK_ORDER: "CUDA sm_90a: skip OrderBlocks (longest blocks first)",
    K.TEGULA_BLOCK_RASTER: "CUDA sm_90a: RasterBlocks' strip width for GEMM-shaped grids (0: launch order)",
    K.TEGULA_TMA_STORE: "CUDA sm_90a: TMA stores of whole tiles to global memory, shared tiles and fragments (True / False)",
    K.TEGULA_SOFTMAX_OVERLAP: "CUDA sm_90a: attention's second gemm beside the next softmax (TmaPipeline, WarpSpecialize; True / False)",
    K.TEGULA_WS_TMA_PROLOGUE: "CUDA sm_90a: WarpSpecialize's producer loads the tiles copied before the loop (attention's Q) by TMA",
    K.TEGULA_EMU_RACES_AS_WARNINGS: "cuda-emu: report shared-memory races as warnings",
    K.TEGULA_DROP_BARRIERS: "CUDA: DropBarriers removes every __syncthreads, bar.sync and mbarrier wait of the "
                            "lowered kernel; Ascend: no InsertSync (no flags or pipe barriers placed). The "
                            "emulators then report the races (docs/language.md, 'Watch it break')",
    K.TEGULA_MIN_BLOCKS_PER_SM: "CUDA: the second __launch_bounds__ value",
    K.TL_ASCEND_AUTO_SYNC: "Ascend: insert the flags between pipes automatically",
    K.TL_ASCEND_MEMORY_PLANNING: "Ascend: tegula always plans NPU memory (PlanNpuMemory: offsets, "
                                 "alignment, capacity), so True changes nothing and False does not turn it off",
    K.TL_ASCEND_AUTO_CV_COMBINE: "Ascend: tegula always combines a developer-level kernel's cube and "
                                 "vector code into one mixed kernel (AssignNpuScopes), so the key changes nothing",
    K.TL_ASCEND_AUTO_CV_SYNC: "Ascend: cross-core flags for GM hand-offs between cube and vector scopes; "
                              "InsertSync adds them whenever it runs (TL_ASCEND_AUTO_SYNC, developer-level "
                              "kernels), so the key alone changes nothing",
    K.TEGULA_NPU_EMU_SEED: "ascend-emu: the seed of the adversarial pipe order",
    K.TEGULA_NPU_EMU_STRICT: "ascend-emu: unordered writes of identical values to the same GM bytes by two cores are races too",
    K.TEGULA_NPU_SCHEDULER: "NPU AutoSchedule: \"auto\" (z3 when installed), \"z3\" or \"list\"",
}

KNOWN_KEYS = frozenset([k.value for k in PassConfigKey] + list(LEGACY_STRINGS))


def effect(key: Any) -> str:
    """What ``key`` does in tegula (:data:`NO_EFFECT` for keys accepted for compatibility)."""
    k = _canonical(key)
    return EFFECTS.get(PassConfigKey(k), NO_EFFECT)


def describe() -> str:
    """A table of every accepted key, its string and its effect in tegula."""
    rows = [(k.name, k.value, EFFECTS.get(k, NO_EFFECT)) for k in PassConfigKey]
    w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
    return "\n".join(f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows)


def _canonical(key: Any) -> str:
    k = getattr(key, "value", key)
    if not isinstance(k, str) or k not in KNOWN_KEYS:
        close = difflib.get_close_matches(str(k), sorted(KNOWN_KEYS), n=1)
        raise ConfigError(f"unknown pass config key {k!r}",
                          hint=f"did you mean {close[0]!r}?" if close else "see tegula.PassConfigKey")
    legacy = LEGACY_STRINGS.get(k)
    return legacy.value if legacy is not None else k


_AMBIENT: contextvars.ContextVar[dict] = contextvars.ContextVar("tegula_pass_context", default={})


@contextlib.contextmanager
def pass_context(config: Optional[Mapping[Any, Any]]) -> Iterator[dict]:
    """Within the block, kernels built get ``config`` as pass configs (checked now; explicit
    ``pass_configs`` win; nested contexts add to the outer one)."""
    merged = dict(_AMBIENT.get())
    merged.update(check_pass_configs(dict(config or {}), ambient=False))
    token = _AMBIENT.set(merged)
    try:
        yield merged
    finally:
        _AMBIENT.reset(token)


def split_flags(value: Any, what: str = "compile_flags") -> list[str]:
    """Compiler options given as one string (split at whitespace) or a list of strings, as
    ``compile_flags=`` and the ``tl.device_compile_flags`` pass config take them; nothing for
    None or empty. Anything else is a ConfigError naming ``what``."""
    if not value:
        return []
    if isinstance(value, str):
        return value.split()
    if isinstance(value, (list, tuple)):
        return [str(f) for f in value]
    raise ConfigError(f"{what} must be a string or a list of strings, got {type(value).__name__}",
                      hint='e.g. compile_flags="-O3 -lineinfo"')


def check_pass_configs(pass_configs: Optional[dict], ambient: bool = True) -> dict:
    """Validate keys (``PassConfigKey`` members or their strings); returns a plain dict keyed by
    the canonical strings, with the enclosing :func:`pass_context` underneath when ``ambient``."""
    if pass_configs is not None and not isinstance(pass_configs, Mapping):
        raise ConfigError(f"pass_configs must be a dict, got {type(pass_configs).__name__}")
    out: dict[str, Any] = dict(_AMBIENT.get()) if ambient else {}
    for k, v in (pass_configs or {}).items():
        out[_canonical(k)] = v
    return out
