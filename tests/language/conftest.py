import pytest

from tegula.target import gpu_available


@pytest.fixture(params=["cpu", "cuda-emu:sm_90a", pytest.param("cuda", marks=pytest.mark.gpu)])
def target(request):
    """The language's kernel tests run on the interpreter, on the emulated Hopper lowering
    (TMA, wgmma, mbarriers checked on the CPU) and, where a GPU is present, on CUDA."""
    if request.param == "cuda" and not gpu_available():
        pytest.skip("no CUDA GPU")
    return request.param
