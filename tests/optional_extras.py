"""The optional extras (pyproject.toml) and the modules that stand for them, for tests that need one.

A test marked ``@pytest.mark.needs("z3")`` (tests/conftest.py) skips, naming the extra to install,
where the module does not import. ``tests/torch`` is a folder of tests, not torch: without torch
installed, ``import torch`` would find that folder (``tests/`` is on ``sys.path``) as a namespace
package, so such folders are hidden from imports.
"""
import importlib
import importlib.util
import os
import sys

EXTRAS = {
    "z3": "npu",
    "torch": "torch",
    "matplotlib": "vis",
    "cuda.bindings": "cuda",
    "hypothesis": "test",
}
TESTS = os.path.dirname(os.path.abspath(__file__))


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


def hide_test_folders_named_like_extras() -> None:
    """Make ``import torch`` (or another extra's top-level name) fail when all it would find is a
    folder of these tests, as it does where the extra is not installed."""
    for top in {m.split(".")[0] for m in EXTRAS}:
        if top in sys.modules:
            continue
        spec = importlib.util.find_spec(top)
        places = list(spec.submodule_search_locations or ()) if spec is not None else []
        if spec is not None and spec.origin is None and places and \
                all(os.path.abspath(p).startswith(TESTS + os.sep) for p in places):
            sys.modules[top] = None   # type: ignore[assignment]   (an ImportError on import)
