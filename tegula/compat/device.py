"""What the compatibility helpers ask about the GPU in this process: present or not, its
compute capability, name and multiprocessor count (through torch when it is installed, else
through the CUDA driver API). Nothing here needs a GPU: every query has an answer without one."""
from __future__ import annotations

from typing import Optional


def _torch_cuda():  # type: ignore[no-untyped-def]
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda


def cuda_available() -> bool:
    """True when a CUDA GPU can be used from this process."""
    from tegula.target import gpu_available

    return gpu_available()


def compute_capability(device: int = 0) -> Optional[tuple[int, int]]:
    """``(major, minor)`` of GPU ``device``; None without a GPU."""
    c = _torch_cuda()
    if c is not None:
        try:
            major, minor = c.get_device_capability(device)
            return int(major), int(minor)
        except Exception:  # no GPU, or a CPU-only torch
            pass
    from tegula.backends.cuda.compiler import detect_arch

    arch = detect_arch()
    if arch is None:
        return None
    digits = arch[3:].rstrip("a")
    return int(digits[:-1]), int(digits[-1])


def device_name(device: int = 0) -> Optional[str]:
    """The GPU's marketing name (``"NVIDIA H200"``); None without a GPU."""
    c = _torch_cuda()
    if c is not None:
        try:
            return str(c.get_device_name(device))
        except Exception:
            pass
    return None


def multiprocessor_count(device: int = 0) -> Optional[int]:
    """Streaming multiprocessors of GPU ``device``; None without a GPU."""
    c = _torch_cuda()
    if c is not None:
        try:
            return int(c.get_device_properties(device).multi_processor_count)
        except Exception:
            pass
    return None
