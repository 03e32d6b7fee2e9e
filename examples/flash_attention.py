"""Flash attention forward: ``O = softmax(Q K^T / sqrt(d)) V``, causal or not, with GQA.

Layout: Q and O are (batch, heads, seq_len, dim); K and V are (batch, kv_heads, seq_len, dim) with
``heads = groups * kv_heads`` (grouped-query attention; ``groups=1`` is ordinary multi-head).

Each block owns ``block_M`` query rows of one head. It walks the keys ``block_N`` at a time and
never materializes the full score matrix; instead it keeps, per query row, the running maximum
``m`` and the running sum ``l`` of ``exp(s - m)`` (online softmax). When a new key block raises the
maximum from ``m_prev`` to ``m``, the partial output and ``l`` are rescaled by ``exp(m_prev - m)``.
Exponentials use ``T.exp2`` with ``log2(e)`` folded into the softmax scale.

- ``S = Q K^T`` is ``T.gemm(Q_shared, K_shared, S, transpose_B=True)``; ``O += P V`` is a second gemm
  whose A operand is the probability fragment, cast to the input dtype.
- Keys past ``seq_len`` (when it is not a multiple of ``block_N``) and, in causal mode, keys after
  the query are masked to ``-inf`` before the softmax; a causal block also stops at the diagonal.
- Query rows past ``seq_len`` are computed on zero-filled input and dropped by the final copy.

Run it:  python examples/flash_attention.py [--batch 1 --heads 4 --seq_len 300 --dim 64 --target cpu]
"""
import argparse
import math

import numpy as np

import tegula as tilelang
import tegula.language as T


def flash_attention(batch, heads, seq_len, dim, is_causal=False, groups=1, block_M=64, block_N=64,
                    num_stages=1, threads=128, dtype="float16", accum_dtype="float32"):
    """Returns the ``@T.prim_func`` taking (Q, K, V, O)."""
    assert heads % groups == 0, "heads must be a multiple of groups"
    kv_heads = heads // groups
    q_shape = (batch, heads, seq_len, dim)
    kv_shape = (batch, kv_heads, seq_len, dim)
    scale = 1.0 / math.sqrt(dim) * math.log2(math.e)  # softmax scale, in base 2

    @T.prim_func
    def main(
        Q: T.Tensor(q_shape, dtype),
        K: T.Tensor(kv_shape, dtype),
        V: T.Tensor(kv_shape, dtype),
        O: T.Tensor(q_shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            S = T.alloc_fragment((block_M, block_N), accum_dtype)
            P = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum_dtype)
            m = T.alloc_fragment((block_M,), accum_dtype)
            m_prev = T.alloc_fragment((block_M,), accum_dtype)
            rescale = T.alloc_fragment((block_M,), accum_dtype)
            l = T.alloc_fragment((block_M,), accum_dtype)
            l_block = T.alloc_fragment((block_M,), accum_dtype)

            q0 = bx * block_M
            kv_head = by // groups
            T.copy(Q[bz, by, q0:q0 + block_M, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            if is_causal:  # key blocks entirely after the last query of this block are skipped
                n_blocks = T.min(T.ceildiv(seq_len, block_N), T.ceildiv(q0 + block_M, block_N))
            else:
                n_blocks = T.ceildiv(seq_len, block_N)

            for kb in T.Pipelined(n_blocks, num_stages=num_stages):
                k0 = kb * block_N
                T.copy(K[bz, kv_head, k0:k0 + block_N, :], K_shared)
                T.gemm(Q_shared, K_shared, S, transpose_B=True, clear_accum=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_M, block_N):
                    if is_causal:
                        keep = (k0 + j < seq_len) & (k0 + j <= q0 + i)
                    else:
                        keep = k0 + j < seq_len
                    S[i, j] = T.if_then_else(keep, S[i, j], -T.infinity(accum_dtype))

                # online softmax: new running max, rescale factor, probabilities, running sum
                T.copy(m, m_prev)
                T.reduce_max(S, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_M, block_N):
                    S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
                T.reduce_sum(S, l_block, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * rescale[i] + l_block[i]
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= rescale[i]

                T.copy(S, P)
                T.copy(V[bz, kv_head, k0:k0 + block_N, :], V_shared)
                T.gemm(P, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= l[i]
            T.copy(acc_o, O[bz, by, q0:q0 + block_M, :])

    return main


def reference(q, k, v, is_causal=False):
    """Attention in float64; K and V heads are repeated for GQA."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    groups = q.shape[1] // k.shape[1]
    k = np.repeat(k, groups, axis=1)
    v = np.repeat(v, groups, axis=1)
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[2]
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def run(batch, heads, seq_len, dim, is_causal, groups, target, rng):
    """One configuration on random inputs; returns the max error."""
    kernel = tilelang.compile(flash_attention(batch, heads, seq_len, dim, is_causal, groups),
                              out_idx=[-1], target=target)
    q = rng.standard_normal((batch, heads, seq_len, dim)).astype(np.float16)
    k = rng.standard_normal((batch, heads // groups, seq_len, dim)).astype(np.float16)
    v = rng.standard_normal((batch, heads // groups, seq_len, dim)).astype(np.float16)
    o = kernel(q, k, v)
    err = float(np.abs(o.astype(np.float64) - reference(q, k, v, is_causal)).max())
    kind = ("causal" if is_causal else "full") + (f" gqa{groups}" if groups > 1 else "")
    print(f"flash_attention ({kind})  {batch}x{heads}x{seq_len}x{dim} float16  target={kernel.target}"
          f"  max error {err:.3e}")
    # P is rounded to float16 before P @ V and O is stored in float16 (|O| <~ 3)
    assert err <= 5e-3, err
    return err


def main(batch=1, heads=4, seq_len=300, dim=64, target="auto", seed=None):
    """Full and causal attention, then grouped-query attention; prints and returns the max error."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for is_causal, groups in ((False, 1), (True, 1), (False, 2), (True, 4)):
        if heads % groups == 0:
            worst = max(worst, run(batch, heads, seq_len, dim, is_causal, groups, target, rng))
    return worst


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="flash attention forward (full, causal, GQA)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq_len", type=int, default=300)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.batch, args.heads, args.seq_len, args.dim, args.target)
