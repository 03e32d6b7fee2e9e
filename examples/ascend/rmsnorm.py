"""RMSNorm on the Ascend vector cores (A2/A3 dialect): y = x / sqrt(mean(x^2) + eps) * w.

Each vector core normalizes half of the block's rows in fp32: square, ``T.reduce_sum`` per row,
scale, add eps, ``T.tile.rsqrt``, then a per-row multiply and a multiply by the weight (copied
into every row of a UB tile). The compiler inserts the flags.

    python examples/ascend/rmsnorm.py
"""
import numpy as np

import tegula
import tegula.language as T


def rmsnorm(M, N, block_M=16, eps=1e-6, dtype="float16"):
    rows = block_M // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((1, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, vid):
            x16 = T.alloc_ub((rows, N), dtype)
            w16 = T.alloc_ub((rows, N), dtype)
            x = T.alloc_ub((rows, N), "float32")
            w = T.alloc_ub((rows, N), "float32")
            sq = T.alloc_ub((rows, N), "float32")
            r = T.alloc_ub((rows,), "float32")
            row = cid * block_M + vid * rows
            with T.Scope("V"):
                T.copy(X[row, 0], x16)
                for i in T.serial(rows):
                    T.copy(W[0, 0], w16[i, :])
                T.tile.cast(x, x16)
                T.tile.cast(w, w16)
                T.tile.mul(sq, x, x)
                T.reduce_sum(sq, r, dim=-1)
                T.tile.mul(r, r, 1.0 / N)
                T.tile.add(r, r, eps)
                T.tile.rsqrt(r, r)
                T.tile.mul(x, x, r)
                T.tile.mul(x, x, w)
                T.tile.cast(x16, x)
                T.copy(x16, Y[row, 0])
    return main


def reference(x, w, eps=1e-6):
    x, w = x.astype(np.float64), w.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def main(M=64, N=128, target="cpu", seed=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((M, N)).astype(np.float16)
    w = rng.standard_normal((1, N)).astype(np.float16)
    kernel = tegula.compile(rmsnorm(M, N), target=target, pass_configs={"tl.ascend_auto_sync": True})
    y = np.full((M, N), np.nan, np.float16)
    kernel(x, w, y)
    ref = reference(x, w)
    err = float(np.abs(y.astype(np.float64) - ref).max() / np.abs(ref).max())
    assert err < 2e-3, err
    return err


if __name__ == "__main__":
    for t in ("cpu", "ascend-emu:a2a3", "ascend-emu:a5"):
        print(f"{t}: max relative error {main(target=t):.2e}")
