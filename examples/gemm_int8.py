"""Integer GEMM: int8 x int8 -> int32, ``C = A @ B^T``.

Both operands are stored K-major (A is (M, K), B is (N, K)), the layout int8 tensor-core
instructions want; ``transpose_B=True`` tells ``T.gemm`` to use B's rows as columns. Products
accumulate exactly in an int32 fragment, so the result must match the reference bit for bit.

Run it:  python examples/gemm_int8.py [--M 256 --N 192 --K 320 --target cpu]
"""
import argparse

import numpy as np

import tegula as tilelang
import tegula.language as T


def matmul_int8(M, N, K, block_M=64, block_N=64, block_K=64, num_stages=2, threads=128):
    """Returns the ``@T.prim_func`` taking (A int8 (M, K), B int8 (N, K), C int32 (M, N))."""

    @T.prim_func
    def main(
        A: T.Tensor((M, K), "int8"),
        B: T.Tensor((N, K), "int8"),
        C: T.Tensor((M, N), "int32"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "int8")
            B_shared = T.alloc_shared((block_N, block_K), "int8")
            C_local = T.alloc_fragment((block_M, block_N), "int32")

            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


def reference(a, b):
    return a.astype(np.int64) @ b.astype(np.int64).T


def main(M=256, N=192, K=320, target="auto", seed=None):
    """Run on random int8 inputs over the full range, print and return the max error."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (M, K)).astype(np.int8)
    b = rng.integers(-128, 128, (N, K)).astype(np.int8)
    kernel = tilelang.compile(matmul_int8(M, N, K), out_idx=[-1], target=target)
    c = kernel(a, b)
    err = int(np.abs(c.astype(np.int64) - reference(a, b)).max())
    print(f"gemm_int8  {M}x{N}x{K} int8->int32  target={kernel.target}  max error {err}")
    assert c.dtype == np.int32 and err == 0, err
    return float(err)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="int8 GEMM with int32 accumulation")
    p.add_argument("--M", type=int, default=256)
    p.add_argument("--N", type=int, default=192)
    p.add_argument("--K", type=int, default=320)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.K, args.target)
