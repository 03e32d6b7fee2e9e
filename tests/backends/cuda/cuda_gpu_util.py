"""What the GPU tests of tests/backends/cuda share."""
import pytest


def sm90a_gpu():
    """torch, when an sm_90a GPU is here; skips the test otherwise."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tegula.backends.cuda.compiler import detect_arch

    if detect_arch() != "sm_90a":
        pytest.skip("needs an sm_90a GPU")
    return torch
