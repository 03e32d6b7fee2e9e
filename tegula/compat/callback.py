"""``tilelang.engine.callback``: rewrite the generated CUDA source before it is compiled.

``@register_cuda_postproc_callback`` (with or without parentheses, ``override=`` as keyword)
registers ``func(source, target) -> source``; see :mod:`tegula.backends.cuda.postproc`. The HIP,
C and Metal variants are errors: tegula has no such targets.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

from tegula.backends.cuda import postproc
from tegula.errors import UnsupportedError


def register_cuda_postproc(func: Callable[[str, Any], str], override: bool = True) -> None:
    postproc.register(func, override)


def register_cuda_postproc_callback(func: Union[Callable, bool, None] = None, override: bool = True) -> Any:
    """Decorator: ``@register_cuda_postproc_callback`` or ``@register_cuda_postproc_callback(override=False)``."""
    if callable(func):
        postproc.register(func, override)
        return func
    keep = func if isinstance(func, bool) else override

    def deco(f: Callable[[str, Any], str]) -> Callable[[str, Any], str]:
        postproc.register(f, keep)
        return f

    return deco


def _unsupported(kind: str) -> Callable[..., Any]:
    def register(func: Optional[Callable] = None, override: bool = True) -> Any:
        raise UnsupportedError(f"register_{kind}_postproc_callback: tegula has no {kind} target",
                               hint="use register_cuda_postproc_callback for CUDA source")

    return register


register_hip_postproc_callback = _unsupported("hip")
register_c_postproc_callback = _unsupported("c")
register_metal_postproc_callback = _unsupported("metal")
