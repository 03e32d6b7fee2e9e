"""Fused RMSNorm: ``y = x / sqrt(mean(x**2) + eps) * weight`` in one pass over each row.

Each block loads ``block_M`` full rows into a float32 fragment, squares them into a second
fragment, reduces with ``T.reduce_sum``, turns the sum into ``1 / rms`` with ``T.rsqrt`` and writes
the scaled, weighted rows back. The input is read once and the output written once: nothing goes
back to global memory in between, which is the point of fusing.

Run it:  python examples/rmsnorm.py [--M 1000 --N 512 --target cpu]
"""
import argparse

import numpy as np

import tegula as tilelang
import tegula.language as T


def rms_norm(M, N, eps=1e-6, block_M=4, threads=128, dtype="float16", accum_dtype="float32"):
    """Returns the ``@T.prim_func`` taking (X (M, N), W (N,), Y (M, N))."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            sq = T.alloc_fragment((block_M, N), accum_dtype)
            w = T.alloc_fragment((N,), accum_dtype)
            inv_rms = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x)
            T.copy(W, w)
            for i, j in T.Parallel(block_M, N):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, inv_rms, dim=1)
            for i in T.Parallel(block_M):
                inv_rms[i] = T.rsqrt(inv_rms[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * inv_rms[i] * w[j]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x, w, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def main(M=1000, N=512, target="auto", seed=None):
    """Run on random inputs, print and return the max error."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, N)).astype(np.float16)
    w = (1.0 + 0.5 * rng.standard_normal(N)).astype(np.float16)
    kernel = tilelang.compile(rms_norm(M, N), out_idx=[-1], target=target)
    y = kernel(x, w)
    ref = reference(x, w)
    err = np.abs(y.astype(np.float64) - ref)
    print(f"rmsnorm  {M}x{N} float16  target={kernel.target}  max error {err.max():.3e}")
    # float32 math, one rounding to float16 at the end
    assert (err <= 2.0 ** -10 * np.abs(ref) + 1e-5).all(), err.max()
    return float(err.max())


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="fused RMSNorm")
    p.add_argument("--M", type=int, default=1000)
    p.add_argument("--N", type=int, default=512)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.target)
