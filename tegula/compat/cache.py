"""``tilelang.cache``: the caches of compiled kernels, as TileLang(-Ascend) programs reach them.

``clear_cache()`` (which most TileLang-Ascend examples call first) empties tegula's disk cache of
compiled kernels; the kernels a ``@jit`` function built in this process stay where they are, as in
TileLang, whose in-memory caches also outlive ``clear_cache``.
"""
from __future__ import annotations


def clear_cache() -> None:
    """Remove every entry of tegula's disk cache of compiled kernels."""
    from tegula.backends.cuda import cache

    cache.clear()


def cache_dir() -> str:
    """The disk cache's directory (``TEGULA_CACHE_DIR``)."""
    from tegula.backends.cuda import cache

    return cache.cache_dir()


__all__ = ["clear_cache", "cache_dir"]
