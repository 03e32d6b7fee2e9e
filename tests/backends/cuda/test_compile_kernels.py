"""The kernels of tests/language/test_kernels.py compile for sm_80 and sm_90a (no GPU needed):
each test runs on the interpreter as usual, and every kernel it builds is also compiled for CUDA."""
import importlib.util
import inspect
from pathlib import Path
from typing import Any

import pytest

import tegula
from tegula import config
from tegula.backends.cuda.compiler import available_backends

pytestmark = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")

_PATH = Path(__file__).resolve().parents[2] / "language" / "test_kernels.py"
_spec = importlib.util.spec_from_file_location("_language_test_kernels_cuda", _PATH)
tk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tk)  # type: ignore[union-attr]


class _AlsoCuda:
    """``tegula`` whose ``compile`` also builds the kernel for both CUDA archs."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def compile(self, func: Any, out_idx: Any = None, target: Any = None, **kw: Any) -> Any:
        for arch in ("sm_80", "sm_90a"):
            k = tegula.compile(func, out_idx=out_idx, target=f"cuda:{arch}", **kw)
            assert "__global__" in k.get_kernel_source() and k.artifact.cubin
            self.built.append(arch)
        return tegula.compile(func, out_idx=out_idx, target="cpu", **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(tegula, name)


NAMES = sorted(n for n, f in vars(tk).items() if n.startswith("test_") and callable(f)
               and "target" in inspect.signature(f).parameters)


def _params(name: str) -> list:
    for m in getattr(getattr(tk, name), "pytestmark", []):
        if m.name == "parametrize":
            keys = [a.strip() for a in m.args[0].split(",")]
            return [dict(zip(keys, v if isinstance(v, tuple) else (v,))) for v in m.args[1]]
    return [{}]


CASES = [(n, kw) for n in NAMES for kw in _params(n)]


@pytest.mark.parametrize("name, kw", CASES, ids=[f"{n}-{'-'.join(map(str, k.values()))}" for n, k in CASES])
def test_language_kernel_compiles_for_cuda(name, kw, rng, monkeypatch, tmp_path):
    shim = _AlsoCuda()
    monkeypatch.setattr(tk, "tilelang", shim)
    with config.override(cache_dir=str(tmp_path)):
        getattr(tk, name)(target="cpu", rng=rng, **kw)
    assert shim.built, "the test built no kernel"
