"""Specialize ``T.Parallel`` loops on masks that hold for the whole tile.

A parallel loop whose body masks with a condition affine in the loop variables (a causal mask,
a ragged tail) usually runs on tiles where the condition holds everywhere. This pass finds such
conditions (let-bound booleans and ``T.if_then_else`` conditions: conjunctions of comparisons),
computes, from the loop's extents, a block-uniform condition under which they hold for every
iteration, and duplicates the loop: the copy taken when that condition holds has the mask
folded away. Nothing changes in meaning; the common tiles do less work.

Before/after::

    for i, j in T.Parallel(128, 64):               if k0 + 63 <= q0:
        keep = k0 + j <= q0 + i                        for i, j in T.Parallel(128, 64):
        S[i, j] = T.if_then_else(keep, S[i, j], -inf)      S[i, j] = S[i, j]
                                                   else:
                                                       for i, j in T.Parallel(128, 64):
                                                           keep = k0 + j <= q0 + i
                                                           S[i, j] = T.if_then_else(keep, S[i, j], -inf)
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.arith.bound import bound
from tegula.arith.simplify import simplify, simplify_stmt
from tegula.ir import expr as E
from tegula.ir.expr import Expr, Var
from tegula.ir.stmt import parallel_nest, For, IfThenElse, LetStmt, PrimFunc, Stmt
from tegula.ir.visitor import Mutator, Visitor, collect_vars, substitute


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, E.BinOp) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]


def uniform_condition(cond: Expr, ranges: dict) -> Optional[Expr]:
    """A condition free of the loop variables in ``ranges`` that implies ``cond`` for every
    value of them, or None when ``cond`` is not a conjunction of affine comparisons."""
    loop_vars = set(ranges)
    parts = []
    for c in _conjuncts(cond):
        if not isinstance(c, E.Compare) or c.op not in ("lt", "le", "gt", "ge") or not c.a.dtype.is_int:
            return None
        d = simplify(c.a - c.b)
        rest = simplify(substitute(d, {v: E.const(0) for v in loop_vars}))
        if set(collect_vars(rest)) & loop_vars:
            return None
        var_part = simplify(d - rest)
        if set(collect_vars(var_part)) - loop_vars:
            return None  # a loop variable multiplied by a runtime value: not affine
        b = bound(var_part, ranges)
        if b is None:
            return None
        lo, hi = b
        if c.op == "lt":
            parts.append(E.compare("lt", rest, -hi))
        elif c.op == "le":
            parts.append(E.compare("le", rest, -hi))
        elif c.op == "gt":
            parts.append(E.compare("gt", rest, -lo))
        else:
            parts.append(E.compare("ge", rest, -lo))
    out: Optional[Expr] = None
    for p in parts:
        out = p if out is None else E.binary("and", out, p)
    return out


class _Masks(Visitor):
    """Conditions of selects and boolean lets in a loop body, with every let resolved (a
    condition on ``q_idx = q0 + i`` is a condition on ``q0 + i``, free of the body's lets)."""

    def __init__(self) -> None:
        self.lets: dict = {}
        self.conds: list[Expr] = []

    def visit_LetStmt(self, s: LetStmt) -> None:
        self.lets[s.var] = substitute(s.value, self.lets)
        if s.value.dtype.is_bool:
            self.conds.append(self.lets[s.var])
        self.generic_visit(s)

    def visit_Select(self, s: E.Select) -> None:
        self.conds.append(substitute(s.cond, self.lets))
        self.generic_visit(s)


def _specialize(loop: For) -> Optional[Stmt]:
    vars_, exts, body = parallel_nest(loop)
    if not all(isinstance(e, int) and e > 0 for e in exts):
        return None
    ranges = {v: (0, e - 1) for v, e in zip(vars_, exts)}
    m = _Masks()
    m.visit(body)
    if not m.conds:
        return None
    always: Optional[Expr] = None
    true_map: dict = {}
    for c in m.conds:
        u = uniform_condition(c, ranges)
        if u is None:
            continue
        always = u if always is None else E.binary("and", always, u)
        true_map[id(c)] = c
    if always is None or isinstance(always, E.Const):
        return None

    class Fold(Mutator):
        """Inside the fast copy: the conditions hold, so selects on them take their first arm."""

        def __init__(self) -> None:
            super().__init__()
            self.lets: dict = {}

        def visit_LetStmt(self, s: LetStmt) -> Any:
            value = substitute(s.value, self.lets)
            if s.value.dtype.is_bool and uniform_condition(value, ranges) is not None:
                self.lets[s.var] = E.const(True)
                return LetStmt(s.var, E.const(True), span=s.span)
            self.lets[s.var] = value
            return self.generic_visit(s)

        def visit_Select(self, s: E.Select) -> Any:
            cond = substitute(s.cond, self.lets)
            if uniform_condition(cond, ranges) is not None:
                return self.visit(s.then)
            return self.generic_visit(s)

    fast = simplify_stmt(_fresh_vars(Fold().visit(loop)))
    return IfThenElse(simplify(always), fast, loop, span=loop.span)


def _fresh_vars(s: Stmt) -> Stmt:
    """A copy whose loop and let variables are new objects, so the two copies of a loop never
    share a variable (later passes may rely on each variable being defined once)."""
    mapping: dict = {}

    class Rename(Mutator):
        def visit_For(self, f: For) -> Any:
            v = mapping.setdefault(f.var, Var(f.var.name, f.var.dtype))
            return For(v, self.visit(f.start), f.extent if isinstance(f.extent, int) else self.visit(f.extent),
                       self.visit(f.body), f.kind, f.step, dict(f.annotations), span=f.span)

        def visit_LetStmt(self, ls: LetStmt) -> Any:
            value = self.visit(ls.value)
            v = mapping.setdefault(ls.var, Var(ls.var.name, ls.var.dtype))
            return LetStmt(v, value, span=ls.span)

        def visit_Var(self, v: Var) -> Any:
            return mapping.get(v, v)

    return Rename().visit(s)


def specialize_masks(func: PrimFunc) -> PrimFunc:
    """Apply the specialization to every parallel loop nest of ``func``."""

    class M(Mutator):
        def visit_For(self, s: For) -> Any:
            if s.kind == "parallel":
                got = _specialize(s)
                return got if got is not None else s
            return self.generic_visit(s)

    return M().visit(func)
