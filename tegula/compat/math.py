"""``tilelang.math``: integer helpers host code uses to size tiles."""
from __future__ import annotations

from typing import Any


def cdiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for non-negative ints (``(a + b - 1) // b``; IR expressions too)."""
    return (a + b - 1) // b


def next_power_of_2(x: int) -> int:
    """The smallest power of two ``>= x`` (1 for ``x <= 1``)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def prev_power_of_2(x: int) -> int:
    """The largest power of two ``<= x`` (1 for ``x <= 1``)."""
    x = int(x)
    return 1 if x <= 1 else 1 << (x.bit_length() - 1)


def is_power_of_2(x: int) -> bool:
    return int(x) > 0 and int(x) & (int(x) - 1) == 0
