"""The kernels of tests/language/test_kernels.py on the emulator.

Each of those tests runs with ``target="cuda-emu"``: its own float64 check applies, and every
kernel it compiles also runs on the interpreter on copies of the same inputs, whose results the
emulator's must match (bit for bit, or within rounding where sums or mma change the order).
"""
import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tegula

_PATH = Path(__file__).resolve().parents[2] / "language" / "test_kernels.py"
_spec = importlib.util.spec_from_file_location("_language_test_kernels", _PATH)
tk = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tk)  # type: ignore[union-attr]


class _Twin:
    """A kernel compiled for cuda-emu and for the interpreter; calls run both and compare."""

    def __init__(self, func: Any, tol: float, **kw: Any):
        self.emu = tegula.compile(func, target="cuda-emu", **kw)
        self.cpu = tegula.compile(func, target="cpu", **kw)
        self.tol = tol

    def __call__(self, *args: Any) -> Any:
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        want = self.cpu(*copies)
        got = self.emu(*args)
        pairs = list(zip(args, copies))
        if got is not None:
            g = got if isinstance(got, tuple) else (got,)
            w = want if isinstance(want, tuple) else (want,)
            pairs += list(zip(g, w))
        for g, w in pairs:
            if isinstance(g, np.ndarray):
                if self.tol == 0:
                    np.testing.assert_array_equal(g, w)
                else:
                    np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                               rtol=self.tol, atol=self.tol)
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self.emu, name)


class _Tegula:
    """``tegula`` with ``compile`` building twins."""

    def __init__(self, tol: float):
        self.tol = tol

    def compile(self, func: Any, out_idx: Any = None, target: Any = None, **kw: Any) -> _Twin:
        return _Twin(func, self.tol, out_idx=out_idx, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(tegula, name)


# test name -> tolerance against the interpreter (0: bit for bit)
TESTS = {
    "test_gemm_transposes_ragged": 2e-3,
    "test_gemm_int8_int32": 0,
    "test_dynamic_rows_softmax_one_kernel": 1e-6,
    "test_splitk_atomic_tile": 1e-5,
    "test_macro_var_while_and_element_atomic": 1e-5,
    "test_quantize_absmax_rows": 0,
    "test_cumsum_unary_math_and_casts": 1e-5,
    "test_integer_wrap_and_float_to_int_saturation": 0,
}


def _params(name: str) -> list:
    marks = getattr(getattr(tk, name), "pytestmark", [])
    for m in marks:
        if m.name == "parametrize":
            return [dict(zip([a.strip() for a in m.args[0].split(",")], v if isinstance(v, tuple) else (v,)))
                    for v in m.args[1]]
    return [{}]


CASES = [(name, kw) for name in TESTS for kw in _params(name)]


@pytest.mark.parametrize("name, kw", CASES, ids=[f"{n}{'-' + '-'.join(map(str, k.values())) if k else ''}"
                                                 for n, k in CASES])
def test_language_kernel_on_emulator(name, kw, rng, monkeypatch):
    monkeypatch.setattr(tk, "tilelang", _Tegula(TESTS[name]))
    getattr(tk, name)(target="cuda-emu", rng=rng, **kw)


def test_every_target_test_is_covered():
    """A kernel test added to tests/language/test_kernels.py with a ``target`` fixture shows up here."""
    import inspect

    with_target = {n for n, f in vars(tk).items() if n.startswith("test_") and callable(f)
                   and "target" in inspect.signature(f).parameters}
    assert with_target <= set(TESTS), sorted(with_target - set(TESTS))
