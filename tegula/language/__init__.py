"""The ``T`` namespace: ``import tegula.language as T``.

TileLang's developer-level API: kernels, allocation, tile operations, loops, reductions,
expressions and dtypes. See ``shared/reference/tilelang-api.md`` for the surface it follows.
"""
from tegula.ir.dtype import (bfloat16, bool_ as bool, float8_e4m3, float8_e5m2, float16,  # noqa: A004
                             float32, float64, int8, int16, int32, int64, uint8, uint16, uint32,
                             uint64)
from tegula.language.prim_func import Macro, macro, prim_func
from tegula.language.primitives import (And, Cast, GemmWarpPolicy, Kernel, Not, Or, Parallel,
                                        Pipelined, Select, Serial, abs, alloc_fragment,
                                        alloc_local, alloc_shared, alloc_var, annotate_layout,
                                        atomic_add, atomic_max, atomic_min, cast, ceil, ceildiv,
                                        clamp, clear, copy, cos, cumsum, erf, exp, exp2, exp10,
                                        expm1, fill, floor, floordiv, floormod, fmod, gemm, grid,
                                        if_then_else, infinity, isinf, isnan, log, log1p, log2,
                                        log10, max, max_value, min, min_value, ninf, pow, print,
                                        reduce_absmax, reduce_abssum, reduce_max, reduce_min,
                                        reduce_sum, round, rsqrt, serial, sigmoid, sin, sqrt,
                                        sync_threads, tan, tanh, trunc, truncdiv, truncmod, unroll,
                                        use_swizzle, vectorized)
from tegula.language.ascend import (Scope, alloc_L0A, alloc_L0B, alloc_L0C, alloc_L1, alloc_ub,
                                    barrier_all, gemm_v0, mma, pipe_barrier, set_cross_flag,
                                    set_flag, tile, wait_cross_flag, wait_flag)
from tegula.language.proxy import Tensor, const, dynamic, empty, symbolic

Buffer = Tensor
float = float32  # noqa: A001
half = float16
double = float64
int = int32  # noqa: A001
float8_e4m3fn = float8_e4m3
