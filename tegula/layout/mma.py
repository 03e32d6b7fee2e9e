"""Where ``mma.sync`` operands live: which lane of a warp addresses which row for ``ldmatrix``,
and which element of a 16x16 tile each lane's registers hold (the PTX ISA's fragment layouts,
spelled out in ``include/tegula/mma.h`` and ``ldmatrix.h``).

For lane ``l``: ``g = l // 4``, ``t = l % 4``.

- A, a ``16 x kstep`` tile (``kstep`` 16 for 16-bit elements, 32 for 8-bit) stored ``[m, k]``:
  ``ldmatrix.x4`` with lanes 0-15 addressing rows 0-15 at column 0 and lanes 16-31 the same rows
  at column ``kstep / 2`` yields the A fragment. Stored ``[k, m]`` (16-bit only),
  ``ldmatrix.x4.trans`` with lane ``l`` addressing row ``(l // 16) * 8 + l % 8`` at column
  ``(l // 8) % 2 * 8``.
- B, ``kstep x 16`` (two n8 blocks) stored ``[n, k]``: ``ldmatrix.x4``, lane ``l`` addressing row
  ``n = (l // 16) * 8 + l % 8`` at ``k = (l // 8) % 2 * kstep / 2``; registers 0-1 are the B
  fragment of the first n8 block, 2-3 of the second. Stored ``[k, n]`` (16-bit only):
  ``ldmatrix.x4.trans``, lane ``l`` at ``k = (l // 8) % 2 * 8 + l % 8``, ``n = (l // 16) * 8``.
- C of a 16x16 tile, 8 registers (two n8 accumulators of 4): register ``e`` holds row
  ``g + 8 * (e % 4 // 2)``, column ``(e // 4) * 8 + 2 * t + e % 2``.
"""
from __future__ import annotations

from typing import Any

from tegula.ir import dtype as dt
from tegula.layout.shared import swizzled_column

WARP = 32


def micro_size(dtype: Any) -> tuple[int, int, int]:
    """``(m, n, k)`` of the tile one warp computes per ``mma`` step: 16x16x16 for 16-bit
    operands, 16x16x32 for 8-bit ones."""
    d = dt.as_dtype(dtype)
    return (16, 16, 32 if d.bits == 8 else 16)


def a_lane_offsets(lane: Any, kstep: int, stored_km: bool) -> tuple[Any, Any]:
    """``(m, k)`` of the row lane ``lane`` addresses in a ``16 x kstep`` A tile."""
    if stored_km:
        return ((lane // 8) % 2) * 8, (lane // 16) * 8 + lane % 8
    return lane % 16, (lane // 16) * (kstep // 2)


def b_lane_offsets(lane: Any, kstep: int, stored_nk: bool, pair: bool = True) -> tuple[Any, Any]:
    """``(k, n)`` of the row lane ``lane`` addresses in a ``kstep x 16`` B tile (``pair``; one
    n8 block otherwise, loaded with ``ldmatrix.x2``)."""
    nblk = (lane // 16) * 8 if pair else 0
    if stored_nk:
        return ((lane // 8) % 2) * (kstep // 2), nblk + lane % 8
    return ((lane // 8) % 2) * 8 + lane % 8, nblk


def c_coords(lane: Any, e: Any) -> tuple[Any, Any]:
    """Row and column in a 16x16 C tile of register ``e`` (0..7) of lane ``lane``."""
    return lane // 4 + 8 * ((e % 4) // 2), (e // 4) * 8 + 2 * (lane % 4) + e % 2


def swizzle_index(row: Any, col: Any, row_size: int, dtype: Any) -> tuple[Any, Any]:
    """Logical ``(row, col)`` of a shared tile with rows of ``row_size`` elements -> its place in
    tegula's XOR swizzle of 16-byte chunks (:class:`tegula.layout.shared.Swizzled`): the row
    stays, whole chunks move within it. Rows that are not a whole number of chunks stay in
    place."""
    d = dt.as_dtype(dtype)
    row_bytes = int(row_size) * d.bits // 8
    if d.bits > 128 or row_bytes % 16:
        return row, col
    return row, swizzled_column(row, col, row_bytes // 16, 128 // d.bits)
