"""Fragment layouts: how a block-wide register tile is spread over the threads of a block.

A fragment of shape ``S`` with layout ``L`` gives each of ``L.threads`` threads ``L.local_size``
registers. ``L.coords(t, k)`` is the logical coordinate held by register ``k`` of thread ``t``
(every thread holds a full set of registers; an element may be held by several threads: the
layout is then *replicated*). Lowered code walks a fragment by unrolling ``k`` with ``t`` the
thread index, so ``coords`` returns IR expressions in ``t`` for a Python int ``k``.

Layouts here:

- :class:`MmaLayout` the accumulator of ``mma.sync`` m16n8 tiles, warps arranged ``wm x wn``;
- :class:`RowLayout` rows spread over groups of ``tpr`` threads, each holding ``v``-wide vectors
  of its row (memory-bound kernels: softmax, norms);
- :class:`FlatLayout` elements dealt to threads in ``v``-wide vectors, row-major;
- :class:`Replicated` every thread holds every element (tiny tiles, scalars);
- :class:`ColsDivided` a packed tile ``X[i, j // c]`` read along a 2-d layout (4-bit data);
- :class:`RowsOf` the rows of a 2-d layout, replicated over the threads that share a row
  (what a reduction along the last dimension produces).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tegula.ir import expr as E
from tegula.ir.expr import Expr


def _prod(xs: Sequence[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


class Fragment:
    """Base of fragment layouts (see the module docstring)."""

    shape: tuple[int, ...]
    threads: int
    local_size: int

    def coords(self, t: Expr, k: int) -> tuple[Expr, ...]:
        raise NotImplementedError

    def same(self, other: "Fragment") -> bool:
        """True when both layouts put every element in the same (thread, register)."""
        return type(self) is type(other) and self.key() == other.key()

    def key(self) -> tuple:
        raise NotImplementedError

    def rows(self) -> Optional["RowsOf"]:
        """The layout of a reduction of this layout along its last dimension, if supported."""
        return None

    # For reductions along the last dim: the xor masks that reach every thread of the same row
    # inside a warp, and whether partial results must also be combined across warps.
    def row_shuffle_masks(self) -> tuple[int, ...]:
        return ()

    def row_cross_warp(self) -> int:
        """How many warps share one row (1: none)."""
        return 1

    def vec_width(self) -> int:
        """How many consecutive registers (from a multiple of it) hold consecutive elements of
        the last dimension."""
        return 1

    def describe(self) -> str:
        return f"{type(self).__name__}{self.key()}"

    def __repr__(self) -> str:
        return self.describe()


@dataclass(frozen=True, eq=False)
class MmaLayout(Fragment):
    """Accumulator of m16n8 ``mma.sync`` tiles over an ``M x N`` tile, ``wm x wn`` warps.

    Warp ``w`` covers rows ``(w // wn) * M/wm ...`` and columns ``(w % wn) * N/wn ...``. Inside a
    warp, register ``k = ((mi * NI + ni) * 2 + h) * 2 + c`` of lane ``l`` holds row
    ``mi*16 + h*8 + l//4`` and column ``ni*8 + (l%4)*2 + c`` (the PTX ISA's C/D fragment).
    """

    M: int
    N: int
    wm: int
    wn: int

    def __post_init__(self) -> None:
        assert self.M % (16 * self.wm) == 0 and self.N % (8 * self.wn) == 0, self

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (self.M, self.N)

    @property
    def threads(self) -> int:  # type: ignore[override]
        return 32 * self.wm * self.wn

    @property
    def MI(self) -> int:
        return self.M // self.wm // 16

    @property
    def NI(self) -> int:
        return self.N // self.wn // 8

    @property
    def local_size(self) -> int:  # type: ignore[override]
        return self.MI * self.NI * 4

    def split(self, k: int) -> tuple[int, int, int, int]:
        """``k`` -> (mi, ni, h, c)."""
        return k // (self.NI * 4), (k // 4) % self.NI, (k // 2) % 2, k % 2

    def index(self, mi: int, ni: int, h: int, c: int) -> int:
        return ((mi * self.NI + ni) * 2 + h) * 2 + c

    def warp_coords(self, t: Expr) -> tuple[Expr, Expr, Expr]:
        warp = t // 32
        return warp // self.wn, warp % self.wn, t % 32

    def row_warp_slot(self, t: Expr) -> Expr:
        """Which of the ``wn`` warps that share thread ``t``'s rows holds its columns."""
        return (t // 32) % self.wn

    def coords(self, t: Expr, k: int) -> tuple[Expr, ...]:
        mi, ni, h, c = self.split(k)
        wmi, wni, lane = self.warp_coords(t)
        i = wmi * (self.M // self.wm) + (mi * 16 + h * 8) + lane // 4
        j = wni * (self.N // self.wn) + (ni * 8 + c) + (lane % 4) * 2
        return (i, j)

    def key(self) -> tuple:
        return (self.M, self.N, self.wm, self.wn)

    def rows(self) -> "RowsOf":
        return RowsOf(self)

    def row_local(self, k: int) -> int:
        mi, _, h, _ = self.split(k)
        return mi * 2 + h

    def row_shuffle_masks(self) -> tuple[int, ...]:
        return (1, 2)

    def vec_width(self) -> int:
        return 2

    def row_cross_warp(self) -> int:
        return self.wn


@dataclass(frozen=True, eq=False)
class RowLayout(Fragment):
    """An ``R x C`` tile: row ``r`` belongs to the ``tpr`` consecutive threads of group
    ``r % (T/tpr)``; within the row, thread ``l`` of the group holds columns
    ``(q * tpr + l) * v + e`` for ``q < C/(tpr*v)``, ``e < v``. Register
    ``k = (rr * Q + q) * v + e`` holds row ``rr * (T/tpr) + t // tpr``."""

    R: int
    C: int
    T: int
    tpr: int
    v: int

    def __post_init__(self) -> None:
        groups = self.T // self.tpr
        assert self.T % self.tpr == 0 and self.R % groups == 0 and self.C % (self.tpr * self.v) == 0, self

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (self.R, self.C)

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.T

    @property
    def Q(self) -> int:
        return self.C // (self.tpr * self.v)

    @property
    def local_size(self) -> int:  # type: ignore[override]
        return (self.R // (self.T // self.tpr)) * self.Q * self.v

    def split(self, k: int) -> tuple[int, int, int]:
        return k // (self.Q * self.v), (k // self.v) % self.Q, k % self.v

    def coords(self, t: Expr, k: int) -> tuple[Expr, ...]:
        rr, q, e = self.split(k)
        groups = self.T // self.tpr
        i = t // self.tpr + rr * groups
        j = (t % self.tpr) * self.v + (q * self.tpr * self.v + e)
        return (i, j)

    def key(self) -> tuple:
        return (self.R, self.C, self.T, self.tpr, self.v)

    def rows(self) -> "RowsOf":
        return RowsOf(self)

    def row_local(self, k: int) -> int:
        return self.split(k)[0]

    def row_shuffle_masks(self) -> tuple[int, ...]:
        return tuple(1 << b for b in range(min(self.tpr, 32).bit_length() - 1))

    def vec_width(self) -> int:
        return self.v

    def row_cross_warp(self) -> int:
        return max(1, self.tpr // 32)

    @staticmethod
    def choose(R: int, C: int, T: int, elem_bytes: int) -> Optional["RowLayout"]:
        """A row layout for an ``R x C`` tile over ``T`` threads, or None when none fits.

        Prefers the widest vectors, then the most threads per row within one warp (coalesced
        rows, reductions by shuffles only), then rows shared across warps."""
        pows = [1 << b for b in range(T.bit_length()) if T % (1 << b) == 0]
        in_warp = sorted((p for p in pows if p <= 32), reverse=True)
        beyond = [p for p in pows if p > 32]
        for v in sorted({max(1, 16 // elem_bytes), 4, 2, 1}, reverse=True):
            for tpr in in_warp + beyond:
                groups = T // tpr
                if R % groups == 0 and C % (tpr * v) == 0:
                    return RowLayout(R, C, T, tpr, v)
        return None


@dataclass(frozen=True, eq=False)
class FlatLayout(Fragment):
    """Any shape: the row-major elements dealt to ``T`` threads in ``v``-wide vectors:
    register ``k = q * v + e`` of thread ``t`` holds flat element ``(q * T + t) * v + e``."""

    dims: tuple[int, ...]
    T: int
    v: int

    def __post_init__(self) -> None:
        assert _prod(self.dims) % (self.T * self.v) == 0, self

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.dims

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.T

    @property
    def local_size(self) -> int:  # type: ignore[override]
        return _prod(self.dims) // self.T

    def coords(self, t: Expr, k: Any) -> tuple[Expr, ...]:
        k = E.as_expr(k)
        q, e = k // self.v, k % self.v
        flat = t * self.v + (q * self.T * self.v + e)
        return unflatten(flat, self.dims)

    def key(self) -> tuple:
        return (self.dims, self.T, self.v)

    def vec_width(self) -> int:
        return self.v if self.dims[-1] % self.v == 0 else 1

    @staticmethod
    def choose(dims: Sequence[int], T: int, elem_bytes: int) -> Optional["FlatLayout"]:
        n = _prod(dims)
        for v in (max(1, 16 // elem_bytes), 8, 4, 2, 1):
            if n % (T * v) == 0:
                return FlatLayout(tuple(dims), T, v)
        return None


@dataclass(frozen=True, eq=False)
class ColsDivided(Fragment):
    """An ``R x C/c`` tile read as ``X[i, j // c]`` by a parallel loop over ``parent``'s
    ``R x C`` tile (packed data: two 4-bit values per byte). Each thread holds the packed
    elements of the columns its ``parent`` registers hold: register ``k`` is element
    ``(i, j // c)`` of parent register ``k * c``. Needs ``c`` to divide the parent's vector
    width, so that parent registers ``k*c .. k*c + c-1`` are columns ``j .. j + c-1`` of one
    packed element."""

    parent: Any
    c: int

    def __post_init__(self) -> None:
        assert self.parent.vec_width() % self.c == 0 and self.parent.shape[-1] % self.c == 0, self

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (self.parent.shape[0], self.parent.shape[1] // self.c)

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.parent.threads

    @property
    def local_size(self) -> int:  # type: ignore[override]
        return self.parent.local_size // self.c

    def coords(self, t: Expr, k: Any) -> tuple[Expr, ...]:
        i, j = self.parent.coords(t, k * self.c)
        return (i, j // self.c)

    def key(self) -> tuple:
        return (type(self.parent).__name__, self.parent.key(), self.c)

    def vec_width(self) -> int:
        return self.parent.vec_width() // self.c

    @staticmethod
    def of(parent: Fragment, c: int) -> Optional["ColsDivided"]:
        """``parent``'s tile with every ``c`` columns packed into one, or None when ``c`` does
        not divide its vector width."""
        if len(parent.shape) != 2 or c < 2 or parent.vec_width() % c or parent.shape[1] % c:
            return None
        return ColsDivided(parent, c)


@dataclass(frozen=True, eq=False)
class RowsOf(Fragment):
    """The rows of a 2-d ``parent`` layout: register ``r`` of a thread holds the row that
    ``parent`` registers with ``parent.row_local(k) == r`` belong to; replicated over the
    threads sharing that row."""

    parent: Any  # MmaLayout | RowLayout

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return (self.parent.shape[0],)

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.parent.threads

    @property
    def local_size(self) -> int:  # type: ignore[override]
        return max(self.parent.row_local(k) for k in range(self.parent.local_size)) + 1

    def parent_k(self, r: Any) -> Any:
        """A register of the parent in row-local ``r``."""
        p = self.parent
        if isinstance(p, MmaLayout):
            return (r // 2) * (p.NI * 4) + (r % 2) * 2
        return r * p.Q * p.v

    def coords(self, t: Expr, k: int) -> tuple[Expr, ...]:
        return (self.parent.coords(t, self.parent_k(k))[0],)

    def key(self) -> tuple:
        # which thread holds which row does not depend on the parent's columns
        p = self.parent
        if isinstance(p, MmaLayout):
            return (type(p).__name__, p.M, p.wm, p.wn)
        return ("row", p.R, p.T, p.tpr)


@dataclass(frozen=True, eq=False)
class Replicated(Fragment):
    """Every thread holds the whole tile: register ``k`` is flat element ``k`` (tiny tiles)."""

    dims: tuple[int, ...]
    T: int

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return self.dims

    @property
    def threads(self) -> int:  # type: ignore[override]
        return self.T

    @property
    def local_size(self) -> int:  # type: ignore[override]
        return _prod(self.dims)

    def coords(self, t: Expr, k: Any) -> tuple[Expr, ...]:
        if isinstance(k, int):
            return tuple(E.const(c) for c in _unravel(k, self.dims))
        return unflatten(E.as_expr(k), self.dims)

    def key(self) -> tuple:
        return (self.dims, self.T)


def _unravel(k: int, dims: Sequence[int]) -> list[int]:
    out = []
    for d in reversed(dims):
        out.append(k % d)
        k //= d
    return list(reversed(out))


def unflatten(flat: Expr, dims: Sequence[int]) -> tuple[Expr, ...]:
    """Row-major coordinates of flat index ``flat`` in ``dims``."""
    out: list[Expr] = []
    rest = flat
    for d in reversed(dims[1:]):
        out.append(rest % d)
        rest = rest // d
    out.append(rest)
    return tuple(reversed(out))


def flatten(idx: Sequence[Any], dims: Sequence[Any]) -> Expr:
    """Row-major flat offset of ``idx`` in ``dims``."""
    off: Any = E.as_expr(idx[0])
    for i, d in zip(idx[1:], dims[1:]):
        off = off * d + i
    return off


def mma_warps(M: int, N: int, warps: int, policy: str) -> Optional[tuple[int, int]]:
    """Warp grid ``(wm, wn)`` for an ``M x N`` accumulator under a gemm policy, or None."""
    options = [(wm, warps // wm) for wm in range(1, warps + 1) if warps % wm == 0]
    ok = [(wm, wn) for wm, wn in options if M % (16 * wm) == 0 and N % (8 * wn) == 0]
    if not ok:
        return None
    if policy == "FullRow":
        return max(ok, key=lambda w: w[0])
    if policy == "FullCol":
        return max(ok, key=lambda w: w[1])
    # Square: per-warp tiles as square as possible, ties to more warps along M
    return min(ok, key=lambda w: (abs(M // w[0] - N // w[1]), -w[0]))
