"""``tilelang.language.eager``: the names of TileLang's eager (lazy-JIT) frontend module.

``prim_func``, ``macro`` and ``const`` are tegula's own (``T.prim_func``, ``T.macro``, ``T.const``:
``@tegula.jit`` functions that annotate their tensors in the body are tegula's eager style), and
the dtypes are ``T``'s. TileLang's builder classes and annotations (``PrimFunc``, ``JITFunc``,
``Ref``, ``annotate_compile_flags``, ``annotate_pass_configs``) are refusals that say why
(:mod:`tegula.language.surface`). Example::

    from tilelang.language.eager import prim_func, const
"""
from __future__ import annotations

from typing import Any

from tegula.language import surface as _surface
from tegula.language.dtypes import *  # noqa: F401,F403 (the dtype names)
from tegula.language.prim_func import macro, prim_func  # noqa: F401
from tegula.language.proxy import const  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _surface.REFUSED:
        return _surface.refused(name)
    import tegula.language as T

    if hasattr(T, name):  # the dtype names TileLang's module re-exports (T.float8_e8m0fnu, ...)
        return getattr(T, name)
    raise AttributeError(f"module 'tegula.language.eager' has no attribute {name!r}")
