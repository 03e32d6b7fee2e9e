"""Interval analysis of integer expressions.

``bound(e, {i: (0, 127)})`` gives inclusive ``(lo, hi)`` such that every value of ``e`` lies in
``[lo, hi]`` when each variable lies in its range, or ``None`` when that cannot be established
(a variable without range, a buffer load, a float). Used to simplify index arithmetic and to
decide which accesses need out-of-bounds guards.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from tegula.ir import expr as E
from tegula.ir.expr import Expr, Var

Interval = tuple[int, int]
VarRanges = Mapping[Var, Interval]


def _as_int(x: Any) -> Optional[int]:
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    if isinstance(x, E.Const) and not x.dtype.is_float:
        return int(x.value)
    return None


def _corners(f: Any, a: Interval, b: Interval) -> Interval:
    vals = [f(x, y) for x in a for y in b]
    return min(vals), max(vals)


def bound(e: Any, var_ranges: Optional[VarRanges] = None,
          leaf: Optional[Callable[[Expr], Optional[Interval]]] = None,
          wrap: bool = False) -> Optional[Interval]:
    """Inclusive ``(lo, hi)`` of integer expression ``e``, or ``None`` when unknown.

    ``var_ranges`` maps variables to inclusive ``(lo, hi)`` pairs of ints (or integer Consts);
    ``leaf`` gives the range of any other node the analysis does not know (a builtin such as the
    thread index), or None. By default operations are exact (no overflow); with ``wrap`` an
    operation whose exact range leaves its dtype's range is unknown (it may wrap to any value),
    which makes the result sound for wrapping integer arithmetic.
    """
    return _Bound(var_ranges or {}, leaf, wrap).of(e)


def dtype_range(d: Any) -> Interval:
    """Inclusive range of the integer dtype ``d``."""
    if d.kind == "uint":
        return 0, 2 ** d.bits - 1
    return -(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1


class _Bound:
    def __init__(self, ranges: VarRanges, leaf: Optional[Callable[[Expr], Optional[Interval]]] = None,
                 wrap: bool = False):
        self.ranges = ranges
        self.leaf = leaf
        self.wrap = wrap

    def of(self, e: Any) -> Optional[Interval]:
        r = self._of(e)
        if r is not None and self.wrap and isinstance(e, (E.BinOp, E.UnaryOp)) and e.dtype.is_int:
            lo, hi = dtype_range(e.dtype)
            if r[0] < lo or r[1] > hi:
                return None
        return r

    def _of(self, e: Any) -> Optional[Interval]:
        v = _as_int(e)
        if v is not None:
            return v, v
        if not isinstance(e, Expr) or e.dtype.is_float:
            return None
        if e.dtype.is_bool:
            return 0, 1
        if isinstance(e, Var):
            r = self.ranges.get(e)
            if r is None:
                return None
            lo, hi = _as_int(r[0]), _as_int(r[1])
            return None if lo is None or hi is None else (lo, hi)
        if isinstance(e, E.BinOp):
            return self.binop(e)
        if isinstance(e, E.UnaryOp) and e.op == "neg":
            a = self.of(e.a)
            return None if a is None else (-a[1], -a[0])
        if isinstance(e, E.Select):
            t, f = self.of(e.then), self.of(e.else_)
            if t is None or f is None:
                return None
            return min(t[0], f[0]), max(t[1], f[1])
        if isinstance(e, E.Cast):
            inner = self.of(e.value)
            if inner is None or not e.to.is_int:
                return None
            lo, hi = dtype_range(e.to)
            return inner if lo <= inner[0] and inner[1] <= hi else None
        return self.leaf(e) if self.leaf is not None else None

    def binop(self, e: E.BinOp) -> Optional[Interval]:
        op = e.op
        a, b = self.of(e.a), self.of(e.b)
        if op == "floormod":
            return self.mod(a, b)
        if a is None or b is None:
            return None
        if op == "add":
            return a[0] + b[0], a[1] + b[1]
        if op == "sub":
            return a[0] - b[1], a[1] - b[0]
        if op == "mul":
            return _corners(lambda x, y: x * y, a, b)
        if op == "min":
            return min(a[0], b[0]), min(a[1], b[1])
        if op == "max":
            return max(a[0], b[0]), max(a[1], b[1])
        if op == "floordiv":
            if b[0] > 0 or b[1] < 0:
                return _corners(lambda x, y: x // y, a, b)
            return None
        if op in ("truncdiv", "div") and a[0] >= 0 and b[0] > 0:
            return _corners(lambda x, y: x // y, a, b)
        if op == "truncmod" and a[0] >= 0 and b[0] > 0:
            return self.mod(a, b)
        if op == "shl" and b[0] >= 0:
            return _corners(lambda x, y: x << y, a, b)
        if op == "shr" and b[0] >= 0:
            return _corners(lambda x, y: x >> y, a, b)
        if op == "bitand" and a[0] >= 0 and b[0] >= 0:
            return 0, min(a[1], b[1])
        return None

    @staticmethod
    def mod(a: Optional[Interval], b: Optional[Interval]) -> Optional[Interval]:
        if b is None or b[0] <= 0:
            return None
        if b[0] == b[1]:
            c = b[0]
            if a is not None and a[0] // c == a[1] // c:
                return a[0] % c, a[1] % c
            return 0, c - 1
        if a is not None and a[0] >= 0 and a[1] < b[0]:
            return a
        return 0, b[1] - 1
