"""Small kernels the package builds itself: the ``python -m tegula demo`` kernels (GEMM, row
softmax, flash-attention forward), also ``carver``'s ``MatmulTemplate.equivalent_function``, and
their float64 numpy references. Below ``tools`` and ``compat``, which both use them (the package
never imports ``examples/``)."""
import math
from typing import Any, Optional

import numpy as np

import tegula.language as T


def gemm_kernel(M: int, N: int, K: int, block_M: int = 64, block_N: int = 64, block_K: int = 32,
                dtype: str = "float16", accum_dtype: str = "float32", out_dtype: Optional[str] = None) -> Any:
    """C = A @ B for A (M, K) and B (K, N) of ``dtype``, accumulated in ``accum_dtype``, C of
    ``out_dtype`` (``dtype`` when None): block_M x block_N tiles, two pipelined stages of block_K."""
    out_dtype = out_dtype or dtype

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm


def softmax_kernel(N: int, block_M: int = 4, dtype: str = "float16") -> Any:
    """Row softmax of X (M, N), M dynamic, block_M rows per block in float32."""
    M = T.dynamic("M")
    log2e = math.log2(math.e)

    @T.prim_func
    def softmax(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            mx = T.alloc_fragment((block_M,), "float32")
            total = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - mx[i]) * log2e)
            T.reduce_sum(x, total, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / total[i]
            T.copy(x, Y[bx * block_M, 0])

    return softmax


def attention_kernel(batch: int, heads: int, seq_len: int, dim: int, is_causal: bool = True,
                     block_M: int = 64, block_N: int = 64, dtype: str = "float16") -> Any:
    """Flash-attention forward, O = softmax(Q K^T / sqrt(dim)) V per (batch, head), online softmax
    over block_N keys at a time; ``is_causal`` masks keys after the query."""
    shape = (batch, heads, seq_len, dim)
    scale = math.log2(math.e) / math.sqrt(dim)

    @T.prim_func
    def attention(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
                  O: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, h, b):
            q_s = T.alloc_shared((block_M, dim), dtype)
            k_s = T.alloc_shared((block_N, dim), dtype)
            v_s = T.alloc_shared((block_N, dim), dtype)
            s = T.alloc_fragment((block_M, block_N), "float32")
            p = T.alloc_fragment((block_M, block_N), dtype)
            o = T.alloc_fragment((block_M, dim), "float32")
            m = T.alloc_fragment((block_M,), "float32")
            m_old = T.alloc_fragment((block_M,), "float32")
            corr = T.alloc_fragment((block_M,), "float32")
            l = T.alloc_fragment((block_M,), "float32")
            l_new = T.alloc_fragment((block_M,), "float32")
            q0 = bx * block_M
            T.copy(Q[b, h, q0:q0 + block_M, :], q_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            if is_causal:
                n_blocks = T.min(T.ceildiv(seq_len, block_N), T.ceildiv(q0 + block_M, block_N))
            else:
                n_blocks = T.ceildiv(seq_len, block_N)
            for kb in T.Pipelined(n_blocks, num_stages=1):
                k0 = kb * block_N
                T.copy(K[b, h, k0:k0 + block_N, :], k_s)
                T.gemm(q_s, k_s, s, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(block_M, block_N):
                    if is_causal:
                        ok = (k0 + j < seq_len) & (k0 + j <= q0 + i)
                    else:
                        ok = k0 + j < seq_len
                    s[i, j] = T.if_then_else(ok, s[i, j] * scale, -T.infinity("float32"))
                T.copy(m, m_old)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    corr[i] = T.exp2(m_old[i] - m[i])
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] - m[i])
                T.reduce_sum(s, l_new, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * corr[i] + l_new[i]
                for i, j in T.Parallel(block_M, dim):
                    o[i, j] *= corr[i]
                T.copy(s, p)
                T.copy(V[b, h, k0:k0 + block_N, :], v_s)
                T.gemm(p, v_s, o)
            for i, j in T.Parallel(block_M, dim):
                o[i, j] /= l[i]
            T.copy(o, O[b, h, q0:q0 + block_M, :])

    return attention


# -- float64 references ------------------------------------------------------------------------

def _f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64)


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _f64(a) @ _f64(b)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    e = np.exp(_f64(x) - _f64(x).max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, is_causal: bool = True) -> np.ndarray:
    s = _f64(q) @ np.swapaxes(_f64(k), -1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[-2]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ _f64(v)
