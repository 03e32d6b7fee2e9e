"""Layouts of Hopper's warpgroup MMA (``wgmma.mma_async``): its accumulator and its shared operands.

:class:`WgmmaLayout` is the accumulator of ``m64nN`` wgmma tiles over an ``M x N`` tile: the
block's warpgroups (4 consecutive warps each) form a ``wgm x wgn`` grid, stacked along M first:
warpgroup ``g`` owns the ``M / wgm`` rows of slab ``g // wgn`` and the ``N / wgn`` columns of slab
``g % wgn``, which it covers with ``MI`` instructions of 64 rows. Warpgroups go along N only where
M has too few 64-row slabs for them (a 64-row tile over 256 threads: decode attention). Inside one
instruction, warp ``w % 4`` of the warpgroup holds 16 rows and every 8-column slice has the
``mma.sync`` m16n8 C layout, so the register numbering is
:class:`~tegula.layout.fragment.MmaLayout`'s and only the warp-to-rows map differs (warp ``w`` of
an ``MmaLayout`` owns ``M / wm`` consecutive rows; here each 64-row slab is dealt over the 4 warps
of a warpgroup). With ``MI == 1`` and ``wgn == 1`` the two layouts coincide.

:class:`WgmmaShared` is the shared-memory layout a wgmma descriptor reads: the tile's contiguous
dimension is cut into blocks of ``W`` elements (the swizzle width: 128, 64 or 32 bytes), each block
an ``rows x W`` array stored after the previous one, with the 16-byte chunks of each row XOR-ed
by the row (the swizzle modes of the PTX ISA's canonical layouts). When the rows are exactly one
block wide this is :class:`~tegula.layout.shared.Swizzled`'s layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tegula.ir import expr as E
from tegula.ir.expr import Expr
from tegula.layout.fragment import MmaLayout, flatten

# swizzle width in bytes -> the mode field of a wgmma matrix descriptor
SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}


@dataclass(frozen=True, eq=False)
class WgmmaLayout(MmaLayout):
    """Accumulator of wgmma ``m64nN`` tiles: ``wm = 4 * wgm`` warps along M, ``wn = wgn``
    warpgroups along N.

    Register ``k = ((mi * NI + ni) * 2 + h) * 2 + c`` of thread ``t`` (warp ``w = t // 32``,
    warpgroup ``g = w // 4``, lane ``l``) holds row
    ``(g // wgn) * M/wgm + mi * 64 + (w % 4) * 16 + h * 8 + l // 4`` and column
    ``(g % wgn) * N/wgn + ni * 8 + (l % 4) * 2 + c``; instruction ``mi`` writes registers
    ``mi * NI * 4 .. (mi + 1) * NI * 4``."""

    def __post_init__(self) -> None:
        assert self.wm % 4 == 0 and self.M % (16 * self.wm) == 0, self
        assert self.N % (8 * self.wn) == 0, self

    @property
    def wgm(self) -> int:
        """Warpgroups along M."""
        return self.wm // 4

    @property
    def wgn(self) -> int:
        """Warpgroups along N."""
        return self.wn

    def warpgroup_origin(self, t: Expr) -> tuple[Expr, Expr]:
        """(first row, first column) of the part of the tile thread ``t``'s warpgroup holds."""
        g = t // 128
        return (g // self.wn) * (self.M // self.wgm), (g % self.wn) * (self.N // self.wn)

    def row_warp_slot(self, t: Expr) -> Expr:
        return (t // 128) % self.wn

    def coords(self, t: Expr, k: int) -> tuple[Expr, ...]:
        mi, ni, h, c = self.split(k)
        warp, lane = t // 32, t % 32
        r0, c0 = self.warpgroup_origin(t)
        i = r0 + (warp % 4) * 16 + (mi * 64 + h * 8) + lane // 4
        j = c0 + (ni * 8 + c) + (lane % 4) * 2
        return (i, j)

    def describe(self) -> str:
        if self.wn == 1:
            return f"WgmmaLayout{(self.M, self.N, self.wgm)}"
        return f"WgmmaLayout{(self.M, self.N, self.wgm, self.wgn)}"

    @staticmethod
    def choose(M: int, N: int, threads: int, n_ok: Any = None) -> Optional["WgmmaLayout"]:
        """The layout for an ``M x N`` accumulator over ``threads`` threads, or None when wgmma
        cannot cover it (whole warpgroups, each a multiple of 64 rows). Warpgroups are stacked
        along M as far as M's 64-row slabs allow, the rest along N; ``n_ok(n)``, when given,
        says whether a warpgroup may own ``n`` columns (what one instruction can cover)."""
        if threads % 128 or N % 8:
            return None
        groups = threads // 128
        for wgm in range(groups, 0, -1):
            wgn = groups // wgm
            if groups % wgm or M % (64 * wgm) or N % (8 * wgn):
                continue
            if n_ok is not None and not n_ok(N // wgn):
                continue
            return WgmmaLayout(M, N, 4 * wgm, wgn)
        return None


@dataclass(frozen=True)
class WgmmaShared:
    """A shared tile ``shape`` (leading dims: pipeline stages) in wgmma's swizzled layout."""

    shape: tuple[int, ...]
    elem_bytes: int

    @property
    def swizzle_bytes(self) -> int:
        return swizzle_width(self.shape[-1] * self.elem_bytes) or 0

    @property
    def W(self) -> int:
        """Elements per row of one swizzle block."""
        return self.swizzle_bytes // self.elem_bytes

    @property
    def chunk(self) -> int:
        return 16 // self.elem_bytes

    def offset(self, idx: Sequence[Any]) -> Expr:
        *lead, r, c = [E.as_expr(i) for i in idx]
        rows, cols = self.shape[-2], self.shape[-1]
        W, ch = self.W, self.chunk
        blk, inner = c // W, c % W
        cc, e = inner // ch, inner % ch
        sw = self.swizzle_bytes
        if sw == 128:
            phys = cc ^ (r % 8)
        elif sw == 64:
            phys = cc ^ ((r // 2) % 4)
        else:
            phys = cc ^ ((r // 4) % 2)
        tile = blk * (rows * W) + r * W + phys * ch + e
        if lead:
            tile = flatten(list(lead), self.shape[:-2]) * (rows * cols) + tile
        return tile

    def block_bytes(self) -> int:
        """Bytes between consecutive blocks of the contiguous dimension."""
        return self.shape[-2] * self.swizzle_bytes

    def describe(self) -> str:
        return f"WgmmaShared{self.shape}x{self.elem_bytes}B/sw{self.swizzle_bytes}"

    @staticmethod
    def suits(shape: Sequence[int], elem_bytes: int) -> bool:
        """True when a tile of ``shape`` can be a wgmma operand in this layout."""
        return len(shape) >= 2 and shape[-2] % 8 == 0 and swizzle_width(shape[-1] * elem_bytes) is not None


def swizzle_width(row_bytes: int) -> Optional[int]:
    """The widest swizzle (128, 64 or 32 bytes) whose width divides a row of ``row_bytes``."""
    for sw in (128, 64, 32):
        if row_bytes % sw == 0:
            return sw
    return None
