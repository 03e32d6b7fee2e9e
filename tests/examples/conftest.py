import importlib.util
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name: str):
    """Import ``examples/<name>.py`` as module ``tegula_example_<name>`` (examples is no package)."""
    mod_name = f"tegula_example_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def example():
    """``example("gemm")`` is the module examples/gemm.py."""
    return _load


@pytest.fixture
def examples_dir():
    """The examples/ folder (test modules take it from here: ``conftest`` is no importable name)."""
    return EXAMPLES


@pytest.fixture
def seed(rng):
    """A fresh seed per test; it shows in the traceback of a failing call."""
    return int(rng.integers(1 << 31))
