"""``tilelang.utils.target``: which target a kernel is built for, as TileLang programs ask it.

``determine_target("auto")`` is the target tegula picks (``TEGULA_TARGET`` when set, else
``"cuda"`` with a usable GPU, else ``"cpu"``); a given target (a tegula string such as
``"cuda:sm_90a"``, or TVM's spelling ``"cuda -arch=sm_90a"`` / ``"llvm"`` / a ``tvm.target.Target``)
comes back as tegula's target string, or as a ``tvm.target.Target`` with ``return_object=True``.
An unknown target is a :class:`tegula.errors.ConfigError`.
"""
from __future__ import annotations

from typing import Any

from tegula.compat.tvm.target import Target as _TvmTarget
from tegula.target import KINDS, gpu_available, parse_target

AVAILABLE_TARGETS = ("auto", *KINDS)
AVALIABLE_TARGETS = AVAILABLE_TARGETS  # TileLang's spelling


def determine_target(target: Any = "auto", return_object: bool = False) -> Any:
    """The target string for ``target`` (see the module docstring); a ``tvm.target.Target``
    when ``return_object``."""
    if isinstance(target, _TvmTarget):
        text = target.tegula_target()
    elif isinstance(target, str) and (" " in target.strip() or target.strip() in ("llvm", "c")):
        text = _TvmTarget(target).tegula_target()
    else:
        text = target
    resolved = str(parse_target(text))
    return _TvmTarget(resolved) if return_object else resolved


def check_cuda_availability() -> bool:
    """True when a CUDA GPU can be used from this process."""
    return gpu_available()


def check_hip_availability() -> bool:
    """False: tegula builds no ROCm kernels."""
    return False


def check_metal_availability() -> bool:
    """False: tegula builds no Metal kernels."""
    return False


def _kind(target: Any) -> str:
    return parse_target(determine_target(target)).kind


def target_is_cuda(target: Any) -> bool:
    """True when ``target`` builds CUDA kernels (``cuda``; ``cuda-emu`` runs them on the CPU)."""
    return _kind(target) in ("cuda", "cuda-emu")


def target_is_hip(target: Any) -> bool:
    """False: tegula has no ROCm target."""
    return False


def target_get_warp_size(target: Any) -> int:
    """32 on tegula's CUDA targets (TileLang's question for ROCm's 64-wide wavefronts)."""
    return 32


# tegula's Ascend machine models -> TileLang-Ascend's platform names (a2a3 models the A3 parts too)
ASCEND_PLATFORMS = {"a2a3": "A3", "a5": "A5"}


def determine_platform(platform: str = "auto") -> str:
    """TileLang-Ascend's platform name ("A2", "A3", "A5"): ``platform`` itself unless "auto", else
    ``TL_PLATFORM`` when set, else the Ascend machine the default target emulates (``ascend-emu:a5``
    gives "A5", ``ascend-emu:a2a3`` "A3"), else "A3" as upstream falls back to."""
    import os

    from tegula import config

    if platform != "auto":
        return platform
    if os.environ.get("TL_PLATFORM"):
        return os.environ["TL_PLATFORM"]
    target = str(config.settings.default_target or "")
    if target.startswith("ascend"):
        return ASCEND_PLATFORMS.get(target.partition(":")[2] or "a2a3", "A3")
    return "A3"
