"""Out-of-bounds guards for global accesses in ``T.Parallel`` (TileLang's LegalizeSafeMemoryAccess).

Inside a ``T.Parallel`` nest, an element of a global buffer that may lie outside the buffer is
read as the buffer's safe value (0 unless ``T.annotate_safe_value`` gave another) and a store to
it is dropped, so the tail of a ragged tile needs no hand-written ``if``::

    for i in T.Parallel(128):                for i in T.Parallel(128):
        B[bx * 128 + i] = A[bx * 128 + i]  ->    if bx * 128 + i < N:
                                                     B[bx * 128 + i] = T.if_then_else(
                                                         bx * 128 + i < N, A[bx * 128 + i], 0)

A check is left out where the bounds of the loop, block and let variables prove it, or where an
enclosing ``if`` already tests it. The guards are ordinary IR, so every target means the same.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.arith.bound import bound
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad, Expr
from tegula.ir.stmt import BufferStore, For, IfThenElse, LetStmt, Stmt
from tegula.ir.visitor import Mutator


def _conjuncts(c: Expr) -> list[Expr]:
    if isinstance(c, E.BinOp) and c.op == "and":
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


class _Guard(Mutator):
    def __init__(self, ranges: dict, safe_values: dict):
        super().__init__()
        self.ranges = ranges
        self.safe_values = safe_values
        self.known: list[str] = []  # printed conditions of the enclosing ifs

    def in_bounds(self, buf: Buffer, indices: tuple) -> Optional[Expr]:
        checks: list[Expr] = []
        for i, n in zip(indices, buf.shape):
            b = bound(i, self.ranges) if i.dtype.is_int else None
            nb = bound(n, self.ranges) if isinstance(n, Expr) else (n, n)
            if b is None or b[0] < 0:
                checks.append(E.compare("ge", i, 0))
            if b is None or nb is None or b[1] >= nb[0]:
                checks.append(E.compare("lt", i, n))
        checks = [c for c in checks if not (isinstance(c, E.Const) and c.value)
                  and str(c) not in self.known]
        if not checks:
            return None
        cond = checks[0]
        for c in checks[1:]:
            cond = E.binary("and", cond, c)
        return cond

    def visit_For(self, s: For) -> Stmt:
        if isinstance(s.start, E.Const) and isinstance(s.extent, int) and s.extent > 0:
            lo = int(s.start.value)
            hi = lo + (s.extent - 1) * s.step
            self.ranges[s.var] = (min(lo, hi), max(lo, hi))
        return self.generic_visit(s)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        out = self.generic_visit(s)
        b = bound(out.value, self.ranges) if out.value.dtype.is_int else None
        self.ranges.pop(s.var, None)
        if b is not None:
            self.ranges[s.var] = b
        return out

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self.visit(s.cond)
        facts = [str(c) for c in _conjuncts(cond)]
        self.known.extend(facts)
        then = self.visit(s.then)
        del self.known[len(self.known) - len(facts):]
        else_ = self.visit(s.else_) if s.else_ is not None else None
        if cond is s.cond and then is s.then and else_ is s.else_:
            return s
        return IfThenElse(cond, then, else_, span=s.span)

    def visit_BufferLoad(self, e: BufferLoad) -> Expr:
        idx = tuple(self.visit(i) for i in e.indices)
        load = e if all(a is b for a, b in zip(idx, e.indices)) else BufferLoad(e.buffer, idx, span=e.span)
        if e.buffer.scope != "global":
            return load
        cond = self.in_bounds(e.buffer, idx)
        if cond is None:
            return load
        safe = E.cast(e.buffer.dtype, self.safe_values.get(e.buffer, 0))
        return E.Select(cond, load, safe, span=e.span)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        idx = tuple(self.visit(i) for i in s.indices)
        value = self.visit(s.value)
        store = s if value is s.value and all(a is b for a, b in zip(idx, s.indices)) \
            else BufferStore(s.buffer, idx, value, span=s.span)
        if s.buffer.scope != "global":
            return store
        cond = self.in_bounds(s.buffer, idx)
        return store if cond is None else IfThenElse(cond, store, span=s.span)


def guard_global_accesses(loop: Stmt, ranges: dict, safe_values: Optional[dict] = None) -> Any:
    """``loop`` (a ``T.Parallel`` nest) with its global loads and stores guarded (see above).

    ``ranges`` maps variables to inclusive ``(lo, hi)`` bounds known at this point.
    """
    return _Guard(dict(ranges), safe_values or {}).visit(loop)
