"""The ``T`` namespace: ``import tegula.language as T``.

TileLang's developer-level API: kernels, allocation, tile operations, loops, reductions,
expressions and dtypes. See ``shared/reference/tilelang-api.md`` for the surface it follows.
"""
import importlib

from tegula.ir.dtype import DType as dtype  # noqa: F401
from tegula.ir.dtype import (bfloat16, bool_ as bool, float8_e4m3, float8_e5m2, float16,  # noqa: A004
                             float32, float64, float4_e2m1fn, int4, int8, int16, int32, int64,
                             uint4, uint8, uint16, uint32, uint64)
from tegula.layout.user import Fragment, Layout  # noqa: F401
from tegula.language.prim_func import Macro, macro, prim_func
from tegula.language.primitives import *  # noqa: F401,F403 (its __all__: the T.* primitives)
from tegula.language.hopper import (fence_proxy_async, set_max_nreg, tma_copy, wait_wgmma,
                                    warp_specialize, wgmma_gemm, ws)
from tegula.language.lowlevel import *  # noqa: F401,F403 (its __all__: TIR-level spellings)
from tegula.language.proxy import Tensor, alloc_buffer, alloc_global, const, dynamic, empty, symbolic
from tegula.language.views import im2col, let, reshape, transpose, view  # noqa: F401

from tegula.language.primitives import __ldg  # noqa: E402,F401 (a module-level dunder name)
from tegula.language import surface as _surface  # noqa: E402 (TileLang names tegula refuses)
from tegula.language.dialect import *  # noqa: E402,F401,F403 (warp-level names, math, hints)
from tegula.language.dialect import (__cos, __exp, __exp10, __log, __log2, __log10,  # noqa: E402,F401
                                     __sin, __tan)

# The Ascend dialect (T.alloc_L1, T.Scope, T.tile, ...) loads on first use of one of its names, so
# that `import tegula` does not pay for the NPU IR (tegula.language.ascend, tegula.ir.npu). These are
# the names of its __all__ (test_npu_a5_dialect checks that the two lists agree).
_ASCEND = frozenset("""
    Cube Scope SimdVF SimtVF Stage Task Vector alloc_l0a alloc_L0A alloc_l0b alloc_L0B alloc_l0c
    alloc_L0C alloc_l1 alloc_L1 alloc_ub annotate_address annotate_buffer_versions ascend_cross_core_set_flag
    ascend_cross_core_wait_flag ascend_pipe_barrier ascend_set_flag ascend_wait_flag barrier_all dual_copy
    gemm_v0 mma pipe_barrier set_cross_flag set_flag tile wait_cross_flag wait_flag
""".split())


def __getattr__(name: str):
    if name in _ASCEND:
        value = getattr(importlib.import_module("tegula.language.ascend"), name)
        globals()[name] = value  # later lookups are plain module attributes
        return value
    if name in _surface.REFUSED:  # TileLang names without a meaning here: any use says why
        return _surface.refused(name)
    raise AttributeError(f"module 'tegula.language' has no attribute '{name}'")


def __dir__() -> list:
    return sorted(set(globals()) | _ASCEND | set(_surface.REFUSED))

Buffer = Tensor
float = float32  # noqa: A001
half = float16
double = float64
int = int32  # noqa: A001
uint = uint32
float8_e4m3fn = float8_e4m3
