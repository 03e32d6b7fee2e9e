"""Tiled GEMM, ``C = A @ B``, in both of TileLang's styles.

Each block computes a ``block_M x block_N`` tile of C. It walks K in steps of ``block_K``: copy a
tile of A and a tile of B into shared memory, multiply them into a float32 fragment with ``T.gemm``.
``T.Pipelined(..., num_stages=3)`` lets the copies of step k+1.. overlap the gemm of step k.
``T.use_swizzle`` reorders blocks in panels so that neighbouring blocks share tiles in L2.

- **lazy style**: ``@tilelang.jit(out_idx=[-1])`` on a factory that returns a ``@T.prim_func``;
  ``matmul(M, N, K)`` builds a kernel once per set of arguments and returns it; C is allocated
  by the runtime because it is parameter -1.
- **eager style**: ``@tilelang.jit`` on a function that declares its tensors in the body with shape
  symbols from ``T.const``, allocates C with ``T.empty`` and returns it; calling it with tensors
  compiles (specialized on their shapes) and runs.

Run it:  python examples/gemm.py [--M 512 --N 384 --K 320 --target cpu]
"""
import argparse

import numpy as np

import tegula as tilelang
import tegula.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128,
           dtype="float16", accum_dtype="float32"):
    """Lazy style: returns the ``@T.prim_func`` for (M, K) x (K, N) -> (M, N)."""

    @T.prim_func
    def main(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


@tilelang.jit
def matmul_eager(A, B, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128,
                 dtype=T.float16, accum_dtype=T.float32):
    """Eager style: ``C = matmul_eager(A, B)``; M, N, K come from the tensors' shapes."""
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.use_swizzle(panel_size=10)
        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)
        T.copy(C_local, C[by * block_M, bx * block_N])
    return C


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def tolerance(ref, K):
    """fp16 output of a float32 sum over K products: rounding of the output dominates."""
    return 2.0 ** -10 * np.abs(ref) + 1e-6 * K


def main(M=512, N=384, K=320, target="auto", seed=None):
    """Run both styles on random inputs, print and return the max error."""
    if target == "auto":
        lazy, eager = matmul, matmul_eager
    else:  # the same kernel functions, built for another target
        lazy = tilelang.jit(out_idx=[-1], target=target)(matmul.__wrapped__)
        eager = tilelang.jit(target=target)(matmul_eager.__wrapped__)

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = reference(a, b)
    worst = 0.0
    for style, c in (("lazy", lazy(M, N, K)(a, b)), ("eager", eager(a, b))):
        err = np.abs(c.astype(np.float64) - ref)
        print(f"gemm ({style})  {M}x{N}x{K} float16  max error {err.max():.3e}")
        assert (err <= tolerance(ref, K)).all(), err.max()
        worst = max(worst, float(err.max()))
    return worst


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="tiled GEMM, lazy and eager styles")
    p.add_argument("--M", type=int, default=512)
    p.add_argument("--N", type=int, default=384)
    p.add_argument("--K", type=int, default=320)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.K, args.target)
