"""The CUDA driver API (``cuda.bindings.driver``), loaded once, and the check of its results.

The launcher and the host-side TMA tensor maps call the driver through these.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.errors import TegulaError


class CudaError(TegulaError):
    """A CUDA driver call failed, or no GPU can be used."""


_driver: Any = None


def driver() -> Any:
    """``cuda.bindings.driver``, initialized; raises CudaError when it or a GPU is missing."""
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver as drv
        except ImportError:
            raise CudaError("running a CUDA kernel needs cuda-bindings",
                            hint="pip install 'tegula[cuda]'") from None
        hint = "the kernel was compiled ahead of time; run it on a machine with an NVIDIA GPU and driver"
        try:
            (err,) = drv.cuInit(0)
        except Exception as e:  # the driver library itself is missing
            raise CudaError(f"no usable CUDA GPU: the CUDA driver cannot be loaded ({e})", hint=hint) from None
        if err != drv.CUresult.CUDA_SUCCESS:
            raise CudaError(f"no usable CUDA GPU: cuInit failed with {error_name(drv, err)}", hint=hint)
        _driver = drv
    return _driver


def error_name(drv: Any, err: Any) -> str:
    try:
        e, name = drv.cuGetErrorName(err)
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # a code the driver does not know
        return str(err)


def check(result: Any, what: str, exc: type = CudaError, hint: Optional[str] = None) -> Any:
    """Unpack a driver call's result tuple, raising ``exc`` when its error code is not success."""
    drv = driver()
    err = result[0]
    if err != drv.CUresult.CUDA_SUCCESS:
        raise exc(f"{what} failed: {error_name(drv, err)}", hint=hint)
    if len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]
