"""Simplification of expressions by a table of rewrite rules, applied bottom-up to a fixed point.

Each row of :data:`RULES` is a pattern, a rewrite and an optional guard. Patterns are ordinary
expressions over pattern variables (``x``, ``y`` match anything, ``c1``, ``c2`` only constants,
``p`` a condition); a rewrite is either an expression over the same variables or a function that
computes the replacement (``None`` when it does not apply). Integer sums are brought to a
canonical linear form, so index arithmetic folds::

    (bx * 64 + 64) - bx * 64         ->  64
    (i * 4 + j) // 4   with j in [0, 3]  ->  i
    T.min(k * 32 + 32, k * 32 + 48)  ->  k * 32 + 32

Float expressions only get rewrites that are exact in IEEE arithmetic.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Union

from tegula.arith.bound import Interval, bound
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import ops
from tegula.ir.linear import Linear, add_term, merge_div_mod, expr_key, from_linear, linear
from tegula.ir.expr import BinOp, Call, Cast, Compare, Const, Expr, Select, UnaryOp, Var
from tegula.ir import stmt as S
from tegula.ir.buffer import BufferRegion
from tegula.ir.span import span_scope
from tegula.ir.visitor import Mutator

Bindings = dict[str, Expr]
Bounds = Mapping[Var, Interval]


# ---------------------------------------------------------------------------------------------
# Patterns
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Wild(Var):
    """A pattern variable; with ``only_const`` it matches constants only."""

    only_const: bool = False


x, y, z = Wild("x"), Wild("y"), Wild("z")
c1, c2 = Wild("c1", only_const=True), Wild("c2", only_const=True)
p = Wild("p", dt.bool_)


@dataclass
class Ctx:
    """What rewrites may consult: inclusive ranges of variables."""

    bounds: Bounds


Rewrite = Union[Expr, int, bool, Callable[[Expr, Bindings, Ctx], Optional[Expr]]]
Guard = Callable[[Bindings, Ctx], bool]


@dataclass
class Rule:
    pattern: Expr
    rewrite: Rewrite
    when: Optional[Guard] = None


def match(pat: Expr, e: Expr, b: Bindings) -> bool:
    """Match ``e`` against ``pat``, extending bindings ``b``; a repeated variable must match alike."""
    if isinstance(pat, Wild):
        if pat.only_const and not isinstance(e, Const):
            return False
        if pat.dtype.is_bool and not e.dtype.is_bool:
            return False
        if pat.name in b:
            return expr_key(b[pat.name]) == expr_key(e)
        b[pat.name] = e
        return True
    if isinstance(pat, Const):
        return isinstance(e, Const) and e.dtype.is_bool == pat.dtype.is_bool and e.value == pat.value
    if type(pat) is not type(e):
        return False
    if isinstance(pat, (BinOp, Compare)):
        return pat.op == e.op and match(pat.a, e.a, b) and match(pat.b, e.b, b)
    if isinstance(pat, UnaryOp):
        return pat.op == e.op and match(pat.a, e.a, b)
    if isinstance(pat, Select):
        return match(pat.cond, e.cond, b) and match(pat.then, e.then, b) and match(pat.else_, e.else_, b)
    if isinstance(pat, Cast):
        return match(pat.value, e.value, b)  # any target type
    if isinstance(pat, Call):
        return pat.name == e.name and len(pat.args) == len(e.args) and \
            all(match(pa, ea, b) for pa, ea in zip(pat.args, e.args))
    return False


def instantiate(tpl: Any, b: Bindings) -> Expr:
    """Build a rewrite template with bound variables, folding constants as nodes are made."""
    if isinstance(tpl, Wild):
        return b[tpl.name]
    if not isinstance(tpl, Expr):
        return E.as_expr(tpl)
    if isinstance(tpl, BinOp):
        return E.binary(tpl.op, instantiate(tpl.a, b), instantiate(tpl.b, b))
    if isinstance(tpl, Compare):
        return E.compare(tpl.op, instantiate(tpl.a, b), instantiate(tpl.b, b))
    if isinstance(tpl, UnaryOp):
        return E.unary(tpl.op, instantiate(tpl.a, b))
    if isinstance(tpl, Select):
        return E.select(instantiate(tpl.cond, b), instantiate(tpl.then, b), instantiate(tpl.else_, b))
    return tpl


# ---------------------------------------------------------------------------------------------
# Guards
# ---------------------------------------------------------------------------------------------

def is_int(*names: str) -> Guard:
    """All named bindings are integer-typed."""
    def guard(b: Bindings, ctx: Ctx) -> bool:
        return all(b[n].dtype.is_int for n in names)
    return guard


def positive(*names: str) -> Guard:
    """All named bindings are integer constants greater than zero."""
    def guard(b: Bindings, ctx: Ctx) -> bool:
        return all(b[n].dtype.is_int and b[n].value > 0 for n in names)
    return guard


def divides(small: str, big: str) -> Guard:
    """Both are positive integer constants and ``small`` divides ``big``."""
    def guard(b: Bindings, ctx: Ctx) -> bool:
        s, g = b[small], b[big]
        return s.dtype.is_int and g.dtype.is_int and 0 < s.value and 0 < g.value and g.value % s.value == 0
    return guard


# ---------------------------------------------------------------------------------------------
# Computed rewrites
# ---------------------------------------------------------------------------------------------

def fold(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """Evaluate an operator on constants with the node constructors (which fold by the operator
    table, :mod:`tegula.ir.ops`)."""
    if isinstance(e, BinOp):
        r = E.binary(e.op, e.a, e.b)
    elif isinstance(e, Compare):
        r = E.compare(e.op, e.a, e.b)
    elif isinstance(e, UnaryOp):
        r = E.unary(e.op, e.a)
    elif isinstance(e, Cast):
        r = E.cast(e.to, e.value)
    elif isinstance(e, Call):
        r = E.call(e.name, *e.args)
    else:
        return None
    return r if isinstance(r, Const) else None


def canonical_sum(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """Collect like terms of an integer sum; ``None`` when already canonical."""
    r = from_linear(merge_div_mod(linear(e)), e.dtype)
    return None if expr_key(r) == expr_key(e) else r


def _split(lin: Linear, c: int) -> tuple[Linear, Linear]:
    """Split into (the part divisible by ``c``, the rest), the constant split by floor division."""
    terms, k = lin
    div = {key: [t, v // c] for key, (t, v) in terms.items() if v % c == 0}
    rest = {key: [t, v] for key, (t, v) in terms.items() if v % c != 0}
    return (div, k // c), (rest, k % c)


def linear_div(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """``(a*c*k + r) // c -> a*k + r // c``; ``r // c`` becomes a constant when bounds decide it."""
    c = int(b["c1"].value)
    (div, q), rest = _split(linear(b["x"]), c)
    r = from_linear(rest, e.dtype)
    rb = bound(r, ctx.bounds)
    if rb is not None and rb[0] // c == rb[1] // c:
        return from_linear((div, q + rb[0] // c), e.dtype)
    if not div:
        return None
    return BinOp("add", from_linear((div, q), e.dtype), BinOp("floordiv", r, b["c1"]))


def linear_mod(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """``(a*c + r) % c -> r % c``; ``r`` itself when bounds put it in one period."""
    c = int(b["c1"].value)
    (div, _), rest = _split(linear(b["x"]), c)
    r = from_linear(rest, e.dtype)
    rb = bound(r, ctx.bounds)
    if rb is not None and rb[0] // c == rb[1] // c:
        return from_linear((rest[0], rest[1] - c * (rb[0] // c)), e.dtype)
    if not div and expr_key(r) == expr_key(b["x"]):
        return None
    return BinOp("floormod", r, b["c1"])


def _diff_bound(a: Expr, b: Expr, ctx: Ctx) -> Optional[Interval]:
    """Range of ``a - b`` after cancelling common terms."""
    return bound(from_linear(merge_div_mod(_sub(linear(a), linear(b))), a.dtype), ctx.bounds)


def _sub(la: Linear, lb: Linear) -> Linear:
    terms = {key: [t, c] for key, (t, c) in la[0].items()}
    for key, (t, c) in lb[0].items():
        add_term(terms, key, t, -c)
    return terms, la[1] - lb[1]


def prove_min(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """``T.min(x, y) -> x`` when ``x <= y`` is provable (and the other way round)."""
    d = _diff_bound(b["x"], b["y"], ctx)
    if d is None:
        return None
    return b["x"] if d[1] <= 0 else b["y"] if d[0] >= 0 else None


def prove_max(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """``T.max(x, y) -> y`` when ``x <= y`` is provable (and the other way round)."""
    d = _diff_bound(b["x"], b["y"], ctx)
    if d is None:
        return None
    return b["y"] if d[1] <= 0 else b["x"] if d[0] >= 0 else None


_DECIDE = {
    "lt": lambda lo, hi: True if hi < 0 else False if lo >= 0 else None,
    "le": lambda lo, hi: True if hi <= 0 else False if lo > 0 else None,
    "gt": lambda lo, hi: True if lo > 0 else False if hi <= 0 else None,
    "ge": lambda lo, hi: True if lo >= 0 else False if hi < 0 else None,
    "eq": lambda lo, hi: True if lo == hi == 0 else False if lo > 0 or hi < 0 else None,
    "ne": lambda lo, hi: False if lo == hi == 0 else True if lo > 0 or hi < 0 else None,
}


def prove_compare(e: Expr, b: Bindings, ctx: Ctx) -> Optional[Expr]:
    """Decide an integer comparison from the range of ``x - y``."""
    d = _diff_bound(e.a, e.b, ctx)
    if d is None:
        return None
    answer = _DECIDE[e.op](*d)
    return None if answer is None else E.const(answer, dt.bool_)


# ---------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------

def _bin(op: str, a: Expr, b: Expr) -> Expr:
    return BinOp(op, a, b)


RULES: list[Rule] = [
    # constant folding, one row per operator of the operator table
    *[Rule(_bin(op, c1, c2), fold) for op in ops.BINARY],                    # c1 op c2 -> value
    *[Rule(Compare(op, c1, c2), fold) for op in ops.COMPARE],                # c1 < c2 -> True/False
    *[Rule(UnaryOp(op, c1), fold) for op in ops.UNARY],                      # -c1 -> value
    *[Rule(Call(name, (c1, c2)[:row.arity]), fold)                           # T.exp(c1) -> value
      for name, row in ops.INTRINSICS.items()],
    Rule(Cast(dt.int32, c1), fold),                                          # T.Cast(t, c1) -> value of type t
    Rule(Select(E.const(True), x, y), x),                                    # T.if_then_else(True, x, y) -> x
    Rule(Select(E.const(False), x, y), y),                                   # T.if_then_else(False, x, y) -> y
    # identities
    Rule(x + 0, x),                                                          # x + 0 -> x
    Rule(0 + x, x),                                                          # 0 + x -> x
    Rule(x - 0, x),                                                          # x - 0 -> x
    Rule(x * 1, x),                                                          # x * 1 -> x
    Rule(1 * x, x),                                                          # 1 * x -> x
    Rule(x * 0, 0, when=is_int("x")),                                        # x * 0 -> 0
    Rule(0 * x, 0, when=is_int("x")),                                        # 0 * x -> 0
    Rule(x / 1, x),                                                          # x / 1 -> x
    Rule(x // 1, x, when=is_int("x")),                                       # x // 1 -> x
    Rule(x % 1, 0, when=is_int("x")),                                        # x % 1 -> 0
    Rule(x - x, 0, when=is_int("x")),                                        # x - x -> 0
    Rule(-(-x), x),                                                          # -(-x) -> x
    Rule(E.minimum(x, x), x),                                                # T.min(x, x) -> x
    Rule(E.maximum(x, x), x),                                                # T.max(x, x) -> x
    Rule(E.select(p, x, x), x),                                              # T.if_then_else(p, x, x) -> x
    # boolean logic
    Rule(UnaryOp("not", UnaryOp("not", p)), p),                              # ~~p -> p
    Rule(_bin("and", p, E.const(True)), p),                                  # p & True -> p
    Rule(_bin("and", E.const(True), p), p),                                  # True & p -> p
    Rule(_bin("and", p, E.const(False)), False),                             # p & False -> False
    Rule(_bin("and", E.const(False), p), False),                             # False & p -> False
    Rule(_bin("or", p, E.const(False)), p),                                  # p | False -> p
    Rule(_bin("or", E.const(False), p), p),                                  # False | p -> p
    Rule(_bin("or", p, E.const(True)), True),                                # p | True -> True
    Rule(_bin("or", E.const(True), p), True),                                # True | p -> True
    Rule(_bin("and", p, p), p),                                              # p & p -> p
    Rule(_bin("or", p, p), p),                                               # p | p -> p
    Rule(UnaryOp("not", x < y), x >= y, when=is_int("x")),                   # ~(x < y) -> x >= y
    Rule(UnaryOp("not", x <= y), x > y, when=is_int("x")),                   # ~(x <= y) -> x > y
    Rule(UnaryOp("not", x > y), x <= y, when=is_int("x")),                   # ~(x > y) -> x <= y
    Rule(UnaryOp("not", x >= y), x < y, when=is_int("x")),                   # ~(x >= y) -> x < y
    Rule(UnaryOp("not", Compare("eq", x, y)), Compare("ne", x, y)),          # ~(x == y) -> x != y
    Rule(UnaryOp("not", Compare("ne", x, y)), Compare("eq", x, y)),          # ~(x != y) -> x == y
    # integer division and modulus by constants
    Rule((x // c1) // c2, x // (c1 * c2), when=positive("c1", "c2")),       # x // c1 // c2 -> x // (c1*c2)
    Rule((x % c1) % c2, x % c2, when=divides("c2", "c1")),                   # x % (k*c) % c -> x % c
    Rule((x % c1) // c1, 0, when=positive("c1")),                            # x % c // c -> 0
    Rule(x // c1, linear_div, when=positive("c1")),                          # (a*c + r) // c -> a + r // c
    Rule(x % c1, linear_mod, when=positive("c1")),                           # (a*c + r) % c -> r % c
    # linear integer forms
    Rule(x + y, canonical_sum, when=is_int("x")),                            # a*2 + b + a -> a*3 + b
    Rule(x - y, canonical_sum, when=is_int("x")),                            # (a*64 + 64) - a*64 -> 64
    Rule(x * y, canonical_sum, when=is_int("x")),                            # (a + 1) * 4 -> a*4 + 4
    Rule(-x, canonical_sum, when=is_int("x")),                               # -(a - b) -> b - a
    Rule(E.minimum(x, y), prove_min, when=is_int("x")),                      # T.min(x, x + 4) -> x
    Rule(E.maximum(x, y), prove_max, when=is_int("x")),                      # T.max(x, x + 4) -> x + 4
    *[Rule(Compare(op, x, y), prove_compare, when=is_int("x"))              # i < 8 with i in [0, 3] -> True
      for op in E.COMPARE_OPS],
]


# ---------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------

def _rule_key(e: Expr) -> tuple[type, Optional[str]]:
    """What a rule's pattern and an expression must share: the class and the operator."""
    return type(e), (e.name if isinstance(e, Call) else getattr(e, "op", None))


def _index_rules(rules: list[Rule]) -> dict[tuple[type, Optional[str]], list[Rule]]:
    index: dict[tuple[type, Optional[str]], list[Rule]] = {}
    for r in rules:
        index.setdefault(_rule_key(r.pattern), []).append(r)
    return index


_INDEX = _index_rules(RULES)


def rewrite_once(e: Expr, ctx: Ctx) -> Optional[Expr]:
    """The result of the first rule that applies at the root of ``e``, or ``None``."""
    for rule in _INDEX.get(_rule_key(e), ()):
        b: Bindings = {}
        if not match(rule.pattern, e, b):
            continue
        if rule.when is not None and not rule.when(b, ctx):
            continue
        if callable(rule.rewrite):
            out = rule.rewrite(e, b, ctx)
            if out is None:
                continue
        else:
            out = instantiate(rule.rewrite, b)
        if out.dtype != e.dtype:
            out = E.cast(e.dtype, out)
        return out
    return None


class _Simplifier:
    MAX_STEPS = 64

    def __init__(self, ctx: Ctx):
        self.ctx = ctx
        self.memo: dict[int, Expr] = {}
        self.keep: list[Expr] = []  # keeps memo keys alive

    def simp(self, e: Expr, depth: int = 0) -> Expr:
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit
        with span_scope(e.span):
            out = self.children(e)
            for _ in range(self.MAX_STEPS):
                new = rewrite_once(out, self.ctx)
                if new is None:
                    break
                out = self.simp(new, depth + 1) if depth < 16 else new
        self.memo[id(e)] = out
        self.memo[id(out)] = out
        self.keep.append(e)
        return out

    def children(self, e: Expr) -> Expr:
        if isinstance(e, (BinOp, Compare)):
            a, b = self.simp(e.a), self.simp(e.b)
            return e if a is e.a and b is e.b else dataclasses.replace(e, a=a, b=b)
        if isinstance(e, (UnaryOp,)):
            a = self.simp(e.a)
            return e if a is e.a else dataclasses.replace(e, a=a)
        if isinstance(e, Cast):
            v = self.simp(e.value)
            return e if v is e.value else dataclasses.replace(e, value=v)
        if isinstance(e, Select):
            c, t, f = self.simp(e.cond), self.simp(e.then), self.simp(e.else_)
            same = c is e.cond and t is e.then and f is e.else_
            return e if same else dataclasses.replace(e, cond=c, then=t, else_=f)
        if isinstance(e, (Call, E.Builtin, E.BufferLoad)):
            field = "indices" if isinstance(e, E.BufferLoad) else "args"
            old = getattr(e, field)
            new = tuple(self.simp(a) for a in old)
            return e if all(a is b for a, b in zip(new, old)) else dataclasses.replace(e, **{field: new})
        return e


def simplify(e: Any, bounds: Optional[Bounds] = None) -> Expr:
    """``e`` rewritten by :data:`RULES` until nothing applies.

    ``bounds`` maps variables to inclusive integer ranges ``(lo, hi)``; with them, divisions,
    moduli, ``T.min``/``T.max`` and comparisons that the ranges decide are folded.
    Unchanged subtrees come back as the same objects.
    """
    if not isinstance(e, Expr):
        return E.as_expr(e)
    s = _Simplifier(Ctx(dict(bounds or {})))
    out = e
    for _ in range(8):
        new = s.simp(out)
        if new is out:
            break
        out = new
    return out


def const_int(e: Any, bounds: Optional[Bounds] = None) -> Optional[int]:
    """The integer value of ``e`` if it simplifies to an integer constant, else ``None``."""
    if isinstance(e, bool):
        return None
    if isinstance(e, int):
        return e
    if not isinstance(e, Expr):
        return None
    r = simplify(e, bounds)
    if isinstance(r, Const) and r.dtype.is_int:
        return int(r.value)
    return None


def simplify_stmt(stmt: Any, bounds: Optional[Bounds] = None) -> Any:
    """Simplify every expression in a statement or ``PrimFunc``.

    Loop variables (and block indices) with constant ranges are bounded inside their bodies, so
    index arithmetic they decide folds; conditionals with a constant condition are resolved.
    """
    return StmtSimplifier(dict(bounds or {})).visit(stmt)


class StmtSimplifier(Mutator):
    """Simplifies the expressions of a statement tree, tracking loop and block index ranges."""

    def __init__(self, bounds: dict[Var, Interval]):
        super().__init__()
        self.bounds = bounds
        self.let_consts: dict[Var, Const] = {}  # lets whose value folded to a constant

    def visit(self, node: Any) -> Any:
        if isinstance(node, Expr):
            if self.let_consts:
                from tegula.ir.visitor import substitute

                node = substitute(node, self.let_consts)
            return simplify(node, self.bounds)
        return super().visit(node)

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        """A let's value bounds its variable for the statements after it (vars are unique)."""
        from tegula.arith.bound import bound

        value = self.visit(s.value)
        # a variable defined again (a copied statement) must not keep facts of its other copy
        self.let_consts.pop(s.var, None)
        self.bounds.pop(s.var, None)
        if isinstance(value, Const):
            self.let_consts[s.var] = value
        elif value.dtype.is_int:
            b = bound(value, self.bounds)
            if b is not None:
                self.bounds[s.var] = b
        return s if value is s.value else dataclasses.replace(s, value=value)

    def dim(self, d: Any) -> Any:
        """A shape or extent: an int when it folds to a constant."""
        if not isinstance(d, Expr):
            return d
        r = simplify(d, self.bounds)
        return int(r.value) if isinstance(r, Const) and r.dtype.is_int else r

    def visit_For(self, s: S.For) -> S.Stmt:
        start, extent = self.visit(s.start), self.dim(s.extent)
        lo, n = const_int(start), const_int(extent)
        saved = self.bounds
        if lo is not None and n is not None and n > 0:
            hi = lo + (n - 1) * s.step
            self.bounds = {**saved, s.var: (min(lo, hi), max(lo, hi))}
        body = self.visit(s.body)
        self.bounds = saved
        if start is s.start and extent is s.extent and body is s.body:
            return s
        return dataclasses.replace(s, start=start, extent=extent, body=body)

    def visit_Kernel(self, k: S.Kernel) -> S.Stmt:
        grid = tuple(self.dim(g) for g in k.grid)
        saved = self.bounds
        self.bounds = dict(saved)
        for v, g in zip(k.block_vars, grid):
            if isinstance(g, int) and g > 0:
                self.bounds[v] = (0, g - 1)
        if k.thread_var is not None:
            self.bounds[k.thread_var] = (0, k.num_threads - 1)
        out = self.generic_visit(k)
        self.bounds = saved
        if any(a is not b for a, b in zip(grid, k.grid)):
            out = dataclasses.replace(out, grid=grid)
        return out

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        cond = self.visit(s.cond)
        if isinstance(cond, Const):
            if cond.value:
                return self.visit(s.then)
            return self.visit(s.else_) if s.else_ is not None else S.SeqStmt((), span=s.span)
        then = self.visit(s.then)
        else_ = self.visit(s.else_) if s.else_ is not None else None
        if cond is s.cond and then is s.then and else_ is s.else_:
            return s
        return dataclasses.replace(s, cond=cond, then=then, else_=else_)

    def visit_BufferRegion(self, r: BufferRegion) -> BufferRegion:
        ranges = tuple((self.visit(st), self.dim(ext)) for st, ext in r.ranges)
        buf = self.visit(r.buffer)
        same = buf is r.buffer and all(a is c and b is d for (a, b), (c, d) in zip(ranges, r.ranges))
        return r if same else dataclasses.replace(r, buffer=buf, ranges=ranges)
