"""Language features beyond the developer level that TileLang programs use, on every target.

Each kernel test runs on the interpreter (``cpu``), on the emulator of the CUDA output
(``cuda-emu``) and, marked ``gpu``, on a GPU; ``built()`` also compiles the kernel for sm_80 and
sm_90a where a CUDA compiler is present. Inputs are fresh random numbers; references are float64.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.target import gpu_available
from tegula.errors import ArgumentError, KernelTypeError

ARCHS = ("sm_80", "sm_90a")


@pytest.fixture(params=["cpu", "cuda-emu", "cuda-emu:sm_90a", pytest.param("cuda", marks=pytest.mark.gpu)])
def target(request):
    if request.param == "cuda" and not gpu_available():
        pytest.skip("no CUDA GPU")
    return request.param


def built(func, target, out_idx=None, **kw):
    """``func`` compiled for ``target``; on the CPU targets also compiled for both CUDA archs."""
    if target != "cuda" and available_backends():
        for arch in ARCHS:
            k = tegula.compile(func, out_idx=out_idx, target=f"cuda:{arch}", **kw)
            assert "__global__" in k.get_kernel_source() and k.artifact.cubin
    return tegula.compile(func, out_idx=out_idx, target=target, **kw)


def to_device(target, *arrays):
    if target != "cuda":
        return arrays
    import torch

    def one(a):
        if a.dtype == ml_dtypes.bfloat16:  # torch.from_numpy has no bfloat16
            return torch.from_numpy(a.view(np.uint16)).view(torch.bfloat16).cuda()
        return torch.from_numpy(a).cuda()

    return tuple(one(a) for a in arrays)


def to_host(x):
    if not hasattr(x, "cpu"):
        return np.asarray(x)
    import torch

    if x.dtype == torch.bfloat16:
        return x.cpu().view(torch.uint16).numpy().view(ml_dtypes.bfloat16)
    return x.cpu().numpy()


# -- dtypes as values ----------------------------------------------------------------------------

def test_dtype_objects_are_strings():
    torch = pytest.importorskip("torch")
    assert getattr(torch, T.bfloat16) is torch.bfloat16
    assert T.float16 == "float16" and isinstance(T.float16, str) and isinstance(T.float16, T.dtype)
    assert {"float16": 1}[T.float16] == 1
    assert T.dtype("float16") is T.float16
    assert T.dtype(torch.float32) is T.float32
    assert T.dtype(np.int8) is T.int8
    assert T.dtype(T.bfloat16) is T.bfloat16
    assert T.float16.as_torch() is torch.float16 and T.float8_e4m3fn.as_torch() is torch.float8_e4m3fn
    assert f"{T.float32}" == "float32" and str(T.int8) == "int8"


def test_dtype_constructor_rejects_unknown_names():
    with pytest.raises(ValueError, match="unknown dtype 'float17'"):
        T.dtype("float17")


def scale_kernel(N, dtype: T.dtype = T.float16):
    dtype = T.dtype(dtype)

    @T.prim_func
    def scale(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * T.cast(2, dtype) + dtype(1)

    return scale


@pytest.mark.parametrize("dtype", [T.float16, "float32", "bfloat16"])
def test_dtype_parameter_annotated_and_converted(target, rng, dtype):
    k = built(scale_kernel(256, dtype), target, out_idx=[-1])
    a = rng.standard_normal(256).astype(T.dtype(dtype).np)
    (da,) = to_device(target, a)
    b = to_host(k(da))
    np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64) * 2 + 1, rtol=1e-2, atol=1e-2)


# -- eager T.const ---------------------------------------------------------------------------------

@tegula.jit(target="cpu")
def splitk_rows(A, split_k, block=16):
    M, K = T.const("M, K")
    chunk = K // split_k            # host arithmetic on the symbols before their annotation
    A: T.Tensor((M, K), T.float32)
    S = T.empty((M, split_k), T.float32)
    with T.Kernel(T.ceildiv(M, block), split_k, threads=128) as (bx, by):
        acc = T.alloc_fragment((block,), T.float32)
        tile = T.alloc_fragment((block, chunk), T.float32)
        T.copy(A[bx * block, by * chunk], tile)
        T.reduce_sum(tile, acc, dim=1)
        for i in T.Parallel(block):
            S[bx * block + i, by] = acc[i]
    return S


@tegula.jit(target="cpu")
def conv1d_rows(data, kernel, S=1):
    N, L, K = T.const("N, L, K")
    KW = K                          # the annotation names an alias of the symbol
    OL = (L - K) // S + 1           # arithmetic before any annotation
    data: T.Tensor((N, L), T.float32)
    kernel: T.Tensor((KW,), T.float32)
    out = T.empty((N, OL), T.float32)
    with T.Kernel(N, threads=128) as b:
        for o in T.Parallel(OL):
            acc = T.alloc_var(T.float32, init=0.0)
            for k in T.serial(KW):
                acc = acc + data[b, o * S + k] * kernel[k]
            out[b, o] = acc
    return out


def scaled_rows(A, scales, group=16, target="cpu"):
    @tegula.jit(target=target)
    def k(A, scales):
        M, K = T.const("M, K")
        A_shape = (M, K)                            # the annotation names a tuple of the symbols
        S_shape = (M, T.ceildiv(K, group))          # arithmetic on K before any annotation
        A: T.Tensor(A_shape, T.float32)
        scales: T.Tensor(S_shape, T.float32)
        out = T.empty(A_shape, T.float32)
        with T.Kernel(T.ceildiv(M, 16), threads=128) as bx:
            for i, j in T.Parallel(16, K):
                out[bx * 16 + i, j] = A[bx * 16 + i, j] * scales[bx * 16 + i, j // group]
        return out
    return k(A, scales)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_eager_const_through_a_shape_tuple(rng, target):
    a = rng.standard_normal((32, 48)).astype(np.float32)
    s = rng.standard_normal((32, 3)).astype(np.float32)
    out = scaled_rows(a, s, target=target)
    np.testing.assert_allclose(out, a.astype(np.float64) * np.repeat(s.astype(np.float64), 16, axis=1),
                               rtol=1e-6, atol=1e-6)


def test_eager_const_through_an_alias(rng):
    x = rng.standard_normal((3, 40)).astype(np.float32)
    w = rng.standard_normal(5).astype(np.float32)
    out = conv1d_rows(x, w, 2)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = np.stack([[x64[n, o * 2:o * 2 + 5] @ w64 for o in range((40 - 5) // 2 + 1)] for n in range(3)])
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_eager_const_used_before_its_annotation(rng):
    a = rng.standard_normal((40, 96)).astype(np.float32)
    s = splitk_rows(a, 3)
    np.testing.assert_allclose(s, a.astype(np.float64).reshape(40, 3, 32).sum(-1), rtol=1e-5, atol=1e-5)
    a2 = rng.standard_normal((32, 64)).astype(np.float32)  # other shapes: another specialization
    np.testing.assert_allclose(splitk_rows(a2, 2), a2.astype(np.float64).reshape(32, 2, 32).sum(-1),
                               rtol=1e-5, atol=1e-5)


# -- T.alloc_var inside T.Parallel is one variable per lane ------------------------------------

def lane_var_kernel(N):
    @T.prim_func
    def lane_var(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                acc = T.alloc_var(T.float32, init=A[bx * 128 + i])
                n = T.alloc_var(T.int32)
                n = 0
                if acc > 0:
                    acc = acc * 2
                    n = n + 1
                for r in T.serial(3):
                    if A[bx * 128 + i] < r - 1:
                        n = n + 2
                B[bx * 128 + i] = acc + T.cast(n, T.float32)

    return lane_var


def test_alloc_var_in_parallel_is_per_lane(target, rng):
    N = 256
    k = built(lane_var_kernel(N), target, out_idx=[-1])
    a = rng.standard_normal(N).astype(np.float32)
    (da,) = to_device(target, a)
    b = to_host(k(da))
    a64 = a.astype(np.float64)
    n = (a64 > 0) + 2 * sum((a64 < r - 1) for r in range(3))
    np.testing.assert_allclose(b, np.where(a64 > 0, 2 * a64, a64) + n, rtol=1e-6, atol=1e-6)


# -- several T.dynamic symbols ---------------------------------------------------------------

def two_dynamic_kernel(same_name: bool):
    m = T.dynamic("m")
    n = T.dynamic("m" if same_name else "n")

    @T.prim_func
    def scale2d(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32")):
        with T.Kernel(T.ceildiv(n, 32), T.ceildiv(m, 8), threads=128) as (bx, by):
            for i, j in T.Parallel(8, 32):
                if (by * 8 + i < m) & (bx * 32 + j < n):
                    B[by * 8 + i, bx * 32 + j] = A[by * 8 + i, bx * 32 + j] * 3.0

    return scale2d


@pytest.mark.parametrize("same_name", [False, True])
def test_two_dynamic_symbols(target, rng, same_name):
    k = built(two_dynamic_kernel(same_name), target, out_idx=[-1])
    for shape in ((37, 45), (9, 70)):
        a = rng.standard_normal(shape).astype(np.float32)
        (da,) = to_device(target, a)
        np.testing.assert_allclose(to_host(k(da)), a.astype(np.float64) * 3, rtol=1e-6)


def test_two_dynamic_symbols_print():
    src = two_dynamic_kernel(True).script()
    assert 'm = T.dynamic("m")' in src and 'm_1 = T.dynamic("m")' in src
    assert "T.Tensor((m, m_1)" in src


# -- 64-bit offsets for buffers that may exceed 2^31 elements -----------------------------------

BIG = 2**32 + 512


def big_copy_kernel(N=BIG):
    @T.prim_func
    def big_copy(A: T.Tensor((N,), "int8"), B: T.Tensor((N,), "int8")):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] + 1

    return big_copy


@pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
@pytest.mark.parametrize("arch", ARCHS)
def test_big_buffer_offsets_are_64_bit(arch):
    src = tegula.compile(big_copy_kernel(), target=f"cuda:{arch}").get_kernel_source()
    assert "B[(long long)bx * 256LL + (long long)tx]" in src
    small = tegula.compile(big_copy_kernel(2**20), target=f"cuda:{arch}").get_kernel_source()
    assert "long long" not in small and "B[bx * 256 + tx]" in small


@pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
def test_dynamic_buffer_offsets_are_64_bit():
    src = tegula.compile(two_dynamic_kernel(False), target="cuda:sm_80").get_kernel_source()
    assert "(long long)m" not in src.split("{")[0]  # the parameters stay int
    assert "* (long long)n + " in src


@pytest.mark.gpu
def test_big_buffer_on_gpu(rng):
    torch = pytest.importorskip("torch")
    if not gpu_available():
        pytest.skip("no CUDA GPU")
    k = tegula.compile(big_copy_kernel(), out_idx=[-1], target="cuda")
    a = torch.randint(-100, 100, (BIG,), dtype=torch.int8, device="cuda")
    b = k(a)
    torch.cuda.synchronize()
    for lo in (0, 2**31 - 3, 2**32 - 7, BIG - 300):
        np.testing.assert_array_equal(b[lo:lo + 300].cpu().numpy(), a[lo:lo + 300].cpu().numpy() + 1)


# -- thread-level code: T.get_thread_binding ----------------------------------------------------

@tegula.jit
def splitk_gemv(A, B, BLOCK_N: int, BLOCK_K: int, dtype: T.dtype = T.float16,
                accum_dtype: T.dtype = T.float):
    N, K = T.const("N, K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), dtype)
    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=(BLOCK_N, BLOCK_K)) as bn:
        tn = T.get_thread_binding(0)
        tk = T.get_thread_binding(1)
        a_l = T.alloc_local((1,), dtype)
        acc = T.alloc_local((1,), accum_dtype)
        c_s = T.alloc_shared((BLOCK_N,), accum_dtype)
        if tk == 0:
            c_s[tn] = 0
        T.clear(acc)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            a_l[0] = A[bk * BLOCK_K + tk]
            acc[0] += a_l[0].astype(accum_dtype) * B[bn * BLOCK_N + tn, bk * BLOCK_K + tk].astype(accum_dtype)
        T.atomic_add(c_s[tn], acc[0])
        C[bn * BLOCK_N + tn] = c_s[tn]
    return C


@tegula.jit
def naive_gemv(A, B, BLOCK_N: int, BLOCK_K: int, dtype: T.dtype = T.float16):
    N, K = T.const("N, K")
    A: T.Tensor((K,), dtype)
    B: T.Tensor((N, K), dtype)
    C = T.empty((N,), T.float32)
    with T.Kernel(T.ceildiv(N, BLOCK_N), threads=BLOCK_N) as bn:
        tn = T.get_thread_binding()
        a_s = T.alloc_shared((BLOCK_K,), dtype)
        acc = T.alloc_local((1,), T.float32)
        T.clear(acc)
        for bk in T.serial(T.ceildiv(K, BLOCK_K)):
            for tk in T.serial(BLOCK_K):
                a_s[tk] = A[bk * BLOCK_K + tk]
            for tk in T.serial(BLOCK_K):
                acc[0] += a_s[tk].astype(T.float32) * B[bn * BLOCK_N + tn, bk * BLOCK_K + tk]
        if tn % 2 == 1:
            C[bn * BLOCK_N + tn] = -acc[0]
        else:
            C[bn * BLOCK_N + tn] = acc[0]
    return C


@pytest.mark.parametrize("which", ["splitk", "naive"])
def test_thread_binding_gemv(target, rng, which):
    tgt = "cuda-emu" if target == "cuda-emu" else target
    N, K = 64, 128
    a = rng.standard_normal(K).astype(np.float16)
    b = rng.standard_normal((N, K)).astype(np.float16)
    ref = b.astype(np.float64) @ a.astype(np.float64)
    if which == "splitk":
        f, args, tol = splitk_gemv, (16, 8), 2e-2
    else:
        f, args, tol = naive_gemv, (32, 32), 1e-4
        ref = np.where(np.arange(N) % 2 == 1, -ref, ref)
    k = f.compile(N=N, K=K, BLOCK_N=args[0], BLOCK_K=args[1])
    k = tegula.compile(k.func, out_idx=k.out_idx, target=tgt)
    for arch in ARCHS if target != "cuda" and available_backends() else ():
        assert "threadIdx" in tegula.compile(k.func, out_idx=k.out_idx, target=f"cuda:{arch}").get_kernel_source()
    da, db = to_device(target, a, b)
    np.testing.assert_allclose(to_host(k(da, db)).astype(np.float64), ref, rtol=tol, atol=tol)


def test_thread_binding_dims_and_errors():
    with pytest.raises(tegula.errors.KernelTypeError, match="dim must be 0, 1 or 2"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=4):
                A[T.get_thread_binding(3)] = 1.0


# -- T.alloc_global: a scratch tensor between two kernels -------------------------------------

def split_combine_kernel(M, N, S):
    @T.prim_func
    def split_combine(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        part = T.alloc_global((M, S), "float32")
        with T.Kernel(M, S, threads=128) as (bm, bs):
            tile = T.alloc_fragment((N // S,), "float32")
            acc = T.alloc_fragment((1,), "float32")
            T.copy(X[bm, bs * (N // S)], tile)
            T.reduce_sum(tile, acc, dim=0)
            part[bm, bs] = acc[0]
        with T.Kernel(M, threads=128) as bm:
            row = T.alloc_fragment((S,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.copy(part[bm, 0], row)
            T.reduce_max(row, tot, dim=0)
            Y[bm] = tot[0]

    return split_combine


def test_alloc_global_between_kernels(target, rng):
    M, N, S = 8, 256, 4
    k = built(split_combine_kernel(M, N, S), target, out_idx=[-1])
    x = rng.standard_normal((M, N)).astype(np.float32)
    (dx,) = to_device(target, x)
    y = to_host(k(dx))
    ref = x.astype(np.float64).reshape(M, S, N // S).sum(-1).max(-1)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    assert len(k.inputs) == 1 and k.func.num_workspaces == 1


# -- T.reinterpret ---------------------------------------------------------------------------

def bits_kernel(N):
    @T.prim_func
    def bits(X: T.Tensor((N,), "float32"), E_: T.Tensor((N,), "int32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                b = T.reinterpret(X[bx * 128 + i], T.uint32)
                E_[bx * 128 + i] = T.cast((b >> 23) & 0xFF, T.int32) - 127
                Y[bx * 128 + i] = T.reinterpret(b & T.uint32(0x807FFFFF) | T.uint32(0x3F800000), T.float32)

    return bits


def test_reinterpret_bits(target, rng):
    N = 256
    k = built(bits_kernel(N), target, out_idx=[1, 2])
    x = (rng.standard_normal(N) * 100).astype(np.float32)
    (dx,) = to_device(target, x)
    e, y = (to_host(v) for v in k(dx))
    m, ex = np.frexp(x.astype(np.float64))  # x = m * 2**ex with 0.5 <= |m| < 1
    np.testing.assert_array_equal(e, ex - 1)
    np.testing.assert_allclose(y, 2 * m, rtol=0, atol=0)


def test_reinterpret_needs_one_width():
    with pytest.raises(tegula.errors.DTypeError, match="float32 .32 bits. cannot be read as uint8"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "uint8")):
            with T.Kernel(1, threads=4):
                for i in T.Parallel(4):
                    B[i] = T.reinterpret(A[i], T.uint8)


# -- user layouts ------------------------------------------------------------------------------

def test_user_layout_and_fragment_objects():
    L = T.Layout([2, 3, 16, 64], lambda b, h, l, d: [b, h, l // 8, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])
    assert L.output_shape == (2, 3, 2, 8, 2, 32)
    assert L.map_forward_index((1, 2, 9, 13)) == (1, 2, 1, 1, 1, 6)
    F = T.Fragment([16, 16], forward_thread_fn=lambda i, j: (i % 8) * 4 + j // 4,
                   forward_index_fn=lambda i, j: (i // 8) * 4 + j % 4)
    assert F.get_thread_size() == 32 and F.output_shape == (8,)
    assert F.map_forward_thread((9, 7)) == 5 and F.map_forward_index((9, 7)) == (7,)
    with pytest.raises(tegula.errors.KernelTypeError, match="2 index argument"):
        T.Layout([4, 4], lambda i: i)


def annotated_kernel(M, N):
    @T.prim_func
    def annotated(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float32")
            f = T.alloc_fragment((M, N), "float32")
            T.annotate_layout({s: T.Layout((M, N), lambda i, j: (j, i)),
                               Y: T.Layout((M, N), lambda i, j: (i // 8, j, i % 8)),
                               f: T.Fragment((M, N), forward_thread_fn=lambda i, j: (i * N + j) % 128,
                                             forward_index_fn=lambda i, j: (i * N + j) // 128)})
            T.copy(X, s)
            T.copy(s, f)
            for i, j in T.Parallel(M, N):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, Y)

    return annotated


def test_annotated_user_layouts_keep_meaning(target, rng):
    M, N = 16, 32
    k = built(annotated_kernel(M, N), target, out_idx=[-1])
    x = rng.standard_normal((M, N)).astype(np.float32)
    (dx,) = to_device(target, x)
    np.testing.assert_allclose(to_host(k(dx)), x.astype(np.float64) * 2 + 1, rtol=1e-6)
    assert "T.Layout([16, 32], lambda i0, i1: [i1, i0])" in tegula.compile(annotated_kernel(M, N), target="cpu").get_kernel_source()


# -- out-of-bounds guards for global accesses in T.Parallel -----------------------------------

def ragged_kernel(N, safe=None):
    @T.prim_func
    def ragged(A: T.Tensor((N,), "float32"), B: T.Tensor((N + 64,), "float32"),
               C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            if safe is not None:
                T.annotate_safe_value({A: safe})
            for i in T.Parallel(128):
                # no `if`: the tail of the last block reads A past its end and writes C past its end
                C[bx * 128 + i] = A[bx * 128 + i] + B[bx * 128 + i]
                B[bx * 128 + i] = A[bx * 128 + i + 64]

    return ragged


@pytest.mark.parametrize("safe", [None, 5.0])
def test_parallel_global_accesses_are_guarded(target, rng, safe):
    N = 200
    k = built(ragged_kernel(N, safe), target, out_idx=[2])
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N + 64).astype(np.float32)
    b0 = b.copy()
    da, db = to_device(target, a, b)
    c = to_host(k(da, db))
    np.testing.assert_allclose(c, a.astype(np.float64) + b0[:N], rtol=1e-6)
    # B[i] = A[i + 64] for the i < 256 the blocks cover; A past its end reads the safe value
    fill = 0.0 if safe is None else safe
    want = np.where(np.arange(256) + 64 < N, np.concatenate([a, np.zeros(120)])[64:320], fill)
    np.testing.assert_allclose(to_host(db)[:256], want, rtol=1e-6)
    np.testing.assert_array_equal(to_host(db)[256:], b0[256:])


def test_guards_only_where_needed():
    src = ragged_kernel(256).script()  # 256 = 2 * 128: only A[... + 64] may leave its buffer
    assert "\n            if " not in src and src.count("T.if_then_else") == 1
    assert "T.if_then_else(bx * 128 + i + 64 < 256, A[bx * 128 + i + 64], 0.0)" in src
    src = ragged_kernel(200).script()
    assert "if bx * 128 + i < 200:" in src and "T.if_then_else(bx * 128 + i + 64 < 200" in src


def test_guard_already_written_is_not_repeated():
    N = 200

    @T.prim_func
    def tail(A: T.Tensor((N,), "float32"), C: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as bx:
            for i in T.Parallel(128):
                if bx * 128 + i < N:
                    C[bx * 128 + i] = A[bx * 128 + i]

    assert tail.script().count("< 200") == 1


# -- reading fragment elements outside T.Parallel: one rule on every target -------------------

def test_fragment_element_read_outside_parallel(target, rng):
    """As TileLang (block_mask in block-sparse attention): a fragment read element by element
    outside T.Parallel is held whole by every thread (replicated on CUDA), and any element reads."""
    @T.prim_func
    def masked(A: T.Tensor((64,), "float32"), M: T.Tensor((16,), "int8"), B: T.Tensor((64,), "float32"),
               C: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((64,), "float32")
            m = T.alloc_fragment((16,), "int8")
            acc = T.alloc_fragment((64,), "float32")
            T.copy(A, f)
            T.copy(M, m)
            T.fill(acc, 0)
            for j in T.serial(16):
                if m[j] != 0:
                    for i in T.Parallel(64):
                        acc[i] += f[i] * j
            T.copy(acc, B)
            C[0] = f[3]

    k = built(masked, target, out_idx=[2, 3])
    a = rng.standard_normal(64).astype(np.float32)
    m = (rng.random(16) > 0.5).astype(np.int8)
    b, c = (to_host(x) for x in k(*to_device(target, a, m)))
    np.testing.assert_allclose(b, a.astype(np.float64) * sum(j for j in range(16) if m[j]), rtol=1e-5)
    assert c[0] == a[3]


def test_fragment_too_large_to_replicate_is_an_error():
    with pytest.raises(tegula.errors.ScopeError, match="fragment 'f' is read element by element") as e:
        @T.prim_func
        def bad(A: T.Tensor((4096,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=128):
                f = T.alloc_fragment((4096,), "float32")
                T.copy(A, f)
                B[0] = f[3]
    assert "B[0] = f[3]" in str(e.value)


def test_fill_of_one_element(target):
    @T.prim_func
    def fill_one(A: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32):
            S = T.alloc_shared((8,), "int32")
            T.fill(S, 1)
            T.fill(S[3], 7)
            T.copy(S, A)

    k = built(fill_one, target, out_idx=[0])
    np.testing.assert_array_equal(to_host(k()), [1, 1, 1, 7, 1, 1, 1, 1])


def one_element_kernel(N):
    @T.prim_func
    def total(A: T.Tensor((N,), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((N,), "float32")
            s = T.alloc_fragment((1,), "float32")
            T.copy(A, f)
            T.reduce_sum(f, s, dim=0)
            B[0] = s[0] * 2.0
            if s[0] > 0:
                B[1] = 1.0
            else:
                B[1] = -1.0

    return total


def test_one_element_fragment_read_anywhere(target, rng):
    k = built(one_element_kernel(128), target, out_idx=[-1])
    a = rng.standard_normal(128).astype(np.float32)
    (da,) = to_device(target, a)
    b = to_host(k(da))
    tot = a.astype(np.float64).sum()
    np.testing.assert_allclose(b, [2 * tot, 1.0 if tot > 0 else -1.0], rtol=1e-5, atol=1e-5)


# -- mbarriers ----------------------------------------------------------------------------------

def barrier_kernel(N, rounds=3):
    @T.prim_func
    def ping(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            bars = T.alloc_barrier([128, 64])
            s = T.alloc_shared((128,), "float32")
            acc = T.alloc_local((1,), "float32")
            acc[0] = 0.0
            for r in T.serial(rounds):
                s[tx] = A[r * 128 + tx]
                T.mbarrier_arrive(bars[0])
                T.mbarrier_wait_parity(bars[0], 0)  # two phases a round: parities 0, 1
                acc[0] += s[(tx + 1) % 128]
                T.mbarrier_arrive(bars[0])  # nobody overwrites s before everyone has read it
                T.mbarrier_wait_parity(bars[0], 1)
            if tx < 64:
                T.barrier_arrive(bars[1])
            T.barrier_wait(bars[1], 0)
            B[tx] = acc[0]

    return ping


def test_mbarriers_order_threads(target, rng):
    N = 3 * 128
    k = built(barrier_kernel(N), target, out_idx=[-1], pass_configs={"tegula.disable_barrier_insertion": True})
    a = rng.standard_normal(N).astype(np.float32)
    (da,) = to_device(target, a)
    b = to_host(k(da))
    ref = a.astype(np.float64).reshape(3, 128)
    np.testing.assert_allclose(b[:128], np.roll(ref, -1, axis=1).sum(0), rtol=1e-5, atol=1e-5)


def test_mbarrier_wait_that_never_ends_is_reported():
    N = 128

    @T.prim_func
    def stuck(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            bar = T.alloc_barrier(128)
            if tx < 64:
                T.mbarrier_arrive(bar)
            T.mbarrier_wait_parity(bar, 0)
            B[tx] = A[tx]

    k = tegula.compile(stuck, out_idx=[-1], target="cpu")
    with pytest.raises(tegula.errors.SyncError, match="expects 64 arrival") as e:
        k(np.ones(N, np.float32))
    assert "T.mbarrier_wait_parity(bar, 0)" in str(e.value)


def expect_tx_kernel():
    @T.prim_func
    def tx_only(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            bar = T.alloc_barrier(1)
            T.mbarrier_expect_tx(bar, 512)

    return tx_only


def test_mbarrier_expect_tx_is_hopper_only():
    with pytest.raises(tegula.errors.UnsupportedError, match="needs sm_90") as e:
        tegula.compile(expect_tx_kernel(), target="cuda-emu:sm_80")
    assert "T.mbarrier_expect_tx(bar, 512)" in str(e.value)


# -- small expression and statement forms ---------------------------------------------------

def small_forms_kernel(N):
    @T.prim_func
    def forms(X: T.Tensor((N,), "float32"), F: T.Tensor((N,), "int32"), M: T.Tensor((2,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((N,), "float32")
            m = T.alloc_fragment((1,), "float32")
            flags = T.alloc_local((4,), "bool")
            T.assume(N % 128 == 0)
            T.pdl_sync()
            T.copy(X, x, annotations={"coalesced_width": 4})
            T.reduce_max(x, m, dim=0, nan_propagate=True)
            for i in T.Parallel(N):
                F[i] = T.if_then_else(T.isfinite(x[i]), 1, 0) + T.cast(T.__ldg(X[i]) > 0, T.int32) * 2
            for j in T.serial(4):
                flags[j] = X[j] > 0
            M[0] = m[0]
            M[1] = T.if_then_else(T.any_of(flags), 1.0, 0.0) + T.if_then_else(T.all_of(flags), 2.0, 0.0)
            T.pdl_trigger()

    return forms


def test_small_forms(target, rng):
    N = 256
    x = rng.standard_normal(N).astype(np.float32)
    x[[3, 70]] = [np.inf, np.nan]
    if target.startswith("cuda"):
        with pytest.raises(tegula.errors.UnsupportedError, match="T.pdl_sync needs sm_90"):
            tegula.compile(small_forms_kernel(N), target="cuda:sm_80" if target == "cuda" else "cuda-emu:sm_80")
        k = tegula.compile(small_forms_kernel(N), out_idx=[1, 2],
                           target="cuda-emu:sm_90a" if target.startswith("cuda-emu") else "cuda")
    else:
        k = tegula.compile(small_forms_kernel(N), out_idx=[1, 2], target="cpu")
        if available_backends():
            assert "griddepcontrol" not in tegula.compile(small_forms_kernel(N), target="cuda:sm_90a").get_kernel_source()
    (dx,) = to_device(target, x)
    f, m = (to_host(v) for v in k(dx))
    want_f = np.isfinite(x).astype(np.int32) + 2 * (x > 0)
    np.testing.assert_array_equal(f, want_f)
    assert np.isnan(m[0])  # NaN propagates through the max
    pos = x[:4] > 0
    assert m[1] == (1.0 if pos.any() else 0.0) + (2.0 if pos.all() else 0.0)


def shuffle_kernel():
    @T.prim_func
    def butterfly(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            v = T.alloc_var(T.float32, init=A[tx])
            for s in T.unroll(5):
                v = v + T.shfl_xor(v, 1 << s)
            T.sync_threads(1, 64)
            B[tx] = v

    return butterfly


def test_warp_shuffle_sum(target, rng):
    k = built(shuffle_kernel(), target, out_idx=[-1])
    a = rng.standard_normal(64).astype(np.float32)
    (da,) = to_device(target, a)
    b = to_host(k(da))
    np.testing.assert_allclose(b, np.repeat(a.astype(np.float64).reshape(2, 32).sum(1), 32), rtol=1e-5, atol=1e-5)


def test_shuffle_needs_thread_level_code():
    with pytest.raises(tegula.errors.ScopeError, match="needs thread-level code"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    A[i] = T.shfl_xor(A[i], 1)


# -- packed 4-bit dtypes: names that work as values, a clear error in kernels ----------------

def test_packed_4bit_dtypes_are_values_and_a_clear_error_in_kernels():
    assert T.int4 == "int4" and T.int4.bits == 4 and T.float4_e2m1fn.bits == 4
    assert {T.float16: "f16", T.int4: "i4"}[T.int4] == "i4"
    with pytest.raises(tegula.errors.UnsupportedError, match="packed 4-bit dtype int4") as e:
        @T.prim_func
        def gemm4(A: T.Tensor((16, 32), "int8")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((16, 64), T.int4)
    assert "T.alloc_shared((16, 64), T.int4)" in str(e.value)


def row_results_to_shared_kernel():
    @T.prim_func
    def main(A: T.Tensor((16, 64), "float32"), R: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            F = T.alloc_fragment((16, 64), "float32")
            S = T.alloc_shared((16,), "float32")
            r = T.alloc_fragment((16,), "float32")
            T.copy(A, F)
            T.reduce_sum(F, r, dim=1)
            for i in T.Parallel(16):  # r's rows are held by several threads each
                S[i] = r[i]
            for i in T.Parallel(16):
                S[i] = S[i] * 2.0 + r[i]
            T.copy(S, R)

    return main


def test_parallel_loop_over_replicated_rows_writes_memory_once(target, rng):
    """A T.Parallel loop driven by a layout whose elements several threads hold (a reduction's
    rows) writes shared memory from one of them: no write-after-write or read-then-write race
    between the replicas on the emulator."""
    a = rng.standard_normal((16, 64)).astype(np.float32)
    (a_d,) = to_device(target, a)
    r = built(row_results_to_shared_kernel(), target, out_idx=[-1])(a_d)
    np.testing.assert_allclose(to_host(r), a.astype(np.float64).sum(axis=1) * 3.0, rtol=1e-5, atol=1e-5)


# -- T.const values by keyword in an eager call -------------------------------------------------

@tegula.jit
def group_sums(A):
    M, G = T.const("M, G")
    A: T.Tensor((M, 64), T.float32)
    out = T.empty((M, G), T.float32)            # G is known only from the call's keyword
    with T.Kernel(M, threads=32) as bx:
        for g in T.Parallel(G):
            acc = T.alloc_var(T.float32, init=0.0)
            for k in T.serial(64 // G):
                acc = acc + A[bx, g * (64 // G) + k]
            out[bx, g] = acc
    return out


@pytest.mark.parametrize("groups", [4, 8])
def test_eager_call_takes_const_values_by_keyword(rng, groups):
    a = rng.standard_normal((6, 64)).astype(np.float32)
    out = group_sums(a, G=groups)
    np.testing.assert_allclose(out, a.astype(np.float64).reshape(6, groups, -1).sum(-1),
                               rtol=1e-5, atol=1e-5)


def test_eager_call_names_an_unknown_keyword():
    a = np.ones((6, 64), np.float32)
    with pytest.raises(ArgumentError, match=r"keyword 'Gs' is not a parameter.*") as e:
        group_sums(a, G=4, Gs=4)
    assert "did you mean 'G'" in str(e.value)
    with pytest.raises(KernelTypeError, match="'G' .* has no value") as e:  # G left out
        group_sums(a, Gs=4)
    assert "pass G=... to the call" in str(e.value) and "test_features.py" in str(e.value)


def test_eager_call_const_keyword_that_disagrees_with_a_tensor_is_an_error():
    with pytest.raises(ArgumentError, match="'A'"):
        group_sums(np.ones((6, 64), np.float32), M=5, G=4)


def test_eager_get_kernel_source_takes_const_values_by_keyword():
    src = group_sums.get_kernel_source(np.ones((6, 64), np.float32), G=8, target="cpu")
    assert "T.Tensor((6, 8)" in src


@tegula.jit
def group_sums_branching(A):
    M, G = T.const("M, G")
    step = 16 if G == 4 else 8                # G compared before it has a value
    A: T.Tensor((M, 64), T.float32)
    out = T.empty((M, G), T.float32)
    with T.Kernel(M, threads=32) as bx:
        for g in T.Parallel(G):
            acc = T.alloc_var(T.float32, init=0.0)
            for k in T.serial(step):
                acc = acc + A[bx, g * step + k]
            out[bx, g] = acc
    return out


def test_comparing_a_const_with_no_value_is_an_error_not_a_silent_false(rng):
    a = rng.standard_normal((6, 64)).astype(np.float32)
    np.testing.assert_allclose(group_sums_branching(a, G=4), a.astype(np.float64).reshape(6, 4, 16).sum(-1),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(KernelTypeError, match="'G' .* has no value") as e:
        group_sums_branching(a)
    assert "G == 4" in str(e.value)


# -- fragments that only T.Parallel nests index by their own loop variables ---------------------

def sink_kernel(heads, block_M, blocks):
    @T.prim_func
    def sink(Sinks: T.Tensor((heads,), "float16"), X: T.Tensor((blocks * block_M,), "float32"),
             Y: T.Tensor((blocks * block_M,), "float32")):
        with T.Kernel(blocks, threads=128) as bx:
            sinks = T.alloc_fragment([heads], "float16")  # smaller than the loops that index it
            acc = T.alloc_fragment([block_M], "float32")
            for i in T.Parallel(block_M):
                sinks[i] = Sinks[bx % heads]
            T.copy(X[bx * block_M], acc)
            for i in T.Parallel(block_M):
                acc[i] = acc[i] * 2.0 + T.exp2(sinks[i] * 1.5)
            T.copy(acc, Y[bx * block_M])

    return sink


@pytest.mark.parametrize("heads", [1, 3])
def test_fragment_sized_by_its_parallel_loops(target, rng, heads):
    block_M, blocks = 64, 4
    k = built(sink_kernel(heads, block_M, blocks), target, out_idx=[-1])
    s = rng.standard_normal(heads).astype(np.float16)
    x = rng.standard_normal(blocks * block_M).astype(np.float32)
    ds, dx = to_device(target, s, x)
    # the sink term is float16 (its product and exp2 round to float16): compared on its own
    term = to_host(k(ds, dx)).astype(np.float64) - x.astype(np.float64) * 2
    want = np.exp2(np.repeat(s[np.arange(blocks) % heads].astype(np.float64), block_M) * 1.5)
    np.testing.assert_allclose(term, want, rtol=3e-3, atol=1e-5)
    assert "sinks = T.alloc_fragment((64,), \"float16\")" in sink_kernel(heads, block_M, blocks).script()


def overrun_kernel(by_copy):
    @T.prim_func
    def overrun(X: T.Tensor((16,), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment([8], "float32")
            for i in T.Parallel(16):
                f[i] = X[i]  # past the end of f, which a tile op or another index also uses
            if by_copy:
                T.copy(f, Y[0:8])
            else:
                for i in T.Parallel(16):
                    Y[i] = f[15 - i]

    return overrun


@pytest.mark.parametrize("by_copy", [True, False])
def test_fragment_used_otherwise_keeps_its_shape(by_copy):
    func = overrun_kernel(by_copy)
    assert 'f = T.alloc_fragment((8,), "float32")' in func.script()
    for target in ("cpu", "cuda-emu"):
        with pytest.raises(tegula.errors.OutOfBoundsError, match="'f") as e:
            tegula.compile(func, target=target)(np.random.standard_normal(16).astype(np.float32),
                                                 np.zeros(16, np.float32))
        assert "f[i] = X[i]" in str(e.value) or "T.Parallel(16)" in str(e.value)
