"""A fused linear layer, ``Y = act(X @ W^T + bias)``, built from ``T.macro`` pieces.

A ``@T.macro`` is a helper whose body is inlined where it is called inside a kernel: it takes
buffers and expressions, may return an expression, and costs nothing at run time. Here the K loop and the epilogue are macros, so that the kernel body reads as the three
steps it is, and the same epilogue serves every activation.

Run it:  python examples/linear_macro.py [--M 300 --N 200 --K 256 --act gelu --target cpu]
"""
import argparse
import math

import numpy as np

import tegula as tilelang
import tegula.language as T

ACTIVATIONS = ("none", "relu", "gelu")


def linear(M, N, K, act="relu", block_M=64, block_N=64, block_K=32, num_stages=2, threads=128,
           dtype="float16", accum_dtype="float32"):
    """Returns the ``@T.prim_func`` taking (X (M, K), W (N, K), bias (N,), Y (M, N))."""
    assert act in ACTIVATIONS, act

    @T.macro
    def mainloop(X, W, X_shared, W_shared, acc, m0, n0):
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(X[m0, k * block_K], X_shared)
            T.copy(W[n0, k * block_K], W_shared)
            T.gemm(X_shared, W_shared, acc, transpose_B=True)

    @T.macro
    def activation(v):
        if act == "relu":
            return T.max(v, 0.0)
        if act == "gelu":  # tanh approximation
            return 0.5 * v * (1.0 + T.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
        return v

    @T.macro
    def epilogue(acc, bias_local):
        for i, j in T.Parallel(block_M, block_N):
            acc[i, j] = activation(acc[i, j] + bias_local[j])

    @T.prim_func
    def main(
        X: T.Tensor((M, K), dtype),
        W: T.Tensor((N, K), dtype),
        bias: T.Tensor((N,), dtype),
        Y: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), dtype)
            W_shared = T.alloc_shared((block_N, block_K), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            bias_local = T.alloc_fragment((block_N,), accum_dtype)

            mainloop(X, W, X_shared, W_shared, acc, by * block_M, bx * block_N)
            T.copy(bias[bx * block_N], bias_local)
            epilogue(acc, bias_local)
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main


def reference(x, w, b, act):
    y = x.astype(np.float64) @ w.astype(np.float64).T + b.astype(np.float64)
    if act == "relu":
        return np.maximum(y, 0)
    if act == "gelu":
        return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
    return y


def main(M=300, N=200, K=256, target="auto", seed=None, acts=ACTIVATIONS):
    """Run every activation on random inputs, print and return the max error."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, K)).astype(np.float16)
    w = (rng.standard_normal((N, K)) / math.sqrt(K)).astype(np.float16)
    b = rng.standard_normal(N).astype(np.float16)
    worst = 0.0
    for act in acts:
        kernel = tilelang.compile(linear(M, N, K, act), out_idx=[-1], target=target)
        y = kernel(x, w, b)
        ref = reference(x, w, b, act)
        err = np.abs(y.astype(np.float64) - ref)
        print(f"linear ({act})  {M}x{N}x{K} float16  target={kernel.target}  max error {err.max():.3e}")
        assert (err <= 2.0 ** -10 * np.abs(ref) + 1e-4).all(), err.max()
        worst = max(worst, float(err.max()))
    return worst


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="fused linear layer from T.macro pieces")
    p.add_argument("--M", type=int, default=300)
    p.add_argument("--N", type=int, default=200)
    p.add_argument("--K", type=int, default=256)
    p.add_argument("--act", choices=ACTIVATIONS, default=None, help="one activation (default: all)")
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.K, args.target, acts=(args.act,) if args.act else ACTIVATIONS)
