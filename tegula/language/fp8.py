"""``T.fp8`` helpers: the fp8 dtype of this platform (NVIDIA: ``float8_e4m3fn`` / ``float8_e5m2``)."""
from __future__ import annotations

from typing import Any

from tegula.errors import ArgumentError
from tegula.ir import dtype as dt


def determine_fp8_type(fp8_format: str = "e4m3", device: Any = None) -> dt.DType:
    """``T.float8_e4m3fn`` for ``"e4m3"``, ``T.float8_e5m2`` for ``"e5m2"``."""
    if fp8_format == "e4m3":
        return dt.float8_e4m3
    if fp8_format == "e5m2":
        return dt.float8_e5m2
    raise ArgumentError(f"determine_fp8_type: format must be 'e4m3' or 'e5m2', got {fp8_format!r}")


def determine_torch_fp8_type(fp8_format: str = "e4m3", device: Any = None) -> Any:
    """The torch dtype of :func:`determine_fp8_type`."""
    import torch

    return {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[determine_fp8_type(fp8_format).name[-4:]]
