"""All of tegula's settings, in one typed place.

Environment variables are read here and nowhere else. Tests change settings through
:func:`override`, which restores them on exit::

    with config.override(default_target="cpu"):
        ...
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Iterator, Optional


def _env_bool(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


def _env_str(name: str, default: Optional[str] = None) -> Optional[str]:
    v = os.environ.get(name)
    return v if v not in (None, "") else default


@dataclass
class Settings:
    """Every setting, with the environment variable it is read from."""

    default_target: str = "auto"            # TEGULA_TARGET: "auto", "cpu", "cuda", ...
    cache_dir: str = os.path.join(os.path.expanduser("~"), ".cache", "tegula")  # TEGULA_CACHE_DIR
    disable_cache: bool = False             # TEGULA_DISABLE_CACHE
    verify_ir: bool = False                 # TEGULA_VERIFY: verify the IR after every pass
    trace_dir: Optional[str] = None         # TEGULA_TRACE: dump the IR after every pass here
    cuda_home: Optional[str] = None         # TEGULA_CUDA_HOME (else CUDA_HOME / CUDA_PATH)
    nvcc: Optional[str] = None              # TEGULA_NVCC: the nvcc binary to use
    cuda_backend: str = "auto"              # TEGULA_CUDA_BACKEND: "auto", "nvrtc" or "nvcc"

    @classmethod
    def from_env(cls) -> "Settings":
        return cls(
            default_target=_env_str("TEGULA_TARGET", "auto") or "auto",
            cache_dir=_env_str("TEGULA_CACHE_DIR", cls.cache_dir) or cls.cache_dir,
            disable_cache=_env_bool("TEGULA_DISABLE_CACHE"),
            verify_ir=_env_bool("TEGULA_VERIFY"),
            trace_dir=_env_str("TEGULA_TRACE"),
            cuda_home=_env_str("TEGULA_CUDA_HOME") or _env_str("CUDA_HOME") or _env_str("CUDA_PATH"),
            nvcc=_env_str("TEGULA_NVCC"),
            cuda_backend=_env_str("TEGULA_CUDA_BACKEND", "auto") or "auto",
        )


settings = Settings.from_env()


@contextlib.contextmanager
def override(**changes: Any) -> Iterator[Settings]:
    """Temporarily change settings (unknown names raise ``TypeError``)."""
    global settings
    old = settings
    names = {f.name for f in dataclasses.fields(Settings)}
    for k in changes:
        if k not in names:
            raise TypeError(f"unknown setting {k!r}")
    settings = dataclasses.replace(old, **changes)
    try:
        yield settings
    finally:
        settings = old


def get() -> Settings:
    """The settings in force (read through this function so overrides are seen)."""
    return settings
