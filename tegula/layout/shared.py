"""Shared-memory layouts: where each element of a shared tile lives, in elements from its base.

:class:`RowMajor` is the plain layout. :class:`Swizzled` permutes the 16-byte chunks of each row
by XOR with a function of the row, so that the eight 16-byte rows an ``ldmatrix`` (or a warp of
16-byte vector stores) touches fall in different banks. Whole 16-byte chunks move together, so
16-byte vector copies into a swizzled tile stay single accesses.

For a tile whose rows hold ``cpr`` chunks (row bytes / 16)::

    cpr >= 8: chunk c of row r -> (c & ~7) | ((c ^ r) & 7)
    cpr == 4: chunk c of row r -> c ^ ((r >> 1) & 3)
    cpr == 2: chunk c of row r -> c ^ ((r >> 2) & 1)

Leading dimensions beyond the last two (pipeline stages) are laid out one tile after another.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from tegula.ir import expr as E
from tegula.ir.expr import Expr
from tegula.layout.fragment import flatten


def swizzled_column(r: Any, c: Any, cpr: int, chunk: int) -> Any:
    """Where column ``c`` of row ``r`` lands in a swizzled row of ``cpr`` 16-byte chunks of
    ``chunk`` elements (the formulas of the module docstring; ``cpr == 1``: in place). ``r`` and
    ``c`` may be ints or expressions."""
    ch, inner = c // chunk, c % chunk
    if cpr >= 8:
        phys = (ch // 8) * 8 + ((ch % 8) ^ (r % 8))
    elif cpr == 4:
        phys = ch ^ ((r // 2) % 4)
    elif cpr == 2:
        phys = ch ^ ((r // 4) % 2)
    else:
        return c
    return phys * chunk + inner


@dataclass(frozen=True)
class RowMajor:
    shape: tuple[int, ...]

    def offset(self, idx: Sequence[Any]) -> Expr:
        return flatten(idx, self.shape)

    def staged(self, stages: int) -> "RowMajor":
        """``stages`` copies of the tile, one after another."""
        return RowMajor((stages,) + self.shape)

    def describe(self) -> str:
        return f"RowMajor{self.shape}"


@dataclass(frozen=True)
class Swizzled:
    shape: tuple[int, ...]
    elem_bytes: int

    @property
    def chunk(self) -> int:
        """Elements per 16-byte chunk."""
        return 16 // self.elem_bytes

    @property
    def cpr(self) -> int:
        return self.shape[-1] * self.elem_bytes // 16

    def offset(self, idx: Sequence[Any]) -> Expr:
        *lead, r, c = [E.as_expr(i) for i in idx]
        rows, cols = self.shape[-2], self.shape[-1]
        tile = r * cols + swizzled_column(r, c, self.cpr, self.chunk)
        if lead:
            tile = flatten(list(lead), self.shape[:-2]) * (rows * cols) + tile
        return tile

    def describe(self) -> str:
        return f"Swizzled{self.shape}x{self.elem_bytes}B"

    def staged(self, stages: int) -> "Swizzled":
        """``stages`` copies of the tile, one after another."""
        return Swizzled((stages,) + self.shape, self.elem_bytes)

    @staticmethod
    def suits(shape: Sequence[int], elem_bytes: int) -> bool:
        if len(shape) < 2 or elem_bytes > 16:
            return False
        row_bytes = shape[-1] * elem_bytes
        return row_bytes % 32 == 0 and (row_bytes // 16) in (2, 4) or row_bytes % 128 == 0
