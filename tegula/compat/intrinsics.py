"""``tilelang.intrinsics`` of TileLang-Ascend: the fractal layouts of cube-side buffers as
``T.Layout`` objects, for ``T.annotate_layout({l1_buf: make_zn_layout(l1_buf)})``.

A fractal is 16 rows of one 32-byte C0 block (``c0`` elements: 16 for fp16, 8 for fp32, 32 for
int8); both layouts are stated in TileLang-Ascend's documentation as the offset of element
``(i, j)`` of a ``rows x cols`` tile (``round_up(x, n)``: ``x`` rounded up to a multiple of ``n``):

- ``zN``: fractals of 16 rows x ``c0`` columns, stored column of fractals after column of fractals:
  ``(i // 16) * 16 * c0 + (j // c0) * round_up(rows, 16) * c0 + (i % 16) * c0 + j % c0``;
- ``nZ``: fractals of ``c0`` rows x 16 columns, stored row of fractals after row of fractals:
  ``(i // c0) * round_up(cols, 16) * c0 + (j // 16) * 16 * c0 + i % c0 + (j % 16) * c0``.

tegula's NPU pipeline chooses the fractal layout of every L1 / L0 buffer itself
(InferFractalLayout: L1 NZ-ordered as the copy paths need), so an annotation changes where the
elements lie in the layout map the printer shows, never what a kernel computes.
"""
from __future__ import annotations

from typing import Any

from tegula.errors import KernelTypeError
from tegula.ir.dtype import as_dtype

FRACTAL_ROWS = 16
C0_BYTES = 32


def _c0(buf: Any) -> int:
    return C0_BYTES * 8 // as_dtype(buf.dtype).bits


def _round_up(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def _shape2(buf: Any, what: str) -> tuple:
    shape = tuple(int(d) for d in getattr(buf, "shape", ()))
    if len(shape) < 2:
        raise KernelTypeError(f"{what} takes a buffer of at least 2 dimensions, got {buf!r}",
                              hint="pass the L1 / L0 buffer the layout is for")
    return shape


def make_zn_layout(buf: Any) -> Any:
    """The zN fractal layout of ``buf`` (its last two dimensions) as a ``T.Layout``."""
    from tegula.layout.user import Layout

    shape = _shape2(buf, "make_zn_layout")
    c0, rows = _c0(buf), _round_up(shape[-2], FRACTAL_ROWS)

    def fn(*idx: Any) -> list:
        i, j = idx[-2:]
        return [*idx[:-2], (i // FRACTAL_ROWS) * FRACTAL_ROWS * c0 + (j // c0) * rows * c0
                + (i % FRACTAL_ROWS) * c0 + j % c0]
    return Layout(shape, fn, what="make_zn_layout")


def make_nz_layout(buf: Any) -> Any:
    """The nZ fractal layout of ``buf`` (its last two dimensions) as a ``T.Layout``."""
    from tegula.layout.user import Layout

    shape = _shape2(buf, "make_nz_layout")
    c0, cols = _c0(buf), _round_up(shape[-1], FRACTAL_ROWS)

    def fn(*idx: Any) -> list:
        i, j = idx[-2:]
        return [*idx[:-2], (i // c0) * cols * c0 + (j // FRACTAL_ROWS) * FRACTAL_ROWS * c0
                + i % c0 + (j % FRACTAL_ROWS) * c0]
    return Layout(shape, fn, what="make_nz_layout")


def make_col_major_layout(buf: Any) -> Any:
    """Column-major order of ``buf``'s last two dimensions as a ``T.Layout``."""
    from tegula.layout.user import Layout

    shape = _shape2(buf, "make_col_major_layout")
    return Layout(shape, lambda *idx: [*idx[:-2], idx[-1], idx[-2]], what="make_col_major_layout")


__all__ = ["make_zn_layout", "make_nz_layout", "make_col_major_layout"]
