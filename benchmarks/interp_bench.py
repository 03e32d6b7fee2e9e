"""Time the interpreter (``target="cpu"``) on a 1024^3 fp16 GEMM and flash attention forward.

Runs on one core (BLAS threads pinned to 1 unless already set). Prints the first run (which
includes compiling the IR to closures) and the median of the following runs, and checks the
results against float64 numpy.

    python benchmarks/interp_bench.py [--repeat 3]
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

import tegula.language as T  # noqa: E402
from tegula.backends.interp import execute  # noqa: E402


def matmul(M: int, N: int, K: int, bm: int = 128, bn: int = 128, bk: int = 32) -> Any:
    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return gemm


def flash_attention(batch: int, heads: int, seq_len: int, dim: int, block_M: int, block_N: int,
                    causal: bool) -> Any:
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype, accum = "float16", "float"

    @T.prim_func
    def fwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
            Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
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
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return fwd


def attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool) -> np.ndarray:
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhqk,bkhd->bqhd", p / p.sum(-1, keepdims=True), v)


def timed(fn: Callable[[], None], repeat: int) -> tuple[float, float]:
    t = time.perf_counter()
    fn()
    first = time.perf_counter() - t
    runs = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t)
    return first, statistics.median(runs) if runs else first


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    rows = []

    n = 1024
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    c = np.full((n, n), np.nan, np.float16)
    f = matmul(n, n, n)
    first, med = timed(lambda: execute(f, [a, b, c]), args.repeat)
    err = np.abs(c - a.astype(np.float64) @ b.astype(np.float64)).max()
    rows.append(("gemm 1024^3 fp16, 128x128x32 tiles", first, med, err))

    for causal in (False, True):
        q, k, v = (rng.standard_normal((1, 1024, 4, 64)).astype(np.float16) for _ in range(3))
        o = np.full_like(q, np.nan)
        f = flash_attention(1, 4, 1024, 64, 128, 64, causal)
        first, med = timed(lambda: execute(f, [q, k, v, o]), args.repeat)
        err = np.abs(o - attention_ref(q, k, v, causal)).max()
        rows.append((f"flash attn fwd b1 h4 s1024 d64 (128x64){' causal' if causal else ''}",
                     first, med, err))

    print(f"{'kernel':<52} {'first s':>8} {'median s':>9} {'max err':>9}")
    for name, first, med, err in rows:
        print(f"{name:<52} {first:8.3f} {med:9.3f} {err:9.2e}")


if __name__ == "__main__":
    main()
