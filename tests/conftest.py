import numpy as np
import pytest

from optional_extras import hide_test_folders_named_like_extras, importable, needs_reason

hide_test_folders_named_like_extras()


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(*modules): skip unless each optional module imports")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("needs"):
        for module in mark.args:
            if not importable(module):
                pytest.skip(needs_reason(module))


@pytest.fixture
def rng():
    """A fresh generator per test, seeded differently each run (inputs are never fixed)."""
    return np.random.default_rng()


def _gpu_present() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def target(request):
    """Kernel tests run twice: on the interpreter always, on CUDA where a GPU is present."""
    if request.param == "cuda" and not _gpu_present():
        pytest.skip("no CUDA GPU")
    return request.param


@pytest.fixture(autouse=True)
def _poison_outputs_and_verify():
    """Outputs the runtime allocates start as NaN (or a marker), so unwritten elements show; the
    IR is verified after every pass of every pipeline, so a pass that breaks it is named."""
    from tegula import config

    with config.override(poison_outputs=True, verify_ir=True):
        yield
