"""Elementwise add on the Ascend vector cores (A2/A3 dialect), double-buffered by hand.

Each block takes a block_M x block_N tile; its two vector cores take half the rows each and walk
the columns in chunks of ``chunk`` with two UB buffers per operand: while the vector pipe adds
chunk i, MTE2 loads chunk i + 1 into the other buffer. The flags are written by hand (ids 0/1 per
buffer), so the kernel runs as written; ``auto_sync=True`` instead drops them and lets the
compiler insert its own.

    python examples/ascend/elementwise_add.py          # cpu, ascend-emu:a2a3 and ascend-emu:a5
"""
import numpy as np

import tegula
import tegula.language as T


def elementwise_add(M, N, block_M=64, block_N=128, chunk=32, dtype="float16", hand_sync=True):
    m_num, n_num = M // block_M, N // block_N
    rows, steps = block_M // 2, block_N // chunk

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            a_ub = T.alloc_ub((2, rows, chunk), dtype)
            b_ub = T.alloc_ub((2, rows, chunk), dtype)
            c_ub = T.alloc_ub((2, rows, chunk), dtype)
            row = bx * block_M + vid * rows
            with T.Scope("V"):
                if hand_sync:
                    T.set_flag("v", "mte2", 0)     # both buffers start free
                    T.set_flag("v", "mte2", 1)
                    T.set_flag("mte3", "v", 0)
                    T.set_flag("mte3", "v", 1)
                for i in T.serial(steps):
                    s = i % 2
                    col = by * block_N + i * chunk
                    if hand_sync:
                        T.wait_flag("v", "mte2", s)    # the add of chunk i - 2 is done with buffer s
                    T.copy(A[row, col], a_ub[s, :, :])
                    T.copy(B[row, col], b_ub[s, :, :])
                    if hand_sync:
                        T.set_flag("mte2", "v", s)
                        T.wait_flag("mte2", "v", s)
                        T.wait_flag("mte3", "v", s)    # the store of chunk i - 2 has left c_ub[s]
                    T.tile.add(c_ub[s, :, :], a_ub[s, :, :], b_ub[s, :, :])
                    if hand_sync:
                        T.set_flag("v", "mte2", s)
                        T.set_flag("v", "mte3", s)
                        T.wait_flag("v", "mte3", s)
                    T.copy(c_ub[s, :, :], C[row, col])
                    if hand_sync:
                        T.set_flag("mte3", "v", s)
                if hand_sync:
                    T.wait_flag("v", "mte2", 0)    # drain
                    T.wait_flag("v", "mte2", 1)
                    T.wait_flag("mte3", "v", 0)
                    T.wait_flag("mte3", "v", 1)
    return main


def reference(a, b):
    return a.astype(np.float64) + b.astype(np.float64)


def main(M=128, N=256, target="cpu", seed=None, hand_sync=True):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, N)).astype(np.float16)
    b = rng.standard_normal((M, N)).astype(np.float16)
    cfg = {} if hand_sync else {"tl.ascend_auto_sync": True}
    kernel = tegula.compile(elementwise_add(M, N, hand_sync=hand_sync), target=target, pass_configs=cfg)
    c = np.full((M, N), np.nan, np.float16)
    kernel(a, b, c)
    err = float(np.abs(c.astype(np.float64) - reference(a, b)).max())
    assert err < 4e-3, err
    return err


if __name__ == "__main__":
    for t in ("cpu", "ascend-emu:a2a3", "ascend-emu:a5"):
        print(f"{t}: max error {main(target=t):.2e}")
