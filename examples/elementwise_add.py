"""Element-wise addition: the smallest tile kernel.

Each block owns a ``block_M x block_N`` tile of the output. ``T.Parallel`` says that every element
of the tile is independent; the compiler spreads the iterations over the block's threads and
vectorizes them. The bounds check lets M and N be any size, not only multiples of the tile.

Run it:  python examples/elementwise_add.py [--M 1000 --N 520 --target cpu]
"""
import argparse

import numpy as np

import tegula as tilelang
import tegula.language as T


def elementwise_add(M, N, block_M=32, block_N=64, threads=128, in_dtype="float16", out_dtype="float16"):
    """``C = A + B`` for (M, N) tensors; returns the ``@T.prim_func``."""

    @T.prim_func
    def main(
        A: T.Tensor((M, N), in_dtype),
        B: T.Tensor((M, N), in_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = bx * block_N + j
                if row < M and col < N:
                    C[row, col] = T.Cast(out_dtype, A[row, col] + B[row, col])

    return main


def reference(a, b):
    return a.astype(np.float64) + b.astype(np.float64)


def main(M=1000, N=520, target="auto", seed=None):
    """Run on random inputs, compare with a float64 reference, print and return the max error."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, N)).astype(np.float16)
    b = rng.standard_normal((M, N)).astype(np.float16)
    kernel = tilelang.compile(elementwise_add(M, N), out_idx=[-1], target=target)
    c = kernel(a, b)
    ref = reference(a, b)
    err = np.abs(c.astype(np.float64) - ref)
    print(f"elementwise_add  {M}x{N} float16  target={kernel.target}  max error {err.max():.3e}")
    # the only error is rounding the sum to float16: half an ulp, 2**-11 relative
    assert (err <= 2.0 ** -11 * np.abs(ref) + 1e-7).all(), err.max()
    return float(err.max())


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="element-wise add on tiles")
    p.add_argument("--M", type=int, default=1000)
    p.add_argument("--N", type=int, default=520)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.target)
