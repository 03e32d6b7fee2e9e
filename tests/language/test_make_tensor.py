"""``T.Tensor([n], T.ptr)`` tables of addresses and ``T.make_tensor``: a grouped gemm whose groups
are separate tensors, on the interpreter, the emulator, compile-only sm_80 / sm_90a and the GPU."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from test_features import target  # noqa: F401 (fixture)

torch = pytest.importorskip("torch")


def grouped_gemm_kernel(G, M, N, K, bm=32, bn=32, bk=32, stages=1):
    @T.prim_func
    def grouped(A_ptrs: T.Tensor([G], T.ptr), B_ptrs: T.Tensor([G], T.ptr), C_ptrs: T.Tensor([G], T.ptr)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), G, threads=128) as (bx, by, g):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            A = T.make_tensor(A_ptrs[g], (M, K), "float16")
            B = T.make_tensor(B_ptrs[g], (K, N), "float16")
            C = T.make_tensor(C_ptrs[g], (M, N), "float16")
            T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, ko * bk], A_s)
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return grouped


def _table(ts):
    return torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64, device=ts[0].device)


@pytest.mark.parametrize("stages", [1, 2])
def test_grouped_gemm_through_address_tables(target, stages):
    G, M, N, K = 3, 64, 96, 64
    func = grouped_gemm_kernel(G, M, N, K, stages=stages)
    if target != "cuda" and tegula.backends.cuda.compiler.available_backends():
        for arch in ("sm_80", "sm_90a"):
            src = tegula.compile(func, target=f"cuda:{arch}").get_kernel_source()
            assert "half_t* const A = (half_t*)(A_ptrs[" in src
    k = tegula.compile(func, target=target)
    dev = "cuda" if target == "cuda" else "cpu"
    a = [torch.randn(M, K, dtype=torch.float16, device=dev) for _ in range(G)]
    b = [torch.randn(K, N, dtype=torch.float16, device=dev) for _ in range(G)]
    c = [torch.full((M, N), float("nan"), dtype=torch.float16, device=dev) for _ in range(G)]
    k(_table(a), _table(b), _table(c))
    for x, y, z in zip(a, b, c):
        ref = x.double().cpu().numpy() @ y.double().cpu().numpy()
        np.testing.assert_allclose(z.double().cpu().numpy(), ref, rtol=2e-2, atol=2e-2)


def test_make_tensor_needs_an_address():
    with pytest.raises(tegula.errors.KernelTypeError, match="must be an element of a T.Tensor") as e:
        @T.prim_func
        def bad(P: T.Tensor([2], "int64"), X: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                A = T.make_tensor(P[0], (4,), "float32")
                X[0] = A[0]
    assert "T.make_tensor(P[0]" in str(e.value)
