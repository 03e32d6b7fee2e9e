"""Layouts: how fragments spread over threads (``fragment``) and how shared tiles are laid out
(``shared``). ``make_swizzled_layout`` is the TileLang-compatible way to ask for a swizzled
shared tile in ``T.annotate_layout``."""
from typing import Any

from tegula.layout.fragment import (FlatLayout, Fragment, MmaLayout, Replicated, RowLayout,
                                    RowsOf)
from tegula.layout.shared import RowMajor, Swizzled


def make_swizzled_layout(buffer: Any) -> Swizzled:
    """The XOR-swizzled layout of a shared ``buffer`` (for ``T.annotate_layout``)."""
    from tegula.errors import KernelTypeError

    shape = tuple(int(d) for d in buffer.shape)
    if not Swizzled.suits(shape, buffer.dtype.itemsize):
        raise KernelTypeError(f"'{buffer.name}' {list(shape)} {buffer.dtype}: a swizzled layout needs "
                              "rows of 32, 64 or a multiple of 128 bytes")
    return Swizzled(shape, buffer.dtype.itemsize)


__all__ = ["Fragment", "MmaLayout", "RowLayout", "FlatLayout", "Replicated", "RowsOf", "RowMajor",
           "Swizzled", "make_swizzled_layout"]
