"""``tilelang.jit.adapter``: the names of TileLang's kernel adapters, for programs that import them.

TileLang wraps a compiled kernel library (a ``.so`` its toolchain builds: CANN's for Ascend,
nvcc's for CUDA) in an adapter (``kernel.adapter``, with ``lib_generator.libpath``...). tegula runs
kernels in its own process and builds no such library, so the names import (type annotations and
``isinstance`` checks work) and making one is an :class:`~tegula.errors.UnsupportedError` that
says so.
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError


class BaseKernelAdapter:
    """TileLang's adapter of a compiled kernel library; tegula has no such library."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise UnsupportedError(
            f"tilelang.jit.adapter.{type(self).__name__} wraps a kernel library (.so) that TileLang's "
            "toolchain builds (CANN for Ascend); tegula runs kernels in process and builds none",
            hint="call the kernel (kernel(*tensors)) instead of loading its library; exporting a "
                 "kernel as a library needs TileLang's or Ascend's own software")


class TorchDLPackKernelAdapter(BaseKernelAdapter):
    """TileLang's DLPack adapter (see :class:`BaseKernelAdapter`)."""


class CtypesKernelAdapter(BaseKernelAdapter):
    """TileLang's ctypes adapter (see :class:`BaseKernelAdapter`)."""


class CythonKernelAdapter(BaseKernelAdapter):
    """TileLang's Cython adapter (see :class:`BaseKernelAdapter`)."""


class NVRTCKernelAdapter(BaseKernelAdapter):
    """TileLang's NVRTC adapter (see :class:`BaseKernelAdapter`)."""


__all__ = ["BaseKernelAdapter", "TorchDLPackKernelAdapter", "CtypesKernelAdapter", "CythonKernelAdapter",
           "NVRTCKernelAdapter"]
