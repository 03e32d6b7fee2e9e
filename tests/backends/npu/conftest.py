import importlib.util
import pathlib

import pytest

ASCEND = pathlib.Path(__file__).resolve().parents[3] / "examples" / "ascend"


@pytest.fixture
def ascend_example():
    """Import examples/ascend/<name>.py as a module."""
    def load(name):
        spec = importlib.util.spec_from_file_location(f"ascend_{name}", ASCEND / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    return load
