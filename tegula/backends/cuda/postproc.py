"""Functions that rewrite the generated CUDA source before it is compiled
(``tilelang.engine.callback.register_cuda_postproc_callback``). Each takes ``(source, target)``
and returns the new source; they run in the order registered. While any is registered, built
kernels are not loaded from the tile-IR disk cache (the cache cannot know what they do)."""
from __future__ import annotations

from typing import Any, Callable

Callback = Callable[[str, Any], str]
_CALLBACKS: list[Callback] = []


def register(func: Callback, override: bool = True) -> None:
    """Add ``func``; with ``override`` it replaces the ones registered before."""
    if override:
        _CALLBACKS.clear()
    _CALLBACKS.append(func)


def clear() -> None:
    _CALLBACKS.clear()


def active() -> bool:
    return bool(_CALLBACKS)


def apply(source: str, target: Any) -> str:
    """``source`` after every registered callback."""
    from tegula.errors import CompileError

    for f in _CALLBACKS:
        out = f(source, target)
        if not isinstance(out, str):
            raise CompileError(f"CUDA post-processing callback {getattr(f, '__name__', f)!r} returned "
                               f"{type(out).__name__}, not the source string")
        source = out
    return source
