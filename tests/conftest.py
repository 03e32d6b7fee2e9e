import importlib

import numpy as np
import pytest

# The optional extras (pyproject.toml) and the modules that stand for them: a test marked
# ``@pytest.mark.needs("z3")`` skips, with the extra to install, where the module does not import.
EXTRAS = {
    "z3": "npu",
    "torch": "torch",
    "matplotlib": "vis",
    "cuda.bindings": "cuda",
    "hypothesis": "test",
}


def importable(module: str) -> bool:
    """Whether ``module`` imports here (an extra may be missing, or made unimportable on purpose)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def needs_reason(module: str) -> str:
    """The skip reason of a test that needs ``module``: the module and the extra that brings it."""
    extra = EXTRAS.get(module)
    how = f" (pip install -e '.[{extra}]')" if extra else ""
    return f"needs {module}{how}"


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
