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

    # mma reads registers ldmatrix may not have filled (B decoded by hand): their size too
    with pytest.raises(tegula.errors.KernelTypeError) as info:
        @T.prim_func
        def small_b(A: T.Tensor((64, 32), "float16")):
            with T.Kernel(1, threads=128):
                A_l = T.alloc_local((em.warp_rows * em.local_size_a,), "float16")
                B_l = T.alloc_local((em.local_size_b,), "float16")
                C_l = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out,), "float32")
                em.mma(A_l, B_l, C_l)
    msg = str(info.value)
    assert f"'B_l' holds {em.local_size_b} elements per thread, the emitter needs " \
           f"{em.warp_cols * em.local_size_b}" in msg
    assert "em.mma(A_l, B_l, C_l)" in msg


# -- 8-bit operands in either storage order, reduce_k, barriers ----------------------------------

def int8_emitter_gemm(M, N, K, a_t, b_t, reduce_k=1, dtype="int8"):
    """C = A @ B with A stored [K, M] when ``a_t`` and B stored [N, K] when ``b_t``; with
    ``reduce_k`` groups of warps each taking a part of every k-tile, summed at the end."""
    BK = 64
    em = TensorCoreIntrinEmitter(a_dtype=dtype, b_dtype=dtype, accum_dtype="int32", a_transposed=a_t,
                                 b_transposed=b_t, block_row_warps=2, block_col_warps=2,
                                 warp_row_tiles=32, warp_col_tiles=32, chunk=BK // reduce_k,
                                 reduce_k=reduce_k)
    BM = BN = 64
    a_shape, as_shape = ((K, M), (BK, BM)) if a_t else ((M, K), (BM, BK))
    b_shape, bs_shape = ((N, K), (BN, BK)) if b_t else ((K, N), (BK, BN))
    threads = (128, reduce_k) if reduce_k > 1 else 128

    @T.prim_func
    def mm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), "int32")):
        with T.Kernel(N // BN, M // BM, threads=threads) as (bx, by):
            A_s = T.alloc_shared(as_shape, dtype)
            B_s = T.alloc_shared(bs_shape, dtype)
            A_l = T.alloc_local((em.warp_rows * em.local_size_a), dtype)
            B_l = T.alloc_local((em.warp_cols * em.local_size_b), dtype)
            C_l = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out), "int32")
            red = T.alloc_local((1,), "int32")
            rk = T.get_thread_binding(1)
            T.clear(C_l)
            for ko in T.serial(K // BK):
                if a_t:
                    for k, i in T.Parallel(BK, BM):
                        A_s[k, i] = A[ko * BK + k, by * BM + i]
                else:
                    for i, k in T.Parallel(BM, BK):
                        A_s[i, k] = A[by * BM + i, ko * BK + k]
                if b_t:
                    for j, k in T.Parallel(BN, BK):
                        B_s[j, k] = B[bx * BN + j, ko * BK + k]
                else:
                    for k, j in T.Parallel(BK, BN):
                        B_s[k, j] = B[ko * BK + k, bx * BN + j]
                for ki in T.serial(em.chunk // em.micro_size_k):
                    em.ldmatrix_a(A_l, A_s, ki, rk=rk)
                    em.ldmatrix_b(B_l, B_s, ki, rk=rk)
                    em.mma(A_l, B_l, C_l)
            if reduce_k > 1:
                for n in T.serial(em.warp_rows * em.warp_cols * em.local_size_out):
                    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.int32(0)]), "reduce_scope",
                                T.reinterpret(T.uint64(0), dtype="handle")):
                        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), C_l[n], True, red[0], rk,
                                                          dtype="handle"))
                    C_l[n] = red[0]
                if rk == 0:
                    em.stmatrix(C_l, C, pid_m=by, pid_n=bx)
            else:
                em.stmatrix(C_l, C, pid_m=by, pid_n=bx)

    return mm


INT8_CASES = [(True, True, 1), (False, False, 1), (True, False, 1), (False, True, 2), (True, False, 2)]


@pytest.mark.parametrize("a_t, b_t, reduce_k", INT8_CASES)
def test_int8_operands_in_every_storage_order_and_reduce_k(a_t, b_t, reduce_k, rng):
    M, N, K = 64, 128, 128
    f = int8_emitter_gemm(M, N, K, a_t, b_t, reduce_k)
    if available_backends():
        for arch in ARCHS:
            src = tegula.compile(f, target=f"cuda:{arch}").get_kernel_source()
            assert "tl::mma_m16n8k32_s8_s32" in src
            assert ("tl::ldmatrix" in src) == (not a_t or b_t)  # element loads for the transposes
    a = rng.integers(-128, 128, (K, M) if a_t else (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (N, K) if b_t else (K, N)).astype(np.int8)
    aa = a.astype(np.int64).T if a_t else a.astype(np.int64)
    bb = b.astype(np.int64).T if b_t else b.astype(np.int64)
    for target in ("cpu", "cuda-emu"):
        c = np.full((M, N), -7, np.int32)
        tegula.compile(f, target=target)(a, b, c)
        np.testing.assert_array_equal(c, aa @ bb)


@pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
def test_no_barrier_inside_the_k_step_loop():
    """The k-steps only read shared memory: the barrier after the tile's stores goes before the
    k-step loop, not into each of its iterations."""
    for f in (emitter_gemm(64, 128, 128, "float16", "float32"), int8_emitter_gemm(64, 128, 128, False, True)):
        lines = tegula.compile(f, target="cuda:sm_80").get_kernel_source().splitlines()
        start = next(i for i, ln in enumerate(lines) if "for (int ki" in ln)
        indent = len(lines[start]) - len(lines[start].lstrip())
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(" " * indent + "}"))
        assert not any("__syncthreads" in ln for ln in lines[start:end])
        assert "__syncthreads" in "".join(lines[start - 2:start])  # (a source-line comment between)


def test_thread_binding_orders_warps_as_tilelang():
    em = TensorCoreIntrinEmitter(accum_dtype="float32", block_row_warps=2, block_col_warps=4,
                                 warp_row_tiles=16, warp_col_tiles=16, chunk=16)
    t = T.int32(32 * 5 + 3)  # warp 5, lane 3
    lane, wn, wm = (int(x.value) for x in em.extract_thread_binding(t))
    assert (lane, wn, wm) == (3, 2, 1)  # warps step along M first (TileLang's default)
    lane, wn, wm = (int(x.value) for x in em.extract_thread_binding(t, is_m_first=True))
    assert (lane, wn, wm) == (3, 1, 1)


def test_packed_operands_are_a_located_error():
    with pytest.raises(tegula.errors.UnsupportedError) as e:
        TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                num_elems_per_byte=2)
    msg = str(e.value)
    assert "num_elems_per_byte=2" in msg and "test_mma_emitter.py" in msg
