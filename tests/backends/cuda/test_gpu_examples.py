"""Every example on the GPU: checked by the example itself against float64, and against the
interpreter on the same inputs. Needs an NVIDIA GPU (``pytest -m gpu``)."""
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


@pytest.fixture(scope="module", autouse=True)
def _need_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")


def ex(name):
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


@pytest.mark.parametrize("M, N", [(64, 64), (100, 70), (1, 3)])
def test_elementwise_add(M, N):
    ex("elementwise_add").main(M, N, target="cuda")


@pytest.mark.parametrize("M, N", [(64, 128), (45, 96), (3, 1024)])
def test_softmax(M, N):
    ex("softmax").main(M, N, target="cuda")


@pytest.mark.parametrize("M, N, K", [(128, 128, 64), (200, 130, 70), (256, 256, 256)])
def test_gemm(M, N, K):
    ex("gemm").main(M, N, K, target="cuda")


@pytest.mark.parametrize("seq", [64, 300])
def test_flash_attention(seq):
    ex("flash_attention").main(1, 4, seq, 64, target="cuda")


def test_rmsnorm():
    ex("rmsnorm").main(100, 512, target="cuda")


@pytest.mark.parametrize("name", ["gemm_int8", "splitk_gemm", "quantize", "linear_macro"])
def test_other_examples(name):
    ex(name).main(target="cuda")


def test_cuda_matches_interpreter_bitwise_inputs():
    """Same random inputs through both targets: fp32-accumulated gemm results agree closely."""
    import tegula

    g = ex("gemm")
    prim = g.matmul.get_tir(192, 160, 96, 64, 64, 32)
    rng = np.random.default_rng()
    a = rng.standard_normal((192, 96)).astype(np.float16)
    b = rng.standard_normal((96, 160)).astype(np.float16)
    c_cpu = tegula.compile(prim, out_idx=[-1], target="cpu")(a, b)
    c_gpu = tegula.compile(prim, out_idx=[-1], target="cuda")(a, b)
    np.testing.assert_allclose(c_gpu.astype(np.float64), c_cpu.astype(np.float64), rtol=2e-3, atol=2e-3)
