"""Kernels written as TileLang users write them, run on the interpreter against float64 references."""
import numpy as np
import pytest

import tegula as tilelang
import tegula.language as T
from tegula.target import gpu_available


@pytest.fixture(params=["cpu", "cuda-emu:sm_90a", pytest.param("cuda", marks=pytest.mark.gpu)])
def target(request):
    """On the interpreter, on the emulated Hopper lowering (TMA, wgmma, mbarriers checked on the
    CPU) and, where a GPU is present, on CUDA."""
    if request.param == "cuda" and not gpu_available():
        pytest.skip("no CUDA GPU")
    return request.param


def gemm_kernel(M, N, K, bm, bn, bk, dtype="float16", accum="float32", ta=False, tb=False):
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    a_tile = (bk, bm) if ta else (bm, bk)
    b_tile = (bn, bk) if tb else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared(a_tile, dtype)
            B_s = T.alloc_shared(b_tile, dtype)
            C_l = T.alloc_fragment((bm, bn), accum)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                if ta:
                    T.copy(A[k * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk], A_s)
                if tb:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=ta, transpose_B=tb)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_transposes_ragged(target, rng, ta, tb):
    M, N, K = 70, 45, 50
    k = tilelang.compile(gemm_kernel(M, N, K, 32, 32, 16, ta=ta, tb=tb), out_idx=[-1], target=target)
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float16)
    b = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float16)
    c = k(a, b)
    A64 = a.astype(np.float64).T if ta else a.astype(np.float64)
    B64 = b.astype(np.float64).T if tb else b.astype(np.float64)
    np.testing.assert_allclose(c, A64 @ B64, rtol=1e-3, atol=1e-3)


def test_gemm_int8_int32(target, rng):
    M = N = 64
    K = 96
    k = tilelang.compile(gemm_kernel(M, N, K, 32, 32, 32, dtype="int8", accum="int32", tb=True),
                         out_idx=[-1], target=target)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    c = k(a, b)
    assert c.dtype == np.int32
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64).T)


def test_lazy_jit_factory_and_torch(rng):
    torch = pytest.importorskip("torch")

    @tilelang.jit(out_idx=[-1], target="cpu")
    def matmul(M, N, K, block_M=32, block_N=32, block_K=16):
        return gemm_kernel(M, N, K, block_M, block_N, block_K)

    k = matmul(64, 64, 64)
    assert matmul(64, 64, 64) is k  # cached
    a = torch.from_numpy(rng.standard_normal((64, 64)).astype(np.float16))
    b = torch.from_numpy(rng.standard_normal((64, 64)).astype(np.float16))
    c = k(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float32
    ref = a.double() @ b.double()
    assert torch.allclose(c.double(), ref, rtol=1e-3, atol=1e-3)


@tilelang.jit(target="cpu")
def eager_matmul(A, B, block_M, block_N, block_K=16, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), accum_dtype)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(C_local)
        for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, ko * block_K], A_shared)
            T.copy(B[ko * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def test_eager_call_and_compile(rng):
    a = rng.standard_normal((48, 40)).astype(np.float16)
    b = rng.standard_normal((40, 24)).astype(np.float16)
    c = eager_matmul(a, b, 32, 16)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)
    # same shapes and constants: the compiled kernel is reused
    n = sum(len(v) for v in eager_matmul._cache.values())
    eager_matmul(rng.standard_normal((48, 40)).astype(np.float16), b, 32, 16)
    assert sum(len(v) for v in eager_matmul._cache.values()) == n
    k = eager_matmul.compile(M=48, N=24, K=40, block_M=32, block_N=16)
    c2 = k(a, b)
    np.testing.assert_array_equal(c, c2)
    assert 'T.Tensor((48, 40), "float16")' in k.get_kernel_source()


def test_dynamic_rows_softmax_one_kernel(target, rng):
    m = T.dynamic("m")
    N, BM = 64, 8

    @T.prim_func
    def softmax(X: T.Tensor((m, N), "float32"), Y: T.Tensor((m, N), "float32")):
        with T.Kernel(T.ceildiv(m, BM), threads=128) as bx:
            x = T.alloc_fragment((BM, N), "float32")
            mx = T.alloc_fragment((BM,), "float32")
            s = T.alloc_fragment((BM,), "float32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(BM, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(BM, N):
                x[i, j] = x[i, j] / s[i]
            T.copy(x, Y[bx * BM, 0])

    k = tilelang.compile(softmax, out_idx=[1], target=target)
    for rows in (5, 37):
        x = rng.standard_normal((rows, N)).astype(np.float32)
        y = k(x)
        x64 = x.astype(np.float64)
        ref = np.exp(x64 - x64.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_splitk_atomic_tile(target, rng):
    M, N, K, bm, bn, bk, S = 32, 32, 128, 16, 16, 16, 4

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), S, threads=128) as (bx, by, bz):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for ko in T.serial(K // bk // S):
                kk = bz * (K // S) + ko * bk
                T.copy(A[by * bm, kk], A_s)
                T.copy(B[kk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.atomic_add(C[by * bm, bx * bn], C_l)

    k = tilelang.compile(main, target=target)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    assert k(a, b, c) is None
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_macro_var_while_and_element_atomic(target, rng):
    N = 100

    @T.macro
    def scaled(x, s):
        return x * s

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), total: T.Tensor((1,), "float32"), cnt: T.Tensor((1,), "int32")):
        with T.Kernel(4, threads=32) as bx:
            i = T.alloc_var("int32", init=0)
            acc = T.alloc_var("float32", init=0.0)
            while i < 25:
                acc = acc + scaled(X[bx * 25 + i], 2.0)
                i += 1
            T.atomic_add(total[0], acc)
            if acc > 0:
                T.atomic_add(cnt[0], 1)

    k = tilelang.compile(main, target=target)
    x = rng.standard_normal(N).astype(np.float32)
    total = np.zeros(1, np.float32)
    cnt = np.zeros(1, np.int32)
    k(x, total, cnt)
    sums = 2 * x.astype(np.float64).reshape(4, 25).sum(1)
    # float32 accumulation of 25 terms, then 4 atomics: error bound about 30 * eps * sum |term|
    bound = 30 * np.finfo(np.float32).eps * np.abs(2 * x.astype(np.float64)).sum()
    np.testing.assert_allclose(total[0], sums.sum(), rtol=0, atol=bound)
    # `T.atomic_add(cnt[0], 1)` outside T.Parallel: every one of the 32 threads adds 1 (TileLang's
    # rule; the kernel is built with a SemanticsWarning saying so)
    assert cnt[0] == 32 * (sums > 0).sum()


def test_quantize_absmax_rows(target, rng):
    M, N, BM = 24, 64, 8

    @T.prim_func
    def quant(X: T.Tensor((M, N), "float32"), Q: T.Tensor((M, N), "int8"), S: T.Tensor((M,), "float32")):
        with T.Kernel(M // BM) as bx:
            x = T.alloc_fragment((BM, N), "float32")
            amax = T.alloc_fragment((BM,), "float32")
            T.copy(X[bx * BM, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i in T.Parallel(BM):
                amax[i] = T.max(amax[i], 1e-6) / 127.0
            for i, j in T.Parallel(BM, N):
                Q[bx * BM + i, j] = T.Cast("int8", T.round(x[i, j] / amax[i]))
            T.copy(amax, S[bx * BM])

    k = tilelang.compile(quant, out_idx=[1, 2], target=target)
    x = rng.standard_normal((M, N)).astype(np.float32)
    q, s = k(x)
    x64 = x.astype(np.float64)
    s_ref = np.abs(x64).max(1) / 127.0
    np.testing.assert_allclose(s, s_ref, rtol=1e-6)
    ratio = x64 / s_ref[:, None]
    q_ref = np.round(ratio).astype(np.int8)
    # float32 division may land on the other side of a .5 boundary: there the kernel may be one off
    near_half = np.abs(np.abs(ratio - np.floor(ratio)) - 0.5) < 1e-4
    diff = np.abs(q.astype(np.int32) - q_ref)
    assert diff.max() <= 1
    np.testing.assert_array_equal(q[~near_half], q_ref[~near_half])


def test_cumsum_unary_math_and_casts(target, rng):
    N = 16

    @T.prim_func
    def main(X: T.Tensor((4, N), "float32"), Y: T.Tensor((4, N), "float32"), Z: T.Tensor((4, N), "bfloat16")):
        with T.Kernel(1) as _:
            x = T.alloc_shared((4, N), "float32")
            c = T.alloc_fragment((4, N), "float32")
            T.copy(X, x)
            T.cumsum(x, c, dim=1, reverse=True)
            T.copy(c, Y)
            for i, j in T.Parallel(4, N):
                Z[i, j] = (T.sigmoid(x[i, j]) + T.tanh(x[i, j]) * T.abs(x[i, j])
                           + T.if_then_else(x[i, j] > 0, T.sqrt(T.abs(x[i, j])), T.floor(x[i, j]))).astype("bfloat16")

    k = tilelang.compile(main, out_idx=[1, 2], target=target)
    x = rng.standard_normal((4, N)).astype(np.float32)
    y, z = k(x)
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, np.cumsum(x64[:, ::-1], 1)[:, ::-1], rtol=1e-5, atol=1e-5)
    ref = 1 / (1 + np.exp(-x64)) + np.tanh(x64) * np.abs(x64) + np.where(x64 > 0, np.sqrt(np.abs(x64)), np.floor(x64))
    np.testing.assert_allclose(z.astype(np.float64), ref, rtol=1e-2, atol=1e-2)


def _cvt_rzi(x: np.ndarray, dtype: type) -> np.ndarray:
    """PTX cvt.rzi: truncate toward zero, saturate to the range, NaN -> 0 (exact, in Python ints)."""
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    out = [0 if np.isnan(v) else hi if v == np.inf else lo if v == -np.inf else max(lo, min(hi, int(v)))
           for v in x.astype(np.float64)]
    return np.array(out, dtype=dtype)


def test_integer_wrap_and_float_to_int_saturation(target, rng):
    N = 256
    outs = {"I8": "int8", "U8": "uint8", "I16": "int16", "I32": "int32", "U32": "uint32", "I64": "int64",
            "H8": "int8", "C8": "int8"}

    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), H: T.Tensor((N,), "float16"), A: T.Tensor((N,), "int32"),
             L: T.Tensor((N,), "int64"), I8: T.Tensor((N,), "int8"), U8: T.Tensor((N,), "uint8"),
             I16: T.Tensor((N,), "int16"), I32: T.Tensor((N,), "int32"), U32: T.Tensor((N,), "uint32"),
             I64: T.Tensor((N,), "int64"), H8: T.Tensor((N,), "int8"), C8: T.Tensor((N,), "int8"),
             W: T.Tensor((N,), "int32"), Q: T.Tensor((N,), "int64"), WL: T.Tensor((N,), "int64"),
             WS: T.Tensor((N,), "int32"), WN: T.Tensor((N,), "int32"), W16: T.Tensor((N,), "int16")):
        with T.Kernel(1, threads=128) as _:
            xs = T.alloc_shared((N,), "float32")
            T.copy(X, xs)
            T.copy(xs, C8)
            for i in T.Parallel(N):
                I8[i] = T.Cast("int8", X[i])
                U8[i] = T.Cast("uint8", X[i])
                I16[i] = T.Cast("int16", X[i])
                I32[i] = T.Cast("int32", X[i])
                U32[i] = T.Cast("uint32", X[i])
                I64[i] = T.Cast("int64", X[i])
                H8[i] = T.Cast("int8", H[i])
                W[i] = A[i] * 65536 + (T.int32(2**31 - 1) + 1)  # wraps, as the constant folds
                Q[i] = T.truncdiv(L[i], 3) + T.truncmod(L[i], 7)
                WL[i] = L[i] * L[i] - L[i] * 977
                WS[i] = (A[i] << 13) - A[i]
                WN[i] = -A[i] * 3
                W16[i] = T.Cast("int16", A[i]) << 7

    k = tilelang.compile(main, target=target)
    special = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 1e19, -1e19, 1e20, 255.9, -0.9, -1.5,
                        127.5, -128.9, 2.0**31, 2.0**63, -(2.0**63)])
    x = rng.standard_normal(N) * 1e3
    x[rng.choice(N, special.size, replace=False)] = special
    x = x.astype(np.float32)
    h = (rng.standard_normal(N) * 300).astype(np.float16)
    h[rng.choice(N, 3, replace=False)] = [np.nan, np.inf, -np.inf]
    a = rng.integers(-(2**31), 2**31, N, dtype=np.int64).astype(np.int32)
    a[rng.choice(N, 2, replace=False)] = [-(2**31), 2**31 - 1]
    big = rng.integers(-(2**62), 2**62, N, dtype=np.int64)
    bufs = {name: np.empty(N, dtype=d) for name, d in outs.items()}
    wraps = {"W": np.int32, "Q": np.int64, "WL": np.int64, "WS": np.int32, "WN": np.int32, "W16": np.int16}
    w = {name: np.empty(N, d) for name, d in wraps.items()}
    k(x, h, a, big, *bufs.values(), *w.values())
    for name, d in outs.items():
        src = h if name == "H8" else x
        np.testing.assert_array_equal(bufs[name], _cvt_rzi(src, np.dtype(d).type), err_msg=name)

    def wrap(v: int, bits: int) -> int:  # two's complement, exact on Python ints
        return (v + 2 ** (bits - 1)) % 2**bits - 2 ** (bits - 1)

    ai, li = a.tolist(), big.tolist()
    ref = {"W": [wrap(v * 65536 - 2**31, 32) for v in ai],
           "Q": [int(abs(v) // 3) * (1 if v >= 0 else -1) + int(np.sign(v)) * (abs(int(v)) % 7) for v in li],
           "WL": [wrap(v * v - v * 977, 64) for v in li],
           "WS": [wrap((v << 13) - v, 32) for v in ai],
           "WN": [wrap(wrap(-v, 32) * 3, 32) for v in ai],
           "W16": [wrap(wrap(v, 16) << 7, 16) for v in ai]}
    for name, d in wraps.items():
        np.testing.assert_array_equal(w[name], np.array(ref[name], dtype=d), err_msg=name)


def test_lazy_factory_cache_normalizes_arguments_and_get_tir_does_not_compile(monkeypatch):
    calls = []

    @tilelang.jit(out_idx=[-1], target="cpu")
    def matmul(M, N, K, block_M=32, block_N=32, block_K=16):
        calls.append((M, N, K))
        return gemm_kernel(M, N, K, block_M, block_N, block_K)

    assert matmul(32, 32, 16) is matmul(M=32, N=32, K=16, block_M=32)
    assert len(calls) == 1
    import tegula.runtime.kernel as rk

    def boom(*a, **k):
        raise AssertionError("get_tir must not build a kernel")

    monkeypatch.setattr(rk.JITKernel, "__init__", boom)
    prim = matmul.get_tir(64, 64, 32)
    assert prim.params[0].shape == (64, 32)
