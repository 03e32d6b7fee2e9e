"""GEMM on the Ascend cube core (A2/A3 dialect): C = A @ B, fp16 in, fp32 accumulation in L0C.

Per block one block_M x block_N tile of C: the K loop loads A and B tiles into L1 (MTE2, ND ->
NZ), ``T.gemm_v0`` moves them to L0A / L0B (MTE1) and multiplies on the cube (M), and FixPipe
writes C back (NZ -> ND, fp32 -> fp16). No flag is written by hand: InsertSync
(``tl.ascend_auto_sync``) orders the pipes, with loop-carried flags pre-armed and drained.

    python examples/ascend/gemm.py
    python -m tegula trace examples/ascend/gemm.py --kernel gemm --set M=128 --set N=128 \
        --set K=128 --target ascend-emu:a2a3             # the pipeline, pass by pass
"""
import numpy as np

import tegula
import tegula.language as T


def gemm(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float32",
         num_stages=1, versions=None, out_dtype=None):
    m_num, n_num = M // block_M, N // block_N

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype or dtype)):
        with T.Kernel(m_num * n_num, is_npu=True) as (cid, vid):
            bx = cid // n_num
            by = cid % n_num
            A_L1 = T.alloc_L1((block_M, block_K), dtype)
            B_L1 = T.alloc_L1((block_K, block_N), dtype)
            C_L0 = T.alloc_L0C((block_M, block_N), accum_dtype)
            if versions is not None:   # (A_L1, B_L1) versions instead of num_stages of each
                T.annotate_buffer_versions({A_L1: versions[0], B_L1: versions[1]})
            with T.Scope("C"):
                for k in T.Pipelined(K // block_K, num_stages=num_stages):
                    T.copy(A[bx * block_M, k * block_K], A_L1)
                    T.copy(B[k * block_K, by * block_N], B_L1)
                    T.gemm_v0(A_L1, B_L1, C_L0, init=(k == 0))
                T.copy(C_L0, C[bx * block_M, by * block_N])
    return main


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def main(M=128, N=128, K=128, target="cpu", seed=None, num_stages=1):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    kernel = tegula.compile(gemm(M, N, K, num_stages=num_stages), target=target,
                            pass_configs={"tl.ascend_auto_sync": True})
    c = np.full((M, N), np.nan, np.float16)
    kernel(a, b, c)
    ref = reference(a, b)
    err = float(np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max())
    assert err < 2e-3, err
    return err


if __name__ == "__main__":
    for t in ("cpu", "ascend-emu:a2a3", "ascend-emu:a5"):
        print(f"{t}: max relative error {main(target=t):.2e}")
