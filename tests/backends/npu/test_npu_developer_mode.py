"""Developer mode on the NPU: alloc_shared / alloc_fragment tiles of an NPU kernel get their memory
(UB, L1, L0A / L0B / L0C) from their uses, as TileLang-Ascend infers them; a tile two uses put in
two memories is an error naming both."""
import inspect

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ScopeError
from tegula.ir.npu import NpuKernel
from tegula.ir.visitor import post_order_visit
from tegula.backends.npu.passes.assign_npu_scopes import assign_npu_scopes

torch = pytest.importorskip("torch")
TARGETS = ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"]
AUTO = {"tl.ascend_auto_sync": True}


def gemm_exp(M, N, K, bm=64, bn=64):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel((M // bm) * (N // bn), is_npu=True) as (cid, vid):
            bx = cid // (N // bn)
            by = cid % (N // bn)
            a = T.alloc_shared((bm, K), "float16")
            b = T.alloc_shared((K, bn), "float16")
            c = T.alloc_fragment((bm, bn), "float32")
            d = T.alloc_shared((bm // 2, bn), "float32")
            w = T.alloc_shared((bm // 2, bn), "float32")
            with T.Scope("C"):
                T.copy(A[bx * bm, 0], a)
                T.copy(B[0, by * bn], b)
                T.gemm_v0(a, b, c, init=True)
                T.copy(c, C[bx * bm, by * bn])
            with T.Scope("V"):
                T.copy(C[bx * bm + vid * bm // 2, by * bn], d)
                T.tile.exp(w, d)
                T.copy(w, C[bx * bm + vid * bm // 2, by * bn])
    return main


def _kernel(func):
    ks = []
    post_order_visit(func.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else None)
    return ks[0]


def test_memories_are_inferred_from_use():
    k = _kernel(assign_npu_scopes(gemm_exp(128, 128, 64)))
    assert {b.name: b.scope for b in k.allocs} == {"a": "l1", "b": "l1", "c": "l0c", "d": "ub", "w": "ub"}
    assert "npu_scope_uses" not in k.annotations


@pytest.mark.parametrize("target", TARGETS)
def test_developer_mode_kernel_runs_against_float64(target):
    M, N, K = 128, 128, 64
    A, B = torch.randn(M, K).half(), torch.randn(K, N).half()
    C = torch.full((M, N), float("nan"))
    tegula.compile(gemm_exp(M, N, K), target=target, pass_configs=AUTO)(A, B, C)
    ref = np.exp(A.double().numpy() @ B.double().numpy())
    np.testing.assert_allclose(C.double().numpy(), ref, rtol=1e-4, atol=1e-4)


def test_mma_operands_get_l0_memories():
    @T.prim_func
    def main(A: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a1 = T.alloc_shared((32, 32), "float16")
            a0 = T.alloc_shared((32, 32), "float16")
            b0 = T.alloc_fragment((32, 32), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A, a1)
            T.copy(a1, a0)
            T.copy(a1, b0)
            T.mma(a0, b0, c, init=True)
            T.copy(c, C)
    k = _kernel(assign_npu_scopes(main))
    assert {b.name: b.scope for b in k.allocs} == {"a1": "l1", "a0": "l0a", "b0": "l0b", "c": "l0c"}
    A = torch.randn(32, 32).half()
    C = torch.full((32, 32), float("nan"))
    tegula.compile(main, target="ascend-emu:a2a3", pass_configs=AUTO)(A, C)
    np.testing.assert_allclose(C.double().numpy(), A.double().numpy() @ A.double().numpy(), rtol=1e-3, atol=1e-3)


def test_a_tile_claimed_for_two_memories_names_both_uses():
    def k(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_shared((64, 64), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.tile.exp(a, a)  # vector use
            T.gemm_v0(a, a, c, init=True)  # cube use
            T.copy(c, C)
    f = T.prim_func(k)
    with pytest.raises(ScopeError) as e:
        tegula.compile(f, target="ascend-emu:a2a3")
    lines, first = inspect.getsourcelines(k)
    vec = first + next(i for i, ln in enumerate(lines) if "# vector use" in ln)
    cube = first + next(i for i, ln in enumerate(lines) if "# cube use" in ln)
    msg = str(e.value)
    assert "'a' is used as UB by T.tile.exp" in msg and "as L1 by T.gemm_v0" in msg
    assert f"line {vec}" in msg and f"line {cube}" in msg
    assert "test_npu_developer_mode.py" in msg


def test_pipelined_cross_interval_is_a_checked_hint():
    from tegula.errors import KernelTypeError
    from tegula.ir.stmt import For

    def build(ci):
        @T.prim_func
        def main(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((1, 64), "float32")
                with T.Scope("V"):
                    for k in T.Pipelined(2, num_stages=2, cross_interval=ci):
                        T.copy(A[vid * 2 + k, 0], a)
                        T.tile.exp(a, a)
                        T.copy(a, B[vid * 2 + k, 0])
        return main
    loops = []
    post_order_visit(build(2).body, lambda n: loops.append(n) if isinstance(n, For) else None)
    assert loops[0].annotations["cross_interval"] == 2
    A = torch.randn(4, 64)
    B = torch.full((4, 64), float("nan"))
    tegula.compile(build(2), target="ascend-emu:a2a3", pass_configs=AUTO)(A, B)
    np.testing.assert_allclose(B.numpy(), np.exp(A.numpy()), rtol=1e-5)
    with pytest.raises(KernelTypeError, match="cross_interval must be a Python int >= 1"):
        build(0)
