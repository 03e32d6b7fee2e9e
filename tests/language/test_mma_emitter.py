"""TensorCoreIntrinEmitter (``tilelang.cuda.intrinsics``): hand-written warp-level mma kernels on
the interpreter and cuda-emu (per-thread fragment semantics of ldmatrix / mma.sync), compiled for
sm_80 and sm_90a, against a float64 reference."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.target import gpu_available
from tegula.cuda.intrinsics import get_swizzle_layout
from tegula.cuda.intrinsics.layout.utils import get_mma_micro_size
from tegula.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter

ARCHS = ("sm_80", "sm_90a")


def emitter_gemm(M, N, K, dtype, accum, b_transposed=True, swizzle=True, c_tiles=False):
    em = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype=accum,
                                 a_transposed=False, b_transposed=b_transposed,
                                 block_row_warps=2, block_col_warps=2, warp_row_tiles=32,
                                 warp_col_tiles=32, chunk=32 if dtype != "int8" else 64)
    BM, BN, BK = 64, 64, em.chunk
    b_shape = (N, K) if b_transposed else (K, N)
    bs_shape = (BN, BK) if b_transposed else (BK, BN)

    @T.prim_func
    def mm(A: T.Tensor((M, K), dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(N // BN, M // BM, threads=128) as (bx, by):
            A_s = T.alloc_shared((BM, BK), dtype, scope="shared.dyn")
            B_s = T.alloc_shared(bs_shape, dtype)
            C_s = T.alloc_shared((BM // 16, BN // 16, 16, 16), accum)
            A_l = T.alloc_local((em.warp_rows * em.local_size_a), dtype)
            B_l = T.alloc_local((em.warp_cols * em.local_size_b), dtype)
            C_l = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out), accum)
            if swizzle:
                T.annotate_layout({A_s: T.Layout((BM, BK), lambda i, j: list(get_swizzle_layout(i, j, BK, dtype)))})
            T.clear(C_l)
            for ko in T.Pipelined(K // BK, num_stages=2):
                for i, k in T.Parallel(BM, BK):
                    A_s[i, k] = A[by * BM + i, ko * BK + k]
                if b_transposed:
                    for j, k in T.Parallel(BN, BK):
                        B_s[j, k] = B[bx * BN + j, ko * BK + k]
                else:
                    for k, j in T.Parallel(BK, BN):
                        B_s[k, j] = B[ko * BK + k, bx * BN + j]
                for ki in T.serial(BK // em.micro_size_k):
                    em.ldmatrix_a(A_l, A_s, ki)
                    em.ldmatrix_b(B_l, B_s, ki)
                    em.mma(A_l, B_l, C_l)
            if c_tiles:
                em.stmatrix(C_l, C_s)
                for i, j in T.Parallel(BM, BN):
                    C[by * BM + i, bx * BN + j] = C_s[i // 16, j // 16, i % 16, j % 16]
            else:
                em.stmatrix(C_l, C, pid_m=by, pid_n=bx)

    return mm


def _inputs(rng, dtype, M, N, K, b_transposed):
    bshape = (N, K) if b_transposed else (K, N)
    if dtype == "int8":
        return (rng.integers(-128, 128, (M, K)).astype(np.int8),
                rng.integers(-128, 128, bshape).astype(np.int8))
    np_t = np.float16 if dtype == "float16" else __import__("ml_dtypes").bfloat16
    return (rng.standard_normal((M, K)).astype(np_t), rng.standard_normal(bshape).astype(np_t))


CASES = [("float16", "float32", True, True, False), ("float16", "float32", False, True, True),
         ("bfloat16", "float32", True, False, True), ("int8", "int32", True, True, False)]


@pytest.mark.parametrize("target", ["cpu", "cuda-emu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype, accum, b_t, swizzle, c_tiles", CASES)
def test_emitter_gemm_matches_float64(target, dtype, accum, b_t, swizzle, c_tiles, rng):
    M, N, K = 64, 128, 128
    f = emitter_gemm(M, N, K, dtype, accum, b_t, swizzle, c_tiles)
    if target == "cpu" and available_backends():
        for arch in ARCHS:
            src = tegula.compile(f, target=f"cuda:{arch}").get_kernel_source()
            assert "tl::ldmatrix<4" in src and "tl::mma_m16n8k" in src
    a, b = _inputs(rng, dtype, M, N, K, b_t)
    c = np.full((M, N), -7, np.float32 if accum == "float32" else np.int32)  # poisoned
    if target == "cuda":
        if not gpu_available():
            pytest.skip("no CUDA GPU")
        import torch

        dev = [torch.from_numpy(x.view(np.int16) if x.dtype.itemsize == 2 and dtype == "bfloat16" else x).cuda()
               for x in (a, b, c)]
        if dtype == "bfloat16":
            dev[:2] = [x.view(torch.bfloat16) for x in dev[:2]]
        tegula.compile(f, target="cuda")(*dev)
        c = dev[2].cpu().numpy()
    else:
        tegula.compile(f, target=target)(a, b, c)
    bb = b.astype(np.float64)
    ref = a.astype(np.float64) @ (bb.T if b_t else bb)
    if dtype == "int8":
        np.testing.assert_array_equal(c, ref.astype(np.int64))
    else:
        np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-3)


def test_cpu_and_emulator_agree_bit_for_bit(rng):
    f = emitter_gemm(64, 64, 64, "float16", "float32")
    a, b = _inputs(rng, "float16", 64, 64, 64, True)
    outs = []
    for target in ("cpu", "cuda-emu"):
        c = np.zeros((64, 64), np.float32)
        tegula.compile(f, target=target)(a, b, c)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
def test_generated_code_indexes_shared_memory_through_the_users_layout():
    swz = tegula.compile(emitter_gemm(64, 64, 64, "float16", "float32", swizzle=True),
                         target="cuda:sm_80").get_kernel_source()
    plain = tegula.compile(emitter_gemm(64, 64, 64, "float16", "float32", swizzle=False),
                           target="cuda:sm_80").get_kernel_source()
    ld_a = [ln for ln in swz.splitlines() if "tl::ldmatrix" in ln and "&A_l[" in ln]
    assert ld_a and all("^" in ln for ln in ld_a)  # the XOR of the user's swizzle
    assert not any("^" in ln for ln in plain.splitlines() if "tl::ldmatrix" in ln)


def test_micro_sizes_and_swizzle_function():
    assert get_mma_micro_size("float16") == (16, 16, 16)
    assert get_mma_micro_size(T.int8) == (16, 16, 32)
    # a 64-byte row of float16 is 4 chunks of 8 elements; rows 2-3 swap chunk pairs
    assert [get_swizzle_layout(r, 0, 32, "float16") for r in range(4)] == [(0, 0), (1, 0), (2, 8), (3, 8)]
    # inside a chunk the order stays
    assert get_swizzle_layout(2, 3, 32, "float16") == (2, 11)
    # every row is a permutation of whole chunks
    for r in range(16):
        cols = sorted(get_swizzle_layout(r, c, 64, "float16")[1] for c in range(64))
        assert cols == list(range(64))


def test_emitter_errors_name_the_problem():
    with pytest.raises(tegula.errors.UnsupportedError, match="float16 x float16 into float16"):
        TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float16")
    with pytest.raises(tegula.errors.KernelTypeError, match="warp_row_tiles must be a positive multiple of 16"):
        TensorCoreIntrinEmitter(accum_dtype="float32", warp_row_tiles=24)
    em = TensorCoreIntrinEmitter(accum_dtype="float32", warp_row_tiles=32, warp_col_tiles=32, chunk=32)

    with pytest.raises(tegula.errors.KernelTypeError) as info:
        @T.prim_func
        def small(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_s = T.alloc_shared((64, 32), "float16")
                A_l = T.alloc_local((4,), "float16")
                em.ldmatrix_a(A_l, A_s, 0)
    msg = str(info.value)
    assert "'A_l' holds 4 elements per thread, the emitter needs 16" in msg
    assert "em.ldmatrix_a(A_l, A_s, 0)" in msg and "test_mma_emitter.py" in msg
