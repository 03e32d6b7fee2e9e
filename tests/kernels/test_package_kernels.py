"""tegula.kernels: the kernels the package builds itself (the demo's, carver's GEMM), on every
target that runs here, against float64; carver's equivalent function is the same GEMM."""
import numpy as np
import pytest

import tegula
from tegula import kernels
from tegula.compat import carver
from tegula.ir.structural import structural_equal

TARGETS = ["cpu", "cuda-emu", "cuda-emu:sm_90a"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("out_dtype", [None, "float32"])
def test_gemm(rng, target, out_dtype):
    M, N, K = 64, 64, 96
    k = tegula.compile(kernels.gemm_kernel(M, N, K, out_dtype=out_dtype), out_idx=[-1], target=target)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.asarray(k(a, b))
    assert c.dtype == np.dtype(out_dtype or "float16")
    np.testing.assert_allclose(c.astype(np.float64), kernels.gemm_reference(a, b), rtol=1e-2,
                               atol=0.05 if out_dtype is None else 1e-3)


@pytest.mark.parametrize("target", TARGETS)
def test_softmax_and_attention(rng, target):
    x = rng.standard_normal((9, 64)).astype(np.float16)
    y = tegula.compile(kernels.softmax_kernel(64), out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(np.asarray(y, np.float64), kernels.softmax_reference(x), atol=2e-3)
    q, kk, v = (rng.standard_normal((1, 1, 80, 64)).astype(np.float16) for _ in range(3))
    o = tegula.compile(kernels.attention_kernel(1, 1, 80, 64), out_idx=[-1], target=target)(q, kk, v)
    np.testing.assert_allclose(np.asarray(o, np.float64), kernels.attention_reference(q, kk, v), atol=5e-3)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_gemm_compiles(arch):
    src = tegula.compile(kernels.gemm_kernel(128, 128, 64, out_dtype="float32"), out_idx=[-1],
                         target=f"cuda:{arch}").get_kernel_source()
    assert "mma" in src or "wgmma" in src


def test_carver_equivalent_function_is_the_package_gemm():
    t = carver.MatmulTemplate(256, 192, 128, "float16", "float32", "float32").with_arch(carver.CUDA("H100"))
    best = t.recommend_hints(1)[0]
    want = kernels.gemm_kernel(256, 192, 128, best.block[0], best.block[1], best.rstep[0], "float16",
                               "float32", "float32")
    assert structural_equal(t.equivalent_function(), want)
