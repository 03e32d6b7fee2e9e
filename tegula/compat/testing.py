"""``tilelang.testing``: the decorators and helpers TileLang's test files use.

- ``requires_cuda``, ``requires_cuda_compute_version(major, minor=0, mode="ge")`` and its
  ``_eq / _ge / _gt / _le / _lt`` forms, ``requires_package(name)``: pytest skip marks with the reason;
- ``main()``: run the calling test file under pytest (``if __name__ == "__main__"`` blocks);
- ``set_random_seed(seed)``: Python's, numpy's and torch's generators;
- ``torch_assert_close``: see :func:`tegula.compat.utils.torch_assert_close`;
- ``process_func(func, name=None, **kwargs)`` and ``regression(prefixes)``: performance
  regression scripts: each ``regression_*`` function of the calling module runs, the latencies
  (milliseconds) that ``process_func`` records are printed as a table.
"""
from __future__ import annotations

import importlib.util
import inspect
import operator
import random
import sys
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tegula.compat import device
from tegula.compat.utils import torch_assert_close  # noqa: F401  (re-exported)
from tegula.errors import ArgumentError

_MODES = {"eq": operator.eq, "ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt}


def _skip_unless(condition: bool, reason: str) -> Callable[[Callable], Callable]:
    import pytest

    return pytest.mark.skipif(not condition, reason=reason)


def requires_cuda(func: Optional[Callable] = None) -> Any:
    """Skip the test unless a CUDA GPU is present (``@requires_cuda`` or ``@requires_cuda()``)."""
    mark = _skip_unless(device.cuda_available(), "needs a CUDA GPU")
    return mark if func is None else mark(func)


def requires_cuda_compute_version(major_version: int, minor_version: int = 0,
                                  mode: str = "ge") -> Callable[[Callable], Callable]:
    """Skip the test unless a CUDA GPU is present and its compute capability compares to
    ``major.minor`` as ``mode`` says (``"eq"``, ``"ge"``, ``"gt"``, ``"le"``, ``"lt"``)."""
    if mode not in _MODES:
        raise ArgumentError(f"requires_cuda_compute_version: mode must be one of {', '.join(_MODES)}, "
                            f"got {mode!r}")
    want = (int(major_version), int(minor_version))
    have = device.compute_capability() if device.cuda_available() else None
    if have is None:
        return _skip_unless(False, f"needs a CUDA GPU of compute capability {mode} {want[0]}.{want[1]}")
    return _skip_unless(_MODES[mode](have, want),
                        f"needs compute capability {mode} {want[0]}.{want[1]}, this GPU has "
                        f"{have[0]}.{have[1]}")


def requires_cuda_compute_version_eq(major_version: int, minor_version: int = 0) -> Callable:
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_ge(major_version: int, minor_version: int = 0) -> Callable:
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version: int, minor_version: int = 0) -> Callable:
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_le(major_version: int, minor_version: int = 0) -> Callable:
    return requires_cuda_compute_version(major_version, minor_version, "le")


def requires_cuda_compute_version_lt(major_version: int, minor_version: int = 0) -> Callable:
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_package(*names: str) -> Callable[[Callable], Callable]:
    """Skip the test unless every named package can be imported."""
    missing = [n for n in names if importlib.util.find_spec(n) is None]
    return _skip_unless(not missing, f"needs the package(s) {', '.join(missing)}")


def _not_this_gpu(what: str) -> Callable:
    def deco(func: Optional[Callable] = None) -> Any:
        mark = _skip_unless(False, f"needs {what}; tegula targets NVIDIA GPUs and Ascend NPUs")
        return mark if func is None else mark(func)

    return deco


requires_rocm = requires_cdna = requires_gfx950 = _not_this_gpu("an AMD GPU")
requires_metal = _not_this_gpu("an Apple GPU")


def requires_cuda_or_cdna(func: Optional[Callable] = None) -> Any:
    return requires_cuda(func)


def _caller_globals(depth: int = 2) -> dict:
    frame = sys._getframe(depth)
    return frame.f_globals


def main() -> None:
    """Run the calling file's tests under pytest (with this process's arguments) and exit."""
    import pytest

    path = _caller_globals().get("__file__")
    if path is None:
        raise ArgumentError("tilelang.testing.main() must be called from a test file")
    sys.exit(pytest.main([path, *sys.argv[1:]]))


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's ``random``, numpy's global generator and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)
    if device.cuda_available():
        torch.cuda.manual_seed_all(seed)


# -- performance regression scripts -------------------------------------------------------------
RESULTS: list[tuple[str, float]] = []


def process_func(func: Callable[..., float], name: Optional[str] = None, /, **kwargs: Any) -> float:
    """Call ``func(**kwargs)``, which returns a latency in milliseconds, and record it under
    ``name`` (default: the function's name). Returns the latency."""
    latency = func(**kwargs)
    if not isinstance(latency, (int, float)) or isinstance(latency, bool):
        raise ArgumentError(f"process_func: {getattr(func, '__name__', func)!r} returned "
                            f"{type(latency).__name__}, not a latency in milliseconds")
    RESULTS.append((name or getattr(func, "__name__", "func"), float(latency)))
    return float(latency)


def regression(prefixes: Sequence[str] = ("regression_",), verbose: bool = True) -> list[tuple[str, float]]:
    """Run every function of the calling module whose name starts with one of ``prefixes``
    (each usually calls :func:`process_func`); print and return the recorded latencies."""
    g = _caller_globals()
    start = len(RESULTS)
    for fname, fn in list(g.items()):
        if inspect.isfunction(fn) and fn.__module__ == g.get("__name__") and fname.startswith(tuple(prefixes)):
            fn()
    rows = RESULTS[start:]
    if verbose:
        width = max([len(n) for n, _ in rows] + [4])
        print(f"{'name':<{width}}  latency (ms)")
        for n, t in rows:
            print(f"{n:<{width}}  {t:.4f}")
    return rows
