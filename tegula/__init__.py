"""tegula: a tile-level GPU kernel language and compiler in pure Python.

``import tegula as tilelang; import tegula.language as T`` runs TileLang kernels unchanged.
"""
from tegula.version import __version__

import dataclasses

from tegula import errors  # noqa: F401
from tegula.jit import JITFunction, compile, jit  # noqa: A004
from tegula.passconfig import PassConfigKey
from tegula.runtime.kernel import JITKernel
from tegula.runtime.profiler import TensorSupplyType
from tegula import layout  # noqa: F401  (tegula.layout.make_swizzled_layout)
from tegula import torch  # noqa: F401  (tegula.torch.op; routes kernel calls inside torch.compile)


def disable_cache() -> None:
    """Neither read nor write the disk cache of compiled kernels in this process."""
    from tegula import config

    config.settings = dataclasses.replace(config.settings, disable_cache=True)


def enable_cache() -> None:
    """Use the disk cache again (undoes :func:`disable_cache`)."""
    from tegula import config

    config.settings = dataclasses.replace(config.settings, disable_cache=False)
from tegula import language  # noqa: F401
from tegula.autotuner import autotune
from tegula.compat.alias import install_tvm_fallback as _install_tvm_fallback
from tegula.compat.datatype import DataType
from tegula.compat.math import cdiv

_install_tvm_fallback()  # `import tvm` means tegula's small namespace only while tegula is `tilelang`

# submodules TileLang programs reach as attributes after ``import tilelang`` (``tilelang.cache.clear_cache()``,
# ``tilelang.math.next_power_of_2``), imported on first use
_LAZY_SUBMODULES = ("cache", "math", "intrinsics", "testing", "profiler", "utils", "carver", "engine", "contrib", "tvm")


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"tegula.{name}")
    raise AttributeError(f"module 'tegula' has no attribute {name!r}")


__all__ = ["jit", "compile", "JITKernel", "JITFunction", "PassConfigKey", "TensorSupplyType", "DataType", "cdiv",
           "disable_cache", "enable_cache", "errors", "language", "layout", "__version__"]
