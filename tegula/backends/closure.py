"""What the two closure-compiling backends share: the interpreter (``cpu``) and the emulator
(``cuda-emu``).

Both turn IR into a tree of Python closures once; every closure takes ``env``, a flat list of
values indexed by slots handed out at compile time. Slot ``MASK`` holds the active lane mask
(``None`` when every lane is active). A value is a numpy scalar, the same for every lane, or a
numpy array with one entry per lane (``CExpr.vec``): the lanes of a ``T.Parallel`` nest in the
interpreter, the threads of a block in the emulator.

This module holds the rule registry keyed by node class, the env slot table, the arithmetic
tables, and the rules that mean the same in both backends because they compute elementwise and
neither read nor change the mask (variables, constants, arithmetic, casts, intrinsics, sequences,
lets). Rules that touch the mask or memory stay with their backend.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from tegula.errors import KernelNameError, UnsupportedError
from tegula.ir.dtype import DType
from tegula.ir.expr import BinOp, Call, Cast, Compare, Const, UnaryOp, Var
from tegula.ir.stmt import Break, Continue, Evaluate, LetStmt, SeqStmt

Env = list
ExprFn = Callable[[Env], Any]
StmtFn = Callable[[Env], None]

MASK = 0  # env slot of the active lane mask

F32 = np.dtype(np.float32)


class BreakSignal(Exception):
    """Raised by ``break`` (taken by every active lane); caught by the innermost loop."""


class ContinueSignal(Exception):
    """Raised by ``continue`` (taken by every active lane); caught by the innermost loop."""


@dataclass
class CExpr:
    """A compiled expression: ``fn(env)`` gives its value; ``vec`` says it may differ per lane
    (an array) rather than being one scalar."""

    fn: ExprFn
    vec: bool
    node: Any = None


class Slots:
    """The env slots of one function's vars and buffers, handed out on first use."""

    def __init__(self, reserved: int):
        self._of: dict[int, int] = {}  # id(var or buffer) -> env slot
        self.size = reserved            # slots below ``reserved`` are the backend's own

    def slot(self, node: Any) -> int:
        """The env slot of ``node``, allocating one the first time."""
        s = self._of.get(id(node))
        if s is None:
            s = self._of[id(node)] = self.size
            self.size += 1
        return s

    def get(self, node: Any) -> Optional[int]:
        """The env slot of ``node``, or None when it has none yet."""
        return self._of.get(id(node))

    def __contains__(self, node: Any) -> bool:
        return id(node) in self._of


# -- rule registries (one rule per node class) -------------------------------------------------
ExprRule = Callable[[Any, Any], CExpr]
StmtRule = Callable[[Any, Any], StmtFn]


class Rules:
    """One target's compile rules, one per IR node class.

    ``base`` gives rules to start from (a backend starts from :data:`COMMON`); rules registered
    later replace them. ``stmt_hint`` is appended to the error for a statement with no rule.
    """

    def __init__(self, target: str, base: Optional["Rules"] = None, stmt_hint: str = ""):
        self.target = target
        self.stmt_hint = stmt_hint
        self.exprs: dict[type, ExprRule] = dict(base.exprs) if base is not None else {}
        self.stmts: dict[type, StmtRule] = dict(base.stmts) if base is not None else {}

    def expr_rule(self, cls: type) -> Callable[[ExprRule], ExprRule]:
        def deco(fn: ExprRule) -> ExprRule:
            self.exprs[cls] = fn
            return fn
        return deco

    def stmt_rule(self, cls: type) -> Callable[[StmtRule], StmtRule]:
        def deco(fn: StmtRule) -> StmtRule:
            self.stmts[cls] = fn
            return fn
        return deco

    def unimplemented(self, what: str, name: str, span: Any, hint: str = "") -> UnsupportedError:
        """The error for a node (``what`` is "op", "intrinsic", ...) with no rule here."""
        msg = f"unimplemented {what} {name} for target {self.target}"
        return UnsupportedError(f"{msg} ({hint})" if hint else msg, span)

    def compile_expr(self, e: Any, ctx: Any) -> CExpr:
        """Compile expression ``e``; raises UnsupportedError when no rule handles its class."""
        rule = self.exprs.get(type(e))
        if rule is None:
            raise self.unimplemented("op", type(e).__name__, getattr(e, "span", None))
        ce = rule(e, ctx)
        ce.node = e
        return ce

    def compile_stmt(self, s: Any, ctx: Any) -> StmtFn:
        """Compile statement ``s``; raises UnsupportedError when no rule handles its class."""
        rule = self.stmts.get(type(s))
        if rule is None:
            raise self.unimplemented("op", type(s).__name__, getattr(s, "span", None),
                                     self.stmt_hint)
        return rule(s, ctx)


def compile_expr(e: Any, ctx: Any) -> CExpr:
    """Compile ``e`` with the rules of ``ctx``'s backend (``ctx.rules``)."""
    return ctx.rules.compile_expr(e, ctx)


def compile_stmt(s: Any, ctx: Any) -> StmtFn:
    """Compile ``s`` with the rules of ``ctx``'s backend (``ctx.rules``)."""
    return ctx.rules.compile_stmt(s, ctx)


# -- dtype helpers -----------------------------------------------------------------------------
def is_narrow(d: DType) -> bool:
    """Floats narrower than 32 bits: arithmetic runs in float32 and rounds back."""
    return d.is_float and d.bits < 32


def np_scalar(d: DType, value: Any) -> Any:
    """``value`` as a numpy scalar of dtype ``d``."""
    return np.array(value).astype(d.np)[()]


def poison(d: DType) -> Any:
    """The value fresh shared/fragment/local memory holds: NaN, or a recognizable integer."""
    if d.is_float:
        return np.nan
    if d.is_bool:
        return True
    info = np.iinfo(d.np)
    if d.kind == "uint":
        return info.max
    return max(info.min, -0x5A5A5A5A)


# -- arithmetic tables -------------------------------------------------------------------------
def _int_truncdiv(a: Any, b: Any) -> Any:
    q = a // b
    fix = (a - q * b != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype) if isinstance(fix, np.ndarray) else q + q.dtype.type(fix)


def _int_truncmod(a: Any, b: Any) -> Any:
    return np.fmod(a, b)


BIN_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul,
    "floordiv": operator.floordiv, "floormod": operator.mod,
    "min": np.minimum, "max": np.maximum,
    "and": operator.and_, "or": operator.or_,  # operands are booleans: logical
    "bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor,
    "shl": operator.lshift, "shr": operator.rshift,
}
INT_OPS = {"div": _int_truncdiv, "truncdiv": _int_truncdiv, "truncmod": _int_truncmod}
FLOAT_OPS = {"div": operator.truediv, "truncdiv": lambda a, b: np.trunc(a / b),
             "truncmod": np.fmod}
CMP_OPS = {"lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge,
           "eq": operator.eq, "ne": operator.ne}


def _sigmoid(x: Any) -> Any:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


def _rsqrt(x: Any) -> Any:
    return x.dtype.type(1) / np.sqrt(x)


_erf = np.frompyfunc(math.erf, 1, 1)

INTRINSICS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(x.dtype.type(10), x),
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1,
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "abs": np.abs, "tanh": np.tanh, "sigmoid": _sigmoid,
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc,
    "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "erf": lambda x: _erf(x).astype(x.dtype),
    "pow": np.power, "fmod": np.fmod, "isnan": np.isnan, "isinf": np.isinf,
}
INT_IDENTITY = {"floor", "ceil", "round", "trunc"}  # intrinsics that leave integers unchanged


def lift(op: Callable, fa: Callable, fb: Callable, narrow: Any) -> Callable:
    """``op(fa, fb)``; for a narrow float dtype compute in float32 and round back."""
    if narrow is None:
        return lambda env: op(fa(env), fb(env))
    return lambda env: op(fa(env).astype(F32), fb(env).astype(F32)).astype(narrow)


# -- rules shared by both backends -------------------------------------------------------------
COMMON = Rules("any")


@COMMON.expr_rule(Var)
def _var(e: Var, ctx: Any) -> CExpr:
    s = ctx.slots.get(e)
    if s is None:
        raise KernelNameError(f"variable '{e.name}' is used where it has no value", e.span)
    return CExpr(lambda env: env[s], id(e) in ctx.vec_vars)


@COMMON.expr_rule(Const)
def _const(e: Const, ctx: Any) -> CExpr:
    v = np_scalar(e.dtype, e.value)
    return CExpr(lambda env: v, False)


def arith_binop(e: BinOp, a: CExpr, b: CExpr) -> CExpr:
    """``e.a <op> e.b`` from the compiled operands, both evaluated for every lane."""
    d = e.dtype
    op = BIN_OPS.get(e.op)
    if op is None:
        op = (INT_OPS if (d.is_int or d.is_bool) else FLOAT_OPS)[e.op]
    narrow = d.np if is_narrow(d) and e.op not in ("min", "max") else None
    return CExpr(lift(op, a.fn, b.fn, narrow), a.vec or b.vec)


@COMMON.expr_rule(BinOp)
def _binop(e: BinOp, ctx: Any) -> CExpr:
    return arith_binop(e, compile_expr(e.a, ctx), compile_expr(e.b, ctx))


@COMMON.expr_rule(Compare)
def _compare(e: Compare, ctx: Any) -> CExpr:
    a, b = compile_expr(e.a, ctx), compile_expr(e.b, ctx)
    op, fa, fb = CMP_OPS[e.op], a.fn, b.fn
    return CExpr(lambda env: op(fa(env), fb(env)), a.vec or b.vec)


@COMMON.expr_rule(UnaryOp)
def _unary(e: UnaryOp, ctx: Any) -> CExpr:
    a = compile_expr(e.a, ctx)
    fa = a.fn
    if e.op == "neg":
        return CExpr(lambda env: -fa(env), a.vec)
    if e.op == "not":
        return CExpr(lambda env: np.logical_not(fa(env)), a.vec)
    return CExpr(lambda env: ~fa(env), a.vec)  # bitnot


@COMMON.expr_rule(Cast)
def _cast(e: Cast, ctx: Any) -> CExpr:
    a = compile_expr(e.value, ctx)
    fa, npd = a.fn, e.to.np
    return CExpr(lambda env: fa(env).astype(npd), a.vec)


@COMMON.expr_rule(Call)
def _call(e: Call, ctx: Any) -> CExpr:
    args = [compile_expr(a, ctx) for a in e.args]
    vec = any(a.vec for a in args)
    fns = [a.fn for a in args]
    argd = e.args[0].dtype
    if not argd.is_float and e.name in INT_IDENTITY:
        return CExpr(fns[0], vec)
    if not argd.is_float and e.name in ("isnan", "isinf"):
        return CExpr(lambda env: np.zeros_like(fns[0](env), dtype=bool)[()], vec)
    fn = INTRINSICS.get(e.name)
    if fn is None:
        raise ctx.rules.unimplemented("intrinsic", e.name, e.span)
    out = e.dtype.np
    if is_narrow(argd):
        if len(fns) == 1:
            f0 = fns[0]
            return CExpr(lambda env: fn(f0(env).astype(F32)).astype(out), vec)
        f0, f1 = fns
        return CExpr(lambda env: fn(f0(env).astype(F32), f1(env).astype(F32)).astype(out), vec)
    if len(fns) == 1:
        f0 = fns[0]
        return CExpr(lambda env: fn(f0(env)), vec)
    f0, f1 = fns
    return CExpr(lambda env: fn(f0(env), f1(env)), vec)


def _nop(env: Env) -> None:
    return None


@COMMON.stmt_rule(SeqStmt)
def _seq(s: SeqStmt, ctx: Any) -> StmtFn:
    fns = tuple(compile_stmt(x, ctx) for x in s.stmts)  # in order: lets mark later uses
    if not fns:
        return _nop
    if len(fns) == 1:
        return fns[0]

    def run(env: Env) -> None:
        for f in fns:
            f(env)
    return run


@COMMON.stmt_rule(Evaluate)
def _evaluate(s: Evaluate, ctx: Any) -> StmtFn:
    f = compile_expr(s.value, ctx).fn

    def run(env: Env) -> None:
        f(env)
    return run


@COMMON.stmt_rule(LetStmt)
def _let(s: LetStmt, ctx: Any) -> StmtFn:
    v = compile_expr(s.value, ctx)
    slot = ctx.slot(s.var)
    f = v.fn
    if v.vec:
        ctx.vec_vars.add(id(s.var))

        def let_vec(env: Env) -> None:
            x = f(env)
            env[slot] = x.copy() if isinstance(x, np.ndarray) else x  # not a view of a buffer
        return let_vec
    ctx.vec_vars.discard(id(s.var))

    def let(env: Env) -> None:
        env[slot] = f(env)
    return let


# -- closure builders for control flow on a condition the same for every lane ----------------
def uniform_if(cond: ExprFn, then: StmtFn, else_: Optional[StmtFn]) -> StmtFn:
    """``if cond: then else: else_`` as an ordinary branch."""
    if else_ is None:
        def if_(env: Env) -> None:
            if cond(env):
                then(env)
        return if_

    def if_else(env: Env) -> None:
        if cond(env):
            then(env)
        else:
            else_(env)
    return if_else


def uniform_while(cond: ExprFn, body: StmtFn) -> StmtFn:
    """``while cond: body``, taking ``break`` and ``continue`` raised by the body."""
    def loop(env: Env) -> None:
        while cond(env):
            try:
                body(env)
            except ContinueSignal:
                continue
            except BreakSignal:
                break
    return loop


JUMPS: dict[type, tuple[str, type]] = {Break: ("break", BreakSignal),
                                        Continue: ("continue", ContinueSignal)}


def jump(s: Any) -> StmtFn:
    """The closure for a ``Break`` or ``Continue``: it raises the signal the loop catches."""
    sig = JUMPS[type(s)][1]

    def run(env: Env) -> None:
        raise sig()
    return run
