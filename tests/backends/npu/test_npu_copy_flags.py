"""TileLang-Ascend's T.copy flags: ``transpose=True`` (an L1 tile loaded into L0B transposed) and
``enable_relu=True`` (the fixpipe's ReLU on the way out of L0C), against a float64 reference on
the interpreter and the emulator."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ScopeError, ShapeError, UnsupportedError

torch = pytest.importorskip("torch")

TARGETS = ["cpu", "ascend-emu:a2a3"]


def gemm_bt(M, N, K, relu):
    """C = relu?(A @ B^T), B given N x K: B^T is made by the L1 -> L0B load."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a1 = T.alloc_L1((M, K), "float16")
            b1 = T.alloc_L1((N, K), "float16")
            a0 = T.alloc_L0A((M, K), "float16")
            b0 = T.alloc_L0B((K, N), "float16")
            c0 = T.alloc_L0C((M, N), "float32")
            with T.Scope("C"):
                T.copy(A, a1)
                T.copy(B, b1)
                T.barrier_all()
                T.copy(a1, a0)
                T.copy(b1, b0, transpose=True)
                T.barrier_all()
                T.mma(a0, b0, c0, init=True)
                T.barrier_all()
                T.copy(c0, C, enable_relu=relu)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("shape", [(32, 64, 48), (32, 32, 32)])
def test_transpose_and_relu_against_float64(target, relu, shape):
    M, N, K = shape
    A, B = torch.randn(M, K).half(), torch.randn(N, K).half()
    C = torch.full((M, N), float("nan"))
    tegula.compile(gemm_bt(M, N, K, relu), target=target)(A, B, C)
    ref = A.double().numpy() @ B.double().numpy().T
    if relu:
        ref = np.maximum(ref, 0)
    np.testing.assert_allclose(C.double().numpy(), ref, rtol=1e-2, atol=1e-2)
    if relu:
        assert (C.numpy() >= 0).all()


def test_transpose_needs_the_transposed_shape():
    with pytest.raises(ShapeError, match="transpose of the 2-d source tile"):
        @T.prim_func
        def main(B: T.Tensor((32, 64), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                b1 = T.alloc_L1((32, 64), "float16")
                b0 = T.alloc_L0B((32, 64), "float16")
                with T.Scope("C"):
                    T.copy(B, b1)
                    T.copy(b1, b0, transpose=True)


def test_relu_needs_an_l0c_source():
    with pytest.raises(ScopeError, match="enable_relu"):
        @T.prim_func
        def main(A: T.Tensor((32, 64), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a1 = T.alloc_L1((32, 64), "float16")
                with T.Scope("C"):
                    T.copy(A, a1, enable_relu=True)


def test_emitters_spell_the_flags():
    src = tegula.compile(gemm_bt(32, 64, 48, True), target="ascendc:a2a3").get_kernel_source()
    assert "fp.quantPre = QuantMode_t::NoQuant; fp.reluEn = true;" in src
    # B^T in L0B: NZ of N x K is ZN of K x N byte for byte, every fractal in order
    assert "LoadData(b0, b1, LoadData2DParams(0, 12, 1, 0, 0, false, 0));" in src
    plain = tegula.compile(gemm_bt(32, 64, 48, False), target="ascendc:a2a3").get_kernel_source()
    assert "reluEn" not in plain
    g = tegula.compile(gemm_bt(32, 64, 48, False), target="ascend-pto:a2a3").get_kernel_source()
    # the L1 tile (64 x 48) read as its 48 x 64 transpose, extracted into L0B as it is declared
    assert "SLayout::ColMajor, 512, PadValue::Zero> srcT; TASSIGN(srcT, 0xc00); TEXTRACT(b0, srcT, 0, 0);" in g
    with pytest.raises(UnsupportedError, match="enable_relu"):
        tegula.compile(gemm_bt(32, 64, 48, True), target="ascend-pto:a2a3").get_kernel_source()
