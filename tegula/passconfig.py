"""Pass configuration keys accepted by ``tegula.jit(pass_configs=...)``.

Keys follow TileLang's names (``"tl.disable_tma_lower"``); they are accepted on every target and
read by the passes they concern. An unknown key is an error, so a typo is not silently ignored.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.errors import ConfigError


class PassConfigKey:
    TL_SIMPLIFY = "tl.Simplify"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_DISABLE_DYNAMIC_TAIL_SPLIT = "tl.disable_dynamic_tail_split"
    TL_DYNAMIC_ALIGNMENT = "tl.dynamic_alignment"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_DEBUG = "tl.enable_debug"
    TIR_DISABLE_VECTORIZE = "tir.disable_vectorize"
    TIR_ENABLE_DEBUG = "tir.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tir.merge_static_smem"
    TIR_USE_ASYNC_COPY = "tir.use_async_copy"
    TIR_DISABLE_CSE = "tir.disable_cse_tir"
    # Ascend: insert the flags between pipes automatically (TileLang-Ascend's key)
    TL_ASCEND_AUTO_SYNC = "tl.ascend_auto_sync"
    # tegula's own
    TEGULA_DISABLE_BARRIER_INSERTION = "tegula.disable_barrier_insertion"
    TEGULA_EMU_RACES_AS_WARNINGS = "tegula.emu_races_as_warnings"
    # the seed of the Ascend emulator's adversarial pipe order
    TEGULA_NPU_EMU_SEED = "tegula.npu_emu_seed"
    # blocks per SM the CUDA compiler must leave room for (the second __launch_bounds__ value):
    # caps registers per thread at 65536 / (threads * value)
    TEGULA_MIN_BLOCKS_PER_SM = "tegula.min_blocks_per_sm"


KNOWN_KEYS = frozenset(v for k, v in vars(PassConfigKey).items() if k.isupper())


def check_pass_configs(pass_configs: Optional[dict]) -> dict:
    """Validate keys (``PassConfigKey`` members or their strings); returns a plain dict."""
    if pass_configs is None:
        return {}
    if not isinstance(pass_configs, dict):
        raise ConfigError(f"pass_configs must be a dict, got {type(pass_configs).__name__}")
    out: dict[str, Any] = {}
    for k, v in pass_configs.items():
        key = getattr(k, "value", k)
        if key not in KNOWN_KEYS:
            import difflib

            close = difflib.get_close_matches(str(key), sorted(KNOWN_KEYS), n=1)
            raise ConfigError(f"unknown pass config key {key!r}",
                              hint=f"did you mean {close[0]!r}?" if close else "see tegula.PassConfigKey")
        out[key] = v
    return out
