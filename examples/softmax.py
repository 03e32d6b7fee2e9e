"""Row softmax with a dynamic number of rows.

``M = T.dynamic("M")`` makes the row count a symbol bound from the input's shape at call time, so
one compiled kernel serves every batch size. Each block loads ``block_M`` full rows into a fragment,
reduces them to the row maximum with ``T.reduce_max``, exponentiates with ``T.exp2`` (``e**x`` is
``2**(x * log2(e))``), sums with ``T.reduce_sum`` and scales. Rows past the end of the input read
as zero in ``T.copy`` and are dropped when written back.

Run it:  python examples/softmax.py [--M 1000 --N 256 --target cpu]
"""
import argparse
import math

import numpy as np

import tegula as tilelang
import tegula.language as T

LOG2E = math.log2(math.e)


def softmax(N, block_M=8, threads=128, dtype="float16", accum_dtype="float32"):
    """Softmax over the last axis of an (M, N) tensor, M dynamic; returns the ``@T.prim_func``."""
    M = T.dynamic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main(M=1000, N=256, target="auto", seed=None):
    """Run on random inputs (two row counts, one kernel), print and return the max error."""
    rng = np.random.default_rng(seed)
    kernel = tilelang.compile(softmax(N), out_idx=[-1], target=target)
    worst = 0.0
    for rows in (M, M // 3 + 1):
        x = (2.0 * rng.standard_normal((rows, N))).astype(np.float16)
        y = kernel(x)
        err = float(np.abs(y.astype(np.float64) - reference(x)).max())
        print(f"softmax  {rows}x{N} float16  target={kernel.target}  max error {err:.3e}")
        # probabilities are <= 1 and stored in float16: a few ulps of 1.0 at worst
        assert err <= 2e-3, err
        worst = max(worst, err)
    return worst


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="row softmax with a dynamic row count")
    p.add_argument("--M", type=int, default=1000)
    p.add_argument("--N", type=int, default=256)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.target)
