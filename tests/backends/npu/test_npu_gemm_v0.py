"""T.gemm_v0 with TileLang-Ascend's meaning: K in L0-sized chunks through ping-pong halves of L0A /
L0B (so operands larger than L0 fit, and every gemm_v0 of a kernel shares them), L0C accumulated
across chunks, and its own pipe flags in kernels that sync by hand."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.ir.npu import Mma, NpuKernel, SetFlag
from tegula.ir.visitor import post_order_visit
from tegula.backends.npu.passes.infer_core_scope import infer_core_scope
from tegula.backends.npu.passes.lower_gemm_v0 import lower_gemm_v0

torch = pytest.importorskip("torch")


def two_gemms(M, K, N, hand_sync):
    """C = (A @ B) @ D with both products on gemm_v0; A (M, K) alone fills L0A when K = 256."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), D: T.Tensor((N, N), "float16"),
             W: T.Tensor((M, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1((M, K), "float16")
            b = T.alloc_L1((K, N), "float16")
            d = T.alloc_L1((N, N), "float16")
            p = T.alloc_L1((M, N), "float16")
            s = T.alloc_L0C((M, N), "float32")
            o = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                T.copy(A, a)
                T.copy(B, b)
                T.copy(D, d)
                if hand_sync:
                    T.barrier_all()
                T.gemm_v0(a, b, s, init=True)
                if hand_sync:
                    T.barrier_all()
                T.copy(s, W)
                if hand_sync:
                    T.barrier_all()
                T.copy(W, p)
                if hand_sync:
                    T.barrier_all()
                T.gemm_v0(p, d, o, init=True)
                if hand_sync:
                    T.barrier_all()
                T.copy(o, C)
    return main


@pytest.mark.parametrize("hand_sync", [True, False])
@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_gemm_v0_operands_larger_than_l0_run_against_float64(hand_sync, arch):
    M, K, N = 128, 512, 128   # A is 128 KB of fp16: twice L0A
    A, B = torch.randn(M, K).half() / 8, torch.randn(K, N).half() / 8
    D = torch.randn(N, N).half() / 8
    W = torch.empty(M, N).half()
    C = torch.full((M, N), float("nan"))
    cfg = {} if hand_sync else {"tl.ascend_auto_sync": True}
    tegula.compile(two_gemms(M, K, N, hand_sync), target=f"ascend-emu:{arch}", pass_configs=cfg)(A, B, D, W, C)
    s = A.double().numpy() @ B.double().numpy()
    ref = s.astype(np.float16).astype(np.float64) @ D.double().numpy()
    np.testing.assert_allclose(C.double().numpy(), ref, rtol=2e-2, atol=2e-2)


def _kernel(f):
    ks = []
    post_order_visit(f.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else None)
    return ks[0]


def test_k_is_split_into_ping_pong_chunks_at_two_halves_of_l0():
    k = _kernel(lower_gemm_v0(infer_core_scope(two_gemms(128, 512, 128, True))))
    mmas = []
    post_order_visit(k.body, lambda n: mmas.append(n) if isinstance(n, Mma) else None)
    # 512 / 128 chunks for the first product, 128 / 128 for the second
    assert len(mmas) == 5
    assert [m.init is True for m in mmas] == [True, False, False, False, True]
    l0a = [b for b in k.allocs if b.scope == "l0a"]
    assert sorted(k.annotations["addresses"][b.name][0] for b in l0a if b.name.startswith("a_")) == [0, 32768]
    assert all(tuple(b.shape) == (128, 128) for b in l0a)
    flags = []
    post_order_visit(k.body, lambda n: flags.append((n.src, n.dst)) if isinstance(n, SetFlag) else None)
    assert ("MTE2", "MTE1") in flags and ("M", "FIX") in flags and ("MTE1", "M") in flags


def test_auto_synced_kernels_get_their_flags_from_insert_sync():
    k = _kernel(lower_gemm_v0(infer_core_scope(two_gemms(128, 512, 128, False)), auto_sync=True))
    flags = []
    post_order_visit(k.body, lambda n: flags.append(n) if isinstance(n, SetFlag) else None)
    assert flags == []
