"""What the two closure-compiling backends share: the interpreter (``cpu``) and the emulator
(``cuda-emu``).

Both turn IR into a tree of Python closures once; every closure takes ``env``, a flat list of
values indexed by slots handed out at compile time. Slot ``MASK`` holds the active lane mask
(``None`` when every lane is active). A value is a numpy scalar, the same for every lane, or a
numpy array with one entry per lane (``CExpr.vec``): the lanes of a ``T.Parallel`` nest in the
interpreter, the threads of a block in the emulator.

This module holds the rule registry keyed by node class, the env slot table, and the rules that
mean the same in both backends because they compute elementwise and neither read nor change the
mask (variables, constants, arithmetic, casts, intrinsics, sequences, lets); what each operator
computes is its row of the operator table (:mod:`tegula.ir.ops`). Rules that touch the mask or
memory stay with their backend.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from tegula.errors import KernelNameError, UnsupportedError
from tegula.ir import ops
from tegula.ir.dtype import DType
from tegula.ir.expr import BinOp, Builtin, BufferLoad, Call, Cast, Compare, Const, UnaryOp, Var
from tegula.ir.visitor import post_order_visit
from tegula.ir.stmt import Break, Continue, Evaluate, LetStmt, SeqStmt, TileOp
from tegula.ir.tile_rules import TILE_RULES
from tegula.backends.memo import compile_kept

Env = list
ExprFn = Callable[[Env], Any]
StmtFn = Callable[[Env], None]

MASK = 0  # env slot of the active lane mask


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
    Tile operations take their rule from :data:`~tegula.ir.tile_rules.TILE_RULES` (the aspect
    named like ``target``) unless one is registered here.
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
        ce = compile_kept(rule, e, ctx)
        ce.node = e
        return ce

    def compile_stmt(self, s: Any, ctx: Any) -> StmtFn:
        """Compile statement ``s``; raises UnsupportedError when no rule handles its class."""
        rule = self.stmts.get(type(s))
        if rule is None:
            if isinstance(s, TileOp):
                rule = TILE_RULES.require(s, self.target, hint=self.stmt_hint)
            else:
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
is_narrow = ops.is_narrow
F32 = ops.F32


def np_scalar(d: DType, value: Any) -> Any:
    """``value`` as a numpy scalar of dtype ``d``."""
    return np.array(value).astype(d.np)[()]


# Fresh float memory holds a NaN with a payload of its own, so a read of an element never written
# is told apart from a NaN the kernel computed (:func:`unwritten`); fp8 / fp4 have no spare payload.
_UNWRITTEN_BITS = {np.dtype(np.float16): (np.uint16, 0x7E5A), np.dtype("bfloat16"): (np.uint16, 0x7FDA),
                   np.dtype(np.float32): (np.uint32, 0x7FDA5A5A),
                   np.dtype(np.float64): (np.uint64, 0x7FFDA5A5A5A5A5A5)}


def poison(d: DType) -> Any:
    """The value fresh shared/fragment/local memory holds: NaN (floats: the unwritten NaN of
    :func:`unwritten`), or a recognizable integer."""
    if d.is_float:
        marker = _UNWRITTEN_BITS.get(np.dtype(d.np))
        return np.nan if marker is None else np.array(marker[1], marker[0]).view(d.np)[()]
    if d.is_bool:
        return True
    info = np.iinfo(d.np)
    if d.kind == "uint":
        return info.max
    return max(info.min, -0x5A5A5A5A)


def unwritten(vals: Any) -> Optional[np.ndarray]:
    """The mask of the elements of ``vals`` (a numpy array or scalar) that still hold the poison of
    fresh memory (never written), or None when none does (or the dtype cannot tell)."""
    vals = np.asarray(vals)
    marker = _UNWRITTEN_BITS.get(vals.dtype)
    if marker is None or not np.isnan(vals).any():
        return None
    hit = np.ascontiguousarray(vals).view(marker[0]) == marker[1]
    return hit if hit.any() else None


def unwritten_read(buf: Any, vals: Any, span: Any, what: str = "read", tile: bool = True) -> None:
    """Raise UninitializedReadError when ``vals`` (read from fragment or local ``buf``) holds an
    element never written. ``tile``: ``vals`` is a tile of the buffer, whose first bad element the
    message names (else: lanes of an element load, counted)."""
    hit = unwritten(vals)
    if hit is None:
        return
    from tegula.errors import UninitializedReadError

    n = int(hit.sum())
    where = ""
    if tile and np.ndim(hit):
        first = ", ".join(str(int(x)) for x in np.argwhere(hit)[0])
        where = f" (element [{first}] of the tile read{f' and {n - 1} more' if n > 1 else ''})"
    elif n > 1:
        where = f" ({n} values read)"
    kind = "fragment" if buf.is_fragment else "local buffer"
    raise UninitializedReadError(
        f"{what} of {kind} '{buf.name}' that was never written{where}", span,
        f"initialize '{buf.name}' before reading it: T.clear({buf.name}) or T.fill({buf.name}, v) "
        "(a T.gemm accumulates into its C unless clear_accum=True)")


def is_move(value: Any) -> bool:
    """Whether a store's ``value`` is a plain load of a checked buffer (a move: staging a fragment
    through shared memory, copying it out). Moves carry the poison along unchecked; the read
    that uses the value (arithmetic, a gemm, a reduction) is the one reported."""
    return isinstance(value, BufferLoad) and checks_unwritten(value.buffer)


def checks_unwritten(buf: Any) -> bool:
    """Whether reads of ``buf`` are checked for never-written elements: fragments and local
    buffers (not ``local.var``) of a float dtype whose poison is told apart."""
    return (buf.is_fragment or (buf.is_local and not buf.is_var)) and np.dtype(buf.dtype.np) in _UNWRITTEN_BITS


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
    op, fa, fb = ops.np_fn(ops.BINARY[e.op], e.a.dtype), a.fn, b.fn
    return CExpr(lambda env: op(fa(env), fb(env)), a.vec or b.vec)


@COMMON.expr_rule(BinOp)
def _binop(e: BinOp, ctx: Any) -> CExpr:
    return arith_binop(e, compile_expr(e.a, ctx), compile_expr(e.b, ctx))


@COMMON.expr_rule(Compare)
def _compare(e: Compare, ctx: Any) -> CExpr:
    a, b = compile_expr(e.a, ctx), compile_expr(e.b, ctx)
    op, fa, fb = ops.np_fn(ops.COMPARE[e.op], e.a.dtype), a.fn, b.fn
    return CExpr(lambda env: op(fa(env), fb(env)), a.vec or b.vec)


@COMMON.expr_rule(UnaryOp)
def _unary(e: UnaryOp, ctx: Any) -> CExpr:
    a = compile_expr(e.a, ctx)
    op, fa = ops.np_fn(ops.UNARY[e.op], e.a.dtype), a.fn
    return CExpr(lambda env: op(fa(env)), a.vec)


@COMMON.expr_rule(Cast)
def _cast(e: Cast, ctx: Any) -> CExpr:
    a = compile_expr(e.value, ctx)
    fa, frm, to = a.fn, e.value.dtype, e.to
    if to.is_int and frm.is_float:  # saturating, NaN -> 0 (the table's cast semantics)
        return CExpr(lambda env: ops.cast_array(fa(env), frm, to), a.vec)
    npd = to.np
    return CExpr(lambda env: ops.widen(fa(env), npd), a.vec)


@COMMON.expr_rule(Call)
def _call(e: Call, ctx: Any) -> CExpr:
    row = ops.INTRINSICS.get(e.name)
    if row is None:
        raise ctx.rules.unimplemented("intrinsic", e.name, e.span)
    args = [compile_expr(a, ctx) for a in e.args]
    vec = any(a.vec for a in args)
    fn = ops.np_fn(row, e.args[0].dtype)
    if len(args) == 1:
        f0 = args[0].fn
        return CExpr(lambda env: fn(f0(env)), vec)
    f0, f1 = (a.fn for a in args)
    return CExpr(lambda env: fn(f0(env), f1(env)), vec)


# builtins that only order kernels launched back to back (programmatic dependent launch): the
# interpreter and the emulator run kernels one after another, so they do nothing there
ORDERING_ONLY = ("tl::pdl_trigger", "tl::pdl_sync")


def has_effects(e: Any) -> bool:
    """True when evaluating ``e`` touches memory (so it must not run for lanes that skip it)."""
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, (BufferLoad, Builtin)) else None)
    return bool(found)


def extern_code_error(e: Any, span: Any) -> UnsupportedError:
    """What running a ``T.call_extern`` of C code on a host target is."""
    return UnsupportedError(
        f"T.call_extern({e.attr('callee')!r}) calls C++ code (T.import_source), which the "
        f"interpreter and the emulator (targets cpu, cuda-emu) cannot run: only the CUDA targets "
        f"compile it", span,
        hint="build the kernel for target='cuda' (or write the function with T.* operations)")


def bitcast(e: Any, ctx: Any) -> CExpr:
    """``T.reinterpret``'s ``Builtin("bitcast")``: the bits of the argument read as ``e.ret``."""
    a = compile_expr(e.args[0], ctx)
    fa, npd = a.fn, e.ret.np
    return CExpr(lambda env: np.asarray(fa(env)).view(npd)[()], a.vec)


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


def host_view(address: Any, buf: Any, span: Any) -> np.ndarray:
    """The host memory of ``T.make_tensor`` buffer ``buf`` at ``address`` (one value, or one per
    thread that must all agree), as a numpy array of its shape. The address must be that of a
    live host tensor of at least ``buf``'s size (``tensor.data_ptr()``)."""
    import ctypes
    import math

    a = np.unique(np.asarray(address))
    if a.size != 1:
        raise UnsupportedError(f"T.make_tensor '{buf.name}': the threads of a block computed different "
                               f"addresses ({a.size} of them)", span,
                               hint="compute the address from block indices only")
    addr = int(a[0])
    if addr == 0:
        raise UnsupportedError(f"T.make_tensor '{buf.name}': the address is null", span)
    n = math.prod(buf.shape)
    raw = (ctypes.c_char * (n * buf.dtype.itemsize)).from_address(addr)
    return np.frombuffer(raw, dtype=buf.dtype.np, count=n).reshape(buf.shape)


def _bind_made_tensor(s: LetStmt, ctx: Any, f: ExprFn) -> StmtFn:
    """The let of a ``T.make_tensor`` address also binds the buffer (``ctx.made_tensor``)."""
    buf = s.var.buffer
    if not all(isinstance(d, int) for d in buf.shape):
        raise UnsupportedError(f"T.make_tensor '{buf.name}' with a runtime shape {buf.shape} cannot "
                               f"run on target {ctx.rules.target}", s.span)
    slot, shape_of = ctx.made_tensor(buf)
    vslot = ctx.slot(s.var)
    span = s.span

    def bind(env: Env) -> None:
        x = f(env)
        env[vslot] = x
        env[slot] = shape_of(host_view(x, buf, span))
    return bind


@COMMON.stmt_rule(LetStmt)
def _let(s: LetStmt, ctx: Any) -> StmtFn:
    v = compile_expr(s.value, ctx)
    if getattr(s.var, "buffer", None) is not None:
        return _bind_made_tensor(s, ctx, v.fn)
    slot = ctx.slot(s.var)
    f = v.fn
    memo = getattr(ctx, "memo", None)
    if memo is not None:  # a per-lane let depends on what its value depends on
        if v.vec:
            memo.let_deps[id(s.var)] = memo.deps(s.value, ctx)
        else:
            memo.let_deps.pop(id(s.var), None)
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


def iteration(body: StmtFn) -> Callable[[Env], bool]:
    """``body`` as one iteration of a loop that takes ``break`` and ``continue``: the function
    returns False when the body broke out of the loop (a ``continue`` just ends the iteration)."""
    def step(env: Env) -> bool:
        try:
            body(env)
        except ContinueSignal:
            pass
        except BreakSignal:
            return False
        return True
    return step


def uniform_while(cond: ExprFn, body: StmtFn) -> StmtFn:
    """``while cond: body``, taking ``break`` and ``continue`` raised by the body."""
    step = iteration(body)

    def loop(env: Env) -> None:
        while cond(env) and step(env):
            pass
    return loop


JUMPS: dict[type, tuple[str, type]] = {Break: ("break", BreakSignal),
                                        Continue: ("continue", ContinueSignal)}


def jump(s: Any) -> StmtFn:
    """The closure for a ``Break`` or ``Continue``: it raises the signal the loop catches."""
    sig = JUMPS[type(s)][1]

    def run(env: Env) -> None:
        raise sig()
    return run


def device_assert(e: Any, ctx: Any) -> CExpr:
    """``T.device_assert(cond, msg)`` on the host backends: a DeviceAssertError at the user's line
    when ``cond`` is false in any active lane (``e.args[0]``; the message is ``e.attr("msg")``)."""
    from tegula.errors import DeviceAssertError

    fc = compile_expr(e.args[0], ctx).fn
    msg, span = e.attr("msg", ""), e.span or getattr(ctx, "span", None)

    def check(env: Env) -> Any:
        ok = np.asarray(fc(env), dtype=bool)
        m = env[MASK]
        bad = ~ok if m is None else (~ok & np.asarray(m, dtype=bool))
        if bad.any():
            raise DeviceAssertError(f"T.device_assert failed{': ' + msg if msg else ''}", span)
        return np.True_
    return CExpr(check, False)
