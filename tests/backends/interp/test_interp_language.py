"""Interpreter tests on kernels written in the T language, against float64 numpy references."""

import math

import numpy as np
import pytest

import tegula.language as T
from tegula.backends.interp import execute
from tegula.errors import OutOfBoundsError

RNG = np.random.default_rng()  # fresh inputs every run


def rand(shape: tuple, dtype: object = np.float32) -> np.ndarray:
    x = RNG.uniform(-2, 2, shape)
    x[x == 0] = 0.5
    return x.astype(dtype)


def matmul(M: int, N: int, K: int, bm: int, bn: int, bk: int, dtype: str = "float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def test_language_gemm_with_ragged_tails() -> None:
    M, N, K = 150, 100, 90
    a, b = rand((M, K), np.float16), rand((K, N), np.float16)
    c = np.full((M, N), np.nan, np.float16)
    execute(matmul(M, N, K, 64, 64, 32), [a, b, c])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3, atol=2e-2)


def flash_attention(batch: int, heads: int, seq_len: int, dim: int, block_M: int, block_N: int,
                    causal: bool):
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype, accum = "float16", "float"

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            m_scale = T.alloc_fragment([block_M], accum)
            s_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(m, -T.infinity(accum))
            loop_range = T.ceildiv((bx + 1) * block_M, block_N) if causal else T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_range, num_stages=1):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0,
                                                     -T.infinity(acc_s.dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.copy(m, m_prev)
                T.fill(m, -T.infinity(accum))
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m[i] = T.max(m[i], m_prev[i])
                for i in T.Parallel(block_M):
                    m_scale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= m_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, s_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * m_scale[i] + s_sum[i]
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return main


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


@pytest.mark.parametrize("causal", [False, True])
def test_language_flash_attention(causal: bool) -> None:
    q, k, v = (rand((2, 256, 2, 32), np.float16) for _ in range(3))
    o = np.full_like(q, np.nan)
    execute(flash_attention(2, 2, 256, 32, 64, 32, causal), [q, k, v, o])
    np.testing.assert_allclose(o, attention_ref(q, k, v, causal), atol=5e-3, rtol=1e-2)


def test_language_softmax_rows_with_tail_mask() -> None:
    M, N, bm = 50, 64, 16

    @T.prim_func
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=128) as bx:
            x = T.alloc_fragment((bm, N), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            s = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(bm, N):
                if bx * bm + i < M:
                    Y[bx * bm + i, j] = x[i, j] / s[i]

    x = rand((M, N))
    y = np.full((M, N), np.nan, np.float32)
    execute(softmax, [x, y])
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5)


def test_language_var_serial_loop_and_atomic() -> None:
    N = 40

    @T.prim_func
    def k(X: T.Tensor((N,), "float32"), S: T.Tensor((2,), "float32")):
        with T.Kernel(4, threads=32) as bx:
            acc = T.alloc_var("float32", init=1.0)
            for i in T.serial(10):
                acc = acc + X[bx * 10 + i]
            T.atomic_add(S[0], acc)
            T.atomic_max(S[1], acc)

    x = rand((N,))
    s = np.array([0.0, -np.inf], np.float32)
    execute(k, [x, s])
    parts = [1.0 + x[b * 10:(b + 1) * 10].astype(np.float64).sum() for b in range(4)]
    np.testing.assert_allclose(s, [sum(parts), max(parts)], rtol=1e-5)


def test_language_cumsum() -> None:
    @T.prim_func
    def cs(X: T.Tensor((8, 32), "float32"), Y: T.Tensor((8, 32), "float32")):
        with T.Kernel(1, threads=32) as bx:
            s = T.alloc_shared((8, 32), "float32")
            T.copy(X, s)
            T.cumsum(s, dim=1, reverse=True)
            T.copy(s, Y)

    x, y = rand((8, 32)), np.empty((8, 32), np.float32)
    execute(cs, [x, y])
    np.testing.assert_allclose(y, np.cumsum(x[:, ::-1].astype(np.float64), 1)[:, ::-1], rtol=1e-5, atol=1e-5)


def test_language_out_of_bounds_points_at_user_line() -> None:
    @T.prim_func
    def oob(X: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.serial(9):
                X[i] = 1.0

    with pytest.raises(OutOfBoundsError) as ei:
        execute(oob, [np.zeros(8, np.float32)])
    msg = str(ei.value)
    assert "X[i] = 1.0" in msg and "'X'" in msg and "[8]" in msg
