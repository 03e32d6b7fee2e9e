"""tegula: a tile-level GPU kernel language and compiler in pure Python.

``import tegula as tilelang; import tegula.language as T`` runs TileLang kernels unchanged.
"""
__version__ = "0.1.0"

from tegula import errors  # noqa: F401
from tegula.jit import JITFunction, compile, jit  # noqa: A004
from tegula.passconfig import PassConfigKey
from tegula.runtime.kernel import JITKernel
from tegula import language  # noqa: F401
from tegula.autotuner import autotune

__all__ = ["jit", "compile", "JITKernel", "JITFunction", "PassConfigKey", "errors", "language",
           "__version__"]
