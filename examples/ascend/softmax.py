"""Row softmax on the Ascend vector cores (A2/A3 dialect): y = exp(x - max) / sum(exp(x - max)).

Each block takes block_M rows, each vector core half of them; the rows are converted to fp32 in
UB, reduced with ``T.reduce_max`` / ``T.reduce_sum`` and combined with per-row ``T.tile`` ops
(a (rows,) operand broadcasts along the row). The compiler inserts the flags.

    python examples/ascend/softmax.py
"""
import numpy as np

import tegula
import tegula.language as T


def softmax(M, N, block_M=16, dtype="float16"):
    rows = block_M // 2

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M // block_M, is_npu=True) as (cid, vid):
            x16 = T.alloc_ub((rows, N), dtype)
            x = T.alloc_ub((rows, N), "float32")
            m = T.alloc_ub((rows,), "float32")
            s = T.alloc_ub((rows,), "float32")
            row = cid * block_M + vid * rows
            with T.Scope("V"):
                T.copy(X[row, 0], x16)
                T.tile.cast(x, x16)
                T.reduce_max(x, m, dim=-1)
                T.tile.sub(x, x, m)
                T.tile.exp(x, x)
                T.reduce_sum(x, s, dim=-1)
                T.tile.div(x, x, s)
                T.tile.cast(x16, x)
                T.copy(x16, Y[row, 0])
    return main


def reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def main(M=64, N=128, target="cpu", seed=None):
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((M, N))).astype(np.float16)
    kernel = tegula.compile(softmax(M, N), target=target, pass_configs={"tl.ascend_auto_sync": True})
    y = np.full((M, N), np.nan, np.float16)
    kernel(x, y)
    err = float(np.abs(y.astype(np.float64) - reference(x)).max())
    assert err < 2e-3, err
    return err


if __name__ == "__main__":
    for t in ("cpu", "ascend-emu:a2a3", "ascend-emu:a5"):
        print(f"{t}: max error {main(target=t):.2e}")
