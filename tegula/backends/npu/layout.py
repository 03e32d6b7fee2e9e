"""Fractal layouts of NPU buffers: where each logical element of a tile lives in its memory.

A 2-d tile of R x C elements is cut into fractals of ``fr`` x ``fc`` elements (16 x C0 for L1,
L0A and L0B, with C0 = 32 bytes / element size; 16 x 16 for L0C), padded to whole fractals. The
name gives the order of fractals, then the order inside one (Z: row-major, N: column-major):

- ``NZ`` (L1, L0C): fractals column by column, each row-major:
  ``[c // fc, r // fr, r % fr, c % fc]``;
- ``ZZ`` (L0A): fractals row by row, each row-major: ``[r // fr, c // fc, r % fr, c % fc]``;
- ``ZN`` (L0B): fractals row by row, each column-major: ``[r // fr, c // fc, c % fc, r % fr]``;
- ``ND`` (UB, GM): row-major, unpadded.

Leading dimensions (buffer versions) stack whole padded tiles.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Fractal:
    kind: str           # "ND", "NZ", "ZZ", "ZN"
    fr: int = 1
    fc: int = 1

    def __str__(self) -> str:
        return self.kind if self.kind == "ND" else f"{self.kind}({self.fr}x{self.fc})"

    def padded(self, shape: tuple) -> tuple:
        """The shape the buffer occupies: the last two dims rounded up to whole fractals."""
        if self.kind == "ND" or len(shape) < 2:
            return tuple(shape)
        r, c = shape[-2:]
        return tuple(shape[:-2]) + (-(-r // self.fr) * self.fr, -(-c // self.fc) * self.fc)

    def numel(self, shape: tuple) -> int:
        return int(np.prod(self.padded(shape)))

    @functools.lru_cache(maxsize=256)
    def index_map(self, shape: tuple) -> np.ndarray:
        """For every logical element of a buffer of ``shape``, its element offset in memory."""
        if self.kind == "ND" or len(shape) < 2:
            return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        R, C = shape[-2:]
        Rp, Cp = self.padded(shape)[-2:]
        r = np.arange(R, dtype=np.int64)[:, None]
        c = np.arange(C, dtype=np.int64)[None, :]
        fr, fc, size = self.fr, self.fc, self.fr * self.fc
        if self.kind == "NZ":
            off = ((c // fc) * (Rp // fr) + r // fr) * size + (r % fr) * fc + c % fc
        elif self.kind == "ZZ":
            off = ((r // fr) * (Cp // fc) + c // fc) * size + (r % fr) * fc + c % fc
        else:  # ZN
            off = ((r // fr) * (Cp // fc) + c // fc) * size + (c % fc) * fr + r % fr
        lead = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        tile = Rp * Cp
        full = np.arange(lead, dtype=np.int64)[:, None, None] * tile + off[None]
        return full.reshape(tuple(shape))


ND = Fractal("ND")
