"""``tilelang.contrib.nvcc``: what TileLang programs ask of it.

- ``get_target_compute_version(target=None)``: the compute capability as ``"major.minor"``
  (``"9.0"`` on an H100/H200): of ``target`` when it names an arch (``"sm_80"``,
  ``"cuda:sm_90a"``, a Target), else of this process's GPU. Raises ConfigError without either.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.compat import device
from tegula.errors import ConfigError


def _arch_of(target: Any) -> Optional[str]:
    arch = getattr(target, "arch", None)
    if arch is None and isinstance(target, str):
        arch = next((p for p in target.replace(":", " ").replace("-arch=", " ").split() if p.startswith("sm_")), None)
    return arch


def get_target_compute_version(target: Any = None) -> str:
    """``"major.minor"`` of ``target``'s arch, else of the GPU in this process."""
    arch = _arch_of(target) if target is not None else None
    if arch:
        digits = arch[3:].rstrip("a")
        if not digits.isdigit() or len(digits) < 2:
            raise ConfigError(f"get_target_compute_version: cannot read a compute version from {target!r}")
        return f"{digits[:-1]}.{digits[-1]}"
    cc = device.compute_capability()
    if cc is None:
        raise ConfigError("get_target_compute_version: no CUDA GPU in this process and no arch given",
                          hint="pass a target that names one, e.g. get_target_compute_version('sm_90a')")
    return f"{cc[0]}.{cc[1]}"


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"9.0"`` -> ``(9, 0)``."""
    try:
        major, minor = str(compute_version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        raise ConfigError(f"parse_compute_version: expected 'major.minor', got {compute_version!r}") from None
