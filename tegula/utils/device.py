"""``tilelang.utils.device``: the device a program runs on, as TileLang programs ask it.

``IS_CUDA`` (a usable GPU), ``IS_NPU`` / ``IS_MPS`` (False: tegula runs Ascend kernels through
its own targets, not ``torch.npu``), ``Event`` (``torch.cuda.Event`` with a GPU, else None),
``get_current_device()``, ``device_synchronize(device)`` and ``get_available_cpu_count()``.
"""
from __future__ import annotations

import os
from typing import Any

from tegula.errors import ConfigError
from tegula.target import gpu_available

IS_CUDA = gpu_available()
IS_NPU = False
IS_MPS = False


def _torch() -> Any:
    import torch

    return torch


Event = _torch().cuda.Event if IS_CUDA else None


def get_current_device() -> Any:
    """The current CUDA device index with a GPU; None without one."""
    return _torch().cuda.current_device() if IS_CUDA else None


def device_synchronize(device: Any = None) -> None:
    """Wait for the GPU (``device``: an index, a ``torch.device`` or a string); a ConfigError
    without a GPU or for a device that is not CUDA."""
    if not IS_CUDA:
        raise ConfigError("device_synchronize: no GPU is available in this process")
    torch = _torch()
    if device is not None and not isinstance(device, int) and torch.device(device).type != "cuda":
        raise ConfigError(f"device_synchronize: {device!r} is not a CUDA device")
    torch.cuda.synchronize(device)


def get_available_cpu_count() -> int:
    """CPU cores this process may run on (its affinity where the OS tells it), at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:
        n = os.cpu_count() or 1
    return max(1, n)
