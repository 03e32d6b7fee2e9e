"""Flash attention forward on an Ascend AI core group (A2/A3 dialect): the cube computes
S = Q K^T and O_j = P V_j, the two vector cores run the online softmax on half the rows each,
and they hand tiles over through GM workspaces with cross-core flags:

    flag 0  AIC -> AIVs  scores S_j are in W_S
    flag 1  AIVs -> AIC  probabilities P_j are in W_P
    flag 2  AIC -> AIVs  O_j = P_j V_j is in W_O

Flags between the pipes of each core are inserted by the compiler (``tl.ascend_auto_sync``).

    python examples/ascend/flash_attention.py
"""
import math

import numpy as np

import tegula
import tegula.language as T


# AutoSchedule may place each pipe's II window at any offset (docs/ascend-scheduling.md)
OFFSET = {"enable_offset": True}


def flash_attention(S, D, block_M=32, block_N=32, dtype="float16", num_stages=1):
    grid, h = S // block_M, block_M // 2
    scale = 1.0 / math.sqrt(D)

    @T.prim_func
    def main(Q: T.Tensor((S, D), dtype), K: T.Tensor((S, D), dtype), V: T.Tensor((S, D), dtype),
             W_S: T.Tensor((grid, block_M, block_N), "float32"),
             W_P: T.Tensor((grid, block_M, block_N), dtype),
             W_O: T.Tensor((grid, block_M, D), "float32"),
             O: T.Tensor((S, D), dtype)):
        with T.Kernel(grid, is_npu=True) as (cid, vid):
            q_l1 = T.alloc_L1((block_M, D), dtype)
            k_l1 = T.alloc_L1((block_N, D), dtype)
            p_l1 = T.alloc_L1((block_M, block_N), dtype)
            v_l1 = T.alloc_L1((block_N, D), dtype)
            s_l0 = T.alloc_L0C((block_M, block_N), "float32")
            o_l0 = T.alloc_L0C((block_M, D), "float32")
            s_ub = T.alloc_ub((h, block_N), "float32")
            p_ub = T.alloc_ub((h, block_N), dtype)
            o_ub = T.alloc_ub((h, D), "float32")
            acc = T.alloc_ub((h, D), "float32")
            m = T.alloc_ub((h,), "float32")
            m_new = T.alloc_ub((h,), "float32")
            alpha = T.alloc_ub((h,), "float32")
            l = T.alloc_ub((h,), "float32")
            rs = T.alloc_ub((h,), "float32")
            out16 = T.alloc_ub((h, D), dtype)
            with T.Scope("C"):
                T.copy(Q[cid * block_M, 0], q_l1)
                for j in T.Pipelined(S // block_N, num_stages=num_stages, annotations=OFFSET):
                    T.copy(K[j * block_N, 0], k_l1)
                    T.gemm_v0(q_l1, k_l1, s_l0, transpose_B=True, init=True)
                    T.copy(s_l0, W_S[cid, 0, 0])
                    T.set_cross_flag("fix", 0)
                    T.wait_cross_flag(1)
                    T.copy(W_P[cid, 0, 0], p_l1)
                    T.copy(V[j * block_N, 0], v_l1)
                    T.gemm_v0(p_l1, v_l1, o_l0, init=True)
                    T.copy(o_l0, W_O[cid, 0, 0])
                    T.set_cross_flag("fix", 2)
            with T.Scope("V"):
                T.tile.fill(m, -T.infinity("float32"))
                T.tile.fill(l, 0)
                T.tile.fill(acc, 0)
                for j in T.Pipelined(S // block_N, num_stages=num_stages, annotations=OFFSET):
                    T.wait_cross_flag(0)
                    T.copy(W_S[cid, vid * h, 0], s_ub)
                    T.tile.mul(s_ub, s_ub, scale)
                    T.reduce_max(s_ub, m_new, dim=-1)
                    T.tile.max(m_new, m_new, m)
                    T.tile.sub(alpha, m, m_new)
                    T.tile.exp(alpha, alpha)
                    T.tile.copy(m, m_new)
                    T.tile.sub(s_ub, s_ub, m_new)
                    T.tile.exp(s_ub, s_ub)
                    T.reduce_sum(s_ub, rs, dim=-1)
                    T.tile.mul(l, l, alpha)
                    T.tile.add(l, l, rs)
                    T.tile.cast(p_ub, s_ub)
                    T.copy(p_ub, W_P[cid, vid * h, 0])
                    T.set_cross_flag("mte3", 1)
                    T.wait_cross_flag(2)
                    T.copy(W_O[cid, vid * h, 0], o_ub)
                    T.tile.mul(acc, acc, alpha)
                    T.tile.add(acc, acc, o_ub)
                T.tile.div(acc, acc, l)
                T.tile.cast(out16, acc)
                T.copy(out16, O[cid * block_M + vid * h, 0])
    return main


def reference(q, k, v):
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


def main(S=128, D=64, target="cpu", seed=None, block_M=32, block_N=32, num_stages=1):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(3))
    grid = S // block_M
    ws = np.zeros((grid, block_M, block_N), np.float32)
    wp = np.zeros((grid, block_M, block_N), np.float16)
    wo = np.zeros((grid, block_M, D), np.float32)
    o = np.full((S, D), np.nan, np.float16)
    kernel = tegula.compile(flash_attention(S, D, block_M, block_N, num_stages=num_stages), target=target,
                            pass_configs={"tl.ascend_auto_sync": True})
    kernel(q, k, v, ws, wp, wo, o)
    err = float(np.abs(o.astype(np.float64) - reference(q, k, v)).max())
    assert err < 1e-2, err
    return err


if __name__ == "__main__":
    for t in ("cpu", "ascend-emu:a2a3", "ascend-emu:a5"):
        print(f"{t}: max error {main(target=t):.2e}")
