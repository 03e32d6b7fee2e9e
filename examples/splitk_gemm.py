"""Split-K GEMM: more blocks for a small M x N by splitting the K loop across blocks.

When M and N are small and K large, a plain GEMM launches too few blocks to fill the GPU. Here the
grid gets a third axis of ``split_k`` blocks per output tile; block ``bz`` sums only its share of
K, and adds its partial tile into C with the tile form of ``T.atomic_add``. C must hold zeros before
the launch (the caller passes it in), and is float32 so that the atomic adds lose little.

Run it:  python examples/splitk_gemm.py [--M 128 --N 96 --K 1000 --split_k 4 --target cpu]
"""
import argparse

import numpy as np

import tegula as tilelang
import tegula.language as T


def splitk_matmul(M, N, K, split_k=4, block_M=64, block_N=64, block_K=32, threads=128,
                  dtype="float16", accum_dtype="float32"):
    """Returns the ``@T.prim_func`` taking (A (M, K), B (K, N), C float32 (M, N), zeroed)."""
    k_per_split = T.ceildiv(K, split_k)  # a Python int: K is known here

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k,
                      threads=threads) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(C_local)
            k_start = bz * k_per_split
            for k in T.Pipelined(T.ceildiv(k_per_split, block_K), num_stages=2):
                k0 = k_start + k * block_K
                T.copy(A[by * block_M, k0], A_shared)
                T.copy(B[k0, bx * block_N], B_shared)
                # columns of A / rows of B that belong to the next split are zeroed here
                for i, j in T.Parallel(block_M, block_K):
                    if k * block_K + j >= k_per_split:
                        A_shared[i, j] = 0
                T.gemm(A_shared, B_shared, C_local)
            T.atomic_add(C[by * block_M:(by + 1) * block_M, bx * block_N:(bx + 1) * block_N], C_local)

    return main


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def main(M=128, N=96, K=1000, split_k=4, target="auto", seed=None):
    """Run on random inputs, print and return the max error."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    kernel = tilelang.compile(splitk_matmul(M, N, K, split_k), target=target)
    c = np.zeros((M, N), dtype=np.float32)
    kernel(a, b, c)
    ref = reference(a, b)
    err = np.abs(c.astype(np.float64) - ref)
    print(f"splitk_gemm  {M}x{N}x{K} split_k={split_k} float16->float32  target={kernel.target}"
          f"  max error {err.max():.3e}")
    # float32 accumulation of K products of magnitude ~1
    assert (err <= 1e-5 * np.abs(ref) + 1e-6 * K).all(), err.max()
    return float(err.max())


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="split-K GEMM with tile atomics")
    p.add_argument("--M", type=int, default=128)
    p.add_argument("--N", type=int, default=96)
    p.add_argument("--K", type=int, default=1000)
    p.add_argument("--split_k", type=int, default=4)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.K, args.split_k, args.target)
