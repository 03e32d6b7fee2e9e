"""GEMM + ReLU in the Ascend 950 dialect (upstream TileLang's ``tilelang.ascend`` names).

``T.Kernel(num_blocks) as bx``; the cube core (``T.Cube()``) runs a ``T.Pipelined`` K loop of
L1 copies and ``T.gemm(..., clear_accum=(k == 0))`` into L0C and writes the tile to a GM
workspace; a cross-core flag hands it to the two vector cores (``T.Vector(vector=2) as sid``),
which each take half the rows into UB (``T.alloc_shared`` is UB here), apply ReLU in a
``T.SimtVF`` ``T.Parallel`` loop and store. Flags between pipes are inserted by the compiler.

    python examples/ascend/gemm_relu_950.py
"""
import numpy as np

import tegula
import tegula.language as T


def gemm_relu(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2):
    n_num = N // block_N
    h = block_M // 2

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             W: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // block_M) * n_num) as bx:
            row, col = bx // n_num * block_M, bx % n_num * block_N
            A_l1 = T.alloc_l1((block_M, block_K), "float16")
            B_l1 = T.alloc_l1((block_K, block_N), "float16")
            C_l0 = T.alloc_l0c((block_M, block_N), "float32")
            c_ub = T.alloc_shared((h, block_N), "float32")
            with T.Cube():
                for k in T.Pipelined(K // block_K, num_stages=num_stages):
                    T.copy(A[row, k * block_K], A_l1)
                    T.copy(B[k * block_K, col], B_l1)
                    T.gemm(A_l1, B_l1, C_l0, clear_accum=(k == 0))
                T.copy(C_l0, W[row, col])
                T.ascend_cross_core_set_flag(2, "PIPE_FIX", 0)
            with T.Vector(vector=2) as sid:
                T.ascend_cross_core_wait_flag(0)
                T.copy(W[row + sid * h, col], c_ub)
                with T.SimtVF(threads=128):
                    for i, j in T.Parallel(h, block_N):
                        c_ub[i, j] = T.max(c_ub[i, j], 0)
                T.copy(c_ub, C[row + sid * h, col])
    return main


def reference(a, b):
    return np.maximum(a.astype(np.float64) @ b.astype(np.float64), 0)


def main(M=128, N=128, K=128, target="cpu", seed=None):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    w = np.zeros((M, N), np.float32)
    c = np.full((M, N), np.nan, np.float32)
    tegula.compile(gemm_relu(M, N, K), target=target)(a, b, w, c)
    ref = reference(a, b)
    err = float(np.abs(c - ref).max() / np.abs(ref).max())
    assert err < 1e-5, err
    return err


if __name__ == "__main__":
    for t in ("cpu", "ascend-emu:a5", "ascend-emu:a2a3"):
        print(f"{t}: max relative error {main(target=t):.2e}")
