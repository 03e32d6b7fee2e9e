"""How many threads numpy's BLAS uses while the host backends (interpreter, emulator) run a kernel.

Their matrix products are tile-sized (a 128x128x32 ``T.gemm``, a batch of m16n8k16 ``mma``): one
thread computes them in a fraction of a millisecond, and OpenBLAS's worker threads only add
hand-off costs. On a machine whose cores are busy (parallel test jobs, other users) the workers
spin waiting for a core, and a tile product becomes ten times slower or worse. So while a kernel
runs, BLAS is held to ``config.settings.blas_threads`` threads (``TEGULA_BLAS_THREADS``, default 1;
0 leaves BLAS alone) and given back its previous count afterwards; host code between kernel calls
keeps its own setting.

The thread count is set through OpenBLAS's ``openblas_set_num_threads`` (also under the symbol
names of the ``scipy-openblas`` builds numpy ships), found in the shared objects this process has
loaded. Without OpenBLAS (another BLAS, or a platform without ``/proc/self/maps``) nothing changes.
"""
from __future__ import annotations

import contextlib
import ctypes
from typing import Iterator, Optional

_SUFFIXES = ("scipy_openblas_{}64_", "scipy_openblas_{}", "openblas_{}64_", "openblas_{}")

_found: Optional[tuple] = None   # (get, set) functions, or () when there is no OpenBLAS


def _loaded_openblas() -> list:
    """Paths of the OpenBLAS libraries mapped into this process (Linux ``/proc/self/maps``)."""
    try:
        with open("/proc/self/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if "openblas" in path.rsplit("/", 1)[-1].lower() and path not in paths:
            paths.append(path)
    return paths


def controls() -> tuple:
    """``(get_num_threads, set_num_threads)`` of the OpenBLAS numpy uses, or ``()`` without one."""
    global _found
    if _found is not None:
        return _found
    import numpy  # noqa: F401 (numpy's BLAS must be loaded to be found)

    _found = ()
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for pattern in _SUFFIXES:
            get = getattr(lib, pattern.format("get_num_threads"), None)
            set_ = getattr(lib, pattern.format("set_num_threads"), None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                _found = (get, set_)
                return _found
    return _found


@contextlib.contextmanager
def limited(threads: int) -> Iterator[None]:
    """BLAS uses at most ``threads`` threads inside the block (``threads <= 0``: unchanged)."""
    ctl = controls() if threads > 0 else ()
    if not ctl:
        yield
        return
    get, set_ = ctl
    before = get()
    if before <= threads:
        yield
        return
    set_(threads)
    try:
        yield
    finally:
        set_(before)


def kernel_threads() -> contextlib.AbstractContextManager:
    """The limit a host backend holds while a kernel runs (``config.settings.blas_threads``)."""
    from tegula import config

    return limited(config.settings.blas_threads)
