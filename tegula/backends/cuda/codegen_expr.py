"""CUDA C++ spelling of thread-level expressions (see :mod:`tegula.backends.cuda.codegen`).

:class:`ExprPrinter` renders an expression to ``(text, precedence)`` so that parentheses appear
only where C++ needs them (and around mixed bitwise / logical operands, for the reader). Every
node class, math intrinsic and builtin has one rule in a table; a missing rule raises
``UnsupportedError("unimplemented ... for target cuda")``.

Signed integers wrap (two's complement), as everywhere in tegula (``tegula/ir/ops.py``), while
signed overflow is undefined in C++. So a signed ``+``, ``-``, ``*``, unary ``-`` or ``<<`` that
may leave its type's range is computed on the unsigned type of its width and cast back::

    W[i] = A[i] * 65536 + x          ->   W[i] = ((int)((unsigned)A[i] * 65536u + (unsigned)x));

"May leave" is decided by interval analysis over the ranges the kernel states (thread and block
indices, loop variables, lets, dimensions; :attr:`ExprPrinter.ranges`). Index arithmetic is left
as it is: inside a buffer index, and in comparisons and loop bounds over index values only (no
buffer loads, no lets of loaded values: bounds guards, masks such as ``q_idx >= k_idx``, trip
counts). An index that overflowed is an out-of-bounds access whatever the arithmetic means
(buffers that may need more than 31 bits get 64-bit indices instead), and the compiler's
strength reduction of address arithmetic relies on it: the guards of a copy from a tensor of
dynamic shape, printed wrapping, doubled the main loop of an sm_80 GEMM.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Optional

import numpy as np

from tegula.arith.bound import Interval, bound
from tegula.errors import UnsupportedError, VerifyError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import ops
from tegula.ir.buffer import Buffer
from tegula.ir.dtype import DType
from tegula.ir.visitor import post_order_visit

# C++ operator precedence (smaller binds tighter), from the operator table.
PRIMARY, UNARY, MUL, ADD, SHIFT, REL, EQ, BAND, BXOR, BOR, LAND, LOR, COND = (
    ops.C_PRIMARY, ops.C_UNARY, ops.C_MUL, ops.C_ADD, ops.C_SHIFT, ops.C_REL, ops.C_EQ, ops.C_BAND,
    ops.C_BXOR, ops.C_BOR, ops.C_LAND, ops.C_LOR, ops.C_COND)
# Children of these operators get parentheses unless they bind as tightly as a unary operator.
_PICKY = {SHIFT, BAND, BXOR, BOR, LAND, LOR}

Rendered = tuple[str, int]


def is_lowp(t: DType) -> bool:
    """float16, bfloat16 and fp8: stored narrow, computed in float."""
    return t.is_float and t.bits < 32


# ---------------------------------------------------------------------------------------------
# Literals
# ---------------------------------------------------------------------------------------------

def _float_text(v: float, bits: int) -> str:
    """Shortest decimal that reads back as the same float32 / float64."""
    s = str(np.float32(v)) if bits == 32 else repr(float(v))
    if "e" not in s and "." not in s:
        s += ".0"
    return s


def literal(value: Any, t: DType) -> Rendered:
    """The C++ spelling of a constant of dtype ``t``, exact and of exactly that type."""
    if t.is_bool:
        return ("true" if value else "false"), PRIMARY
    if t.is_int:
        v = int(value)
        if t.bits == 64:
            if t.kind == "uint":
                return f"{v}ULL", PRIMARY
            if v == -(2**63):
                return "(-9223372036854775807LL - 1)", PRIMARY
            return f"{v}LL", (UNARY if v < 0 else PRIMARY)
        if t.name == "int32":
            if v == -(2**31):
                return "(-2147483647 - 1)", PRIMARY
            return str(v), (UNARY if v < 0 else PRIMARY)
        if t.name == "uint32":
            return f"{v}u", PRIMARY
        return f"(({t.ctype}){v})", PRIMARY  # narrow ints: typed, so templates deduce them
    v = float(value)
    if t.name in ("float32", "float64") and (math.isinf(v) or math.isnan(v)):
        ctype = t.ctype
        if math.isnan(v):
            bits = "__int_as_float(0x7fc00000)" if t.bits == 32 else \
                "__longlong_as_double(0x7ff8000000000000LL)"
            return bits, PRIMARY
        return (f"tl::infinity<{ctype}>()" if v > 0 else f"tl::lowest<{ctype}>()"), PRIMARY
    if t.name == "float32":
        text = _float_text(v, 32) + "f"
        return text, (UNARY if text.startswith("-") else PRIMARY)
    if t.name == "float64":
        text = _float_text(v, 64)
        return text, (UNARY if text.startswith("-") else PRIMARY)
    # half, bfloat16, fp8: through float
    if math.isnan(v):
        return f"tl::cast<{t.ctype}>(__int_as_float(0x7fc00000))", PRIMARY
    if math.isinf(v):
        return (f"tl::infinity<{t.ctype}>()" if v > 0 else f"tl::lowest<{t.ctype}>()"), PRIMARY
    return f"tl::cast<{t.ctype}>({_float_text(v, 32)}f)", PRIMARY


def c_string(s: str) -> str:
    """``s`` as a C string literal."""
    out = []
    for ch in s:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 32 or ord(ch) > 126:
            out.append("".join(f"\\{b:03o}" for b in ch.encode()))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def template_arg(a: Any) -> str:
    if isinstance(a, bool):
        return "true" if a else "false"
    if isinstance(a, DType):
        return a.ctype
    return str(a)


class Names:
    """C names of the variables and buffers in scope, unique within one kernel function."""

    RESERVED = frozenset("""
        alignas alignof asm auto bool break case catch char class const constexpr continue default
        delete do double else enum explicit extern false float for friend goto if inline int long
        mutable namespace new noexcept nullptr operator private protected public register return
        short signed sizeof static struct switch template this throw true try typedef typename
        union unsigned using virtual void volatile while half half2 float2 float4 int2 int4 uint2
        uint4 threadIdx blockIdx blockDim gridDim warpSize tl printf min max abs exp log sqrt
        main signed_char half_t bfloat16_t
    """.split())

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.of: dict[int, str] = {}  # id(Var or Buffer) -> C name

    def fresh(self, hint: str, internal: bool = False) -> str:
        """A new unique C name from ``hint``; ``internal`` names may use the ``tl_`` prefix."""
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in hint) or "v"
        if base[0].isdigit():
            base = "_" + base
        if base in self.RESERVED or (base.startswith(("tl_", "__")) and not internal):
            base = base.lstrip("_") + "_"
        name, k = base, 1
        while name in self.used:
            name, k = f"{base}_{k}", k + 1
        self.used.add(name)
        return name

    def bind(self, node: Any, hint: Optional[str] = None) -> str:
        """Give ``node`` (a Var or Buffer) a new C name; later uses see this one."""
        name = self.fresh(hint or node.name)
        self.of[id(node)] = name
        return name

    def __getitem__(self, node: Any) -> str:
        try:
            return self.of[id(node)]
        except KeyError:
            kind = "buffer" if isinstance(node, Buffer) else "variable"
            raise VerifyError(f"{kind} '{node.name}' is used in a kernel but not defined there "
                              "(not a parameter, block/thread index, loop/let variable or allocation)") from None


BuiltinRule = Callable[["ExprPrinter", E.Builtin], Rendered]
BUILTINS: dict[str, BuiltinRule] = {}


def builtin_rule(name: str) -> Callable[[BuiltinRule], BuiltinRule]:
    def deco(fn: BuiltinRule) -> BuiltinRule:
        BUILTINS[name] = fn
        return fn
    return deco


INT32_MAX = 2**31 - 1
_WIDE_OPS = ("add", "sub", "mul", "div", "floordiv", "floormod", "truncdiv", "truncmod", "min", "max")


def may_exceed_int32(buf: Buffer) -> bool:
    """A buffer whose element offsets may not fit in 32 bits: more than 2^31 - 1 elements, or a
    shape or stride only known at run time."""
    n = buf.numel()
    if not isinstance(n, int) or n > INT32_MAX:
        return True
    return buf.strides is not None and not all(isinstance(s, int) for s in buf.strides)


def widen(e: E.Expr) -> E.Expr:
    """``e`` with its integer arithmetic done in 64 bits: every leaf of the add/sub/mul/div/min/max
    tree is cast to int64 before it is combined (a cast of the result would come too late)."""
    if isinstance(e, E.BinOp) and e.op in _WIDE_OPS:
        return E.binary(e.op, widen(e.a), widen(e.b))
    if isinstance(e, E.Const) and e.dtype.is_int:
        return E.const(e.value, dt.int64)
    if e.dtype.is_int and e.dtype.bits < 64:
        return E.cast(dt.int64, e)
    return e


class ExprPrinter:
    """Renders expressions of one kernel. ``names`` maps IR variables/buffers to C names.

    ``ranges`` maps the variables in scope to inclusive value ranges and ``thread_range`` is that
    of the thread index; the statement emitter fills them as it goes, so that signed arithmetic
    proven to stay in range is printed plainly and the rest wraps (see the module docstring).
    """

    def __init__(self, names: Names, *, thread_idx: str, fast_math: bool = False,
                 const_buffers: frozenset = frozenset(), index64: bool = False,
                 thread_range: Optional[Interval] = None):
        self.names = names
        self.thread_idx = thread_idx
        self.fast_math = fast_math
        self.const_buffers = const_buffers
        self.index64 = index64
        self.ranges: dict[E.Var, Interval] = {}
        self.thread_range = thread_range
        self.data_vars: set[E.Var] = set()  # lets of values that involve buffer loads
        self.in_index = 0  # > 0 while index arithmetic is rendered

    def index_like(self, e: E.Expr) -> bool:
        """True when integer expression ``e`` is over indices only: no buffer load, no builtin
        but the thread index, no let of a loaded value."""
        found: list = []

        def visit(n: Any) -> None:
            if isinstance(n, E.BufferLoad) or n in self.data_vars or \
                    (isinstance(n, E.Builtin) and n.name != "thread_idx"):
                found.append(n)
        post_order_visit(e, visit)
        return not found

    def index(self, e: Any, parent: int, right: bool = False) -> str:
        """``e`` as an operand (as :meth:`sub`), printed as index arithmetic when it is one."""
        e = E.as_expr(e)
        if not (e.dtype.is_int and self.index_like(e)):
            return self.sub(e, parent, right)
        self.in_index += 1
        try:
            return self.sub(e, parent, right)
        finally:
            self.in_index -= 1

    def range_of(self, e: Any) -> Optional[Interval]:
        """Inclusive range of integer expression ``e`` over the ranges in scope, or None when
        unknown or when some operation in it may wrap."""
        return bound(e, self.ranges, self._leaf_range, wrap=True)

    def _leaf_range(self, e: E.Expr) -> Optional[Interval]:
        if isinstance(e, E.Builtin) and e.name == "thread_idx":
            return self.thread_range
        return None

    def wraps(self, e: E.Expr) -> bool:
        """True when ``e`` (a signed +, -, *, << or negation) must be printed as wrapping
        arithmetic: outside a buffer index, and not proven to stay in its type's range."""
        t = e.dtype
        if self.in_index or not (t.is_int and t.kind == "int"):
            return False
        op = e.op
        if op not in _WRAPPING or (t.bits < 32 and op != "shl"):  # narrow +, -, * fit C's int
            return False
        return self.range_of(e) is None  # unknown, or it may leave the range (arith.bound's wrap)

    # -- entry points ---------------------------------------------------------------------------
    def __call__(self, e: Any) -> str:
        return self.render(E.as_expr(e))[0]

    def render(self, e: E.Expr) -> Rendered:
        rule = _RULES.get(type(e))
        if rule is None:
            raise UnsupportedError(f"unimplemented expression {type(e).__name__} for target cuda", span=e.span)
        return rule(self, e)

    def sub(self, e: Any, parent: int, right: bool = False) -> str:
        """``e`` rendered as an operand of an operator of precedence ``parent``."""
        text, prec = self.render(E.as_expr(e))
        picky = parent in _PICKY and prec > UNARY and prec != parent and \
            not (parent in (LAND, LOR) and prec <= EQ)  # comparisons read fine inside && and ||
        if prec > parent or (right and prec == parent and prec != PRIMARY) or picky:
            return f"({text})"
        return text

    def args(self, args: Any) -> str:
        return ", ".join(self.render(E.as_expr(a))[0] for a in args)

    # -- buffers ----------------------------------------------------------------------------------
    def flat_index(self, buf: Buffer, indices: tuple) -> Optional[E.Expr]:
        """Row-major offset of ``indices`` in ``buf`` (None for a local.var scalar)."""
        if buf.is_var:
            return None
        if len(indices) != buf.ndim:
            raise VerifyError(f"buffer '{buf.name}' has {buf.ndim} dimension(s) but is indexed with {len(indices)}")
        strides = buf.strides
        if strides is None:
            acc: list = []
            s: Any = 1
            for d in reversed(buf.shape):
                acc.append(s)
                s = d if isinstance(s, int) and s == 1 else \
                    s * d if isinstance(s, int) and isinstance(d, int) else E.binary("mul", d, s)
            strides = tuple(reversed(acc))
        wide = buf.scope == "global" and (self.index64 or may_exceed_int32(buf))
        flat: Any = None
        for i, st in zip(indices, strides):
            i = E.as_expr(i)
            if isinstance(i, E.Const) and i.value == 0:
                continue
            unit = isinstance(st, int) and st == 1
            if wide:
                i, st = widen(i), widen(E.as_expr(st))
            term = i if unit else E.binary("mul", i, st)
            flat = term if flat is None else E.binary("add", flat, term)
        if flat is None:
            return E.const(0)
        return flat

    def element(self, buf: Buffer, indices: tuple) -> Rendered:
        """``buf[flat]`` (or the scalar's name) as an lvalue."""
        if buf.is_fragment:
            raise UnsupportedError(f"fragment buffer '{buf.name}' reached codegen: fragments must be "
                                   "lowered to per-thread 'local' buffers first")
        name = self.names[buf]
        flat = self.flat_index(buf, indices)
        if flat is None:
            return name, PRIMARY
        self.in_index += 1
        try:
            text = self.render(flat)[0]
        finally:
            self.in_index -= 1
        return f"{name}[{text}]", PRIMARY

    def address(self, load: Any) -> Rendered:
        if not isinstance(load, E.BufferLoad):
            raise VerifyError(f"address_of needs a buffer element, got {load}")
        text, _ = self.element(load.buffer, load.indices)
        return f"&{text}", UNARY


# ---------------------------------------------------------------------------------------------
# Rules per expression class
# ---------------------------------------------------------------------------------------------

def _var(p: ExprPrinter, e: E.Var) -> Rendered:
    return p.names[e], PRIMARY


def _const(p: ExprPrinter, e: E.Const) -> Rendered:
    return literal(e.value, e.dtype)


def _narrow(t: DType, text: str, prec: int) -> Rendered:
    """Cast an int-promoted result back to a narrow int type (C promotes char/short to int)."""
    if t.is_int and t.bits < 32:
        return f"(({t.ctype})({text}))", PRIMARY
    return text, prec


def _is_pow2_const(e: E.Expr) -> Optional[int]:
    if isinstance(e, E.Const) and e.dtype.is_int and int(e.value) > 0 and (int(e.value) & (int(e.value) - 1)) == 0:
        return int(e.value).bit_length() - 1
    return None


_WRAPPING = ("add", "sub", "mul", "shl", "neg")


def _unsigned_of(t: DType) -> str:
    return "unsigned long long" if t.bits == 64 else "unsigned"


def _as_unsigned(p: ExprPrinter, e: E.Expr, t: DType) -> Rendered:
    """``e`` (of signed type ``t``) as a value of the unsigned type of ``t``'s width: the
    unsigned form of a wrapping operation itself, else a cast."""
    if e.dtype == t and isinstance(e, (E.BinOp, E.UnaryOp)) and p.wraps(e):
        return _unsigned_form(p, e)
    if isinstance(e, E.Const):
        return f"{int(e.value) % 2 ** max(t.bits, 32)}{'ULL' if t.bits == 64 else 'u'}", PRIMARY
    return f"({_unsigned_of(t)}){p.sub(e, UNARY)}", UNARY


def _unsigned_operand(p: ExprPrinter, e: E.Expr, t: DType, parent: int, right: bool = False) -> str:
    text, prec = _as_unsigned(p, e, t)
    return f"({text})" if prec > parent or (right and prec == parent) else text


def _unsigned_form(p: ExprPrinter, e: Any) -> Rendered:
    """The wrapping operation ``e`` computed on unsigned operands (modular, defined in C++)."""
    t = e.dtype
    if isinstance(e, E.UnaryOp):  # neg
        return f"-{_unsigned_operand(p, e.a, t, UNARY)}", UNARY
    row = ops.BINARY[e.op]
    if e.op == "shl":  # the shift amount keeps its type
        return f"{_unsigned_operand(p, e.a, t, SHIFT)} << {p.sub(e.b, SHIFT, True)}", SHIFT
    a = _unsigned_operand(p, e.a, t, row.c_prec)
    b = _unsigned_operand(p, e.b, t, row.c_prec, True)
    return f"{a} {row.c} {b}", row.c_prec


def _wrapped(p: ExprPrinter, e: Any) -> Rendered:
    text, _ = _unsigned_form(p, e)
    return f"(({e.dtype.ctype})({text}))", PRIMARY


def _binop(p: ExprPrinter, e: E.BinOp) -> Rendered:
    t, row = e.dtype, ops.BINARY[e.op]
    if e.op in ("floordiv", "floormod"):
        return _floor_divmod(p, e)
    if e.op in _WRAPPING and p.wraps(e):
        return _wrapped(p, e)
    if row.c_prec == PRIMARY:  # a function: tl::min(a, b)
        return f"{row.c}({p.args((e.a, e.b))})", PRIMARY
    text = f"{p.sub(e.a, row.c_prec)} {row.c} {p.sub(e.b, row.c_prec, True)}"
    if row.c_wraps:
        return _narrow(t, text, row.c_prec)
    return text, row.c_prec


def _floor_divmod(p: ExprPrinter, e: E.BinOp) -> Rendered:
    t = e.dtype
    if t.is_float:
        q = f"{p.sub(e.a, MUL)} / {p.sub(e.b, MUL, True)}"
        fl = "floorf" if t.name == "float32" else "floor"
        if is_lowp(t):
            q = f"tl::cast<float>({p(e.a)}) / tl::cast<float>({p(e.b)})"
            fl = "floorf"
        if e.op == "floordiv":
            text = f"{fl}({q})"
            return (f"tl::cast<{t.ctype}>({text})", PRIMARY) if is_lowp(t) else (text, PRIMARY)
        if is_lowp(t):
            a, b = f"tl::cast<float>({p(e.a)})", f"tl::cast<float>({p(e.b)})"
            return f"tl::cast<{t.ctype}>({a} - floorf({a} / {b}) * {b})", PRIMARY
        return f"{p.sub(e.a, ADD)} - {fl}({q}) * {p.sub(e.b, MUL, True)}", ADD
    if t.kind == "uint":
        sym = "/" if e.op == "floordiv" else "%"
        return f"{p.sub(e.a, MUL)} {sym} {p.sub(e.b, MUL, True)}", MUL
    k = _is_pow2_const(e.b)
    if k is not None:  # two's complement: >> rounds toward -inf, & keeps the non-negative residue
        if e.op == "floordiv":
            return (p.render(e.a) if k == 0 else (f"{p.sub(e.a, SHIFT)} >> {k}", SHIFT))
        return f"{p.sub(e.a, BAND)} & {literal((1 << k) - 1, t)[0]}", BAND
    return f"tl::{e.op}({p.args((e.a, e.b))})", PRIMARY


def _compare(p: ExprPrinter, e: E.Compare) -> Rendered:
    row = ops.COMPARE[e.op]
    if e.a.dtype.is_int and p.index_like(e):  # a bounds guard or a mask over indices
        return f"{p.index(e.a, row.c_prec)} {row.c} {p.index(e.b, row.c_prec, True)}", row.c_prec
    return f"{p.sub(e.a, row.c_prec)} {row.c} {p.sub(e.b, row.c_prec, True)}", row.c_prec


def _unary(p: ExprPrinter, e: E.UnaryOp) -> Rendered:
    row = ops.UNARY[e.op]
    if e.op == "neg" and p.wraps(e):
        return _wrapped(p, e)
    text, prec = p.render(e.a)
    operand = text if prec == PRIMARY else f"({text})"
    if e.op == "neg" and is_lowp(e.dtype) and e.dtype.bits == 8:
        return f"tl::cast<{e.dtype.ctype}>(-tl::cast<float>({text}))", PRIMARY
    if row.c_wraps:
        return _narrow(e.dtype, f"{row.c}{operand}", UNARY)
    return f"{row.c}{operand}", UNARY


def _select(p: ExprPrinter, e: E.Select) -> Rendered:
    return f"{p.sub(e.cond, LOR)} ? {p.sub(e.then, COND)} : {p.sub(e.else_, COND, True)}", COND


def _cast(p: ExprPrinter, e: E.Cast) -> Rendered:
    to, frm = e.to, e.value.dtype
    if is_lowp(to) or is_lowp(frm):
        return f"tl::cast<{to.ctype}>({p(e.value)})", PRIMARY
    if frm.is_float and to.is_int:  # cvt.rzi at every width: saturating, NaN -> 0 (tegula/ir/ops.py)
        return f"tl::float_to_int<{to.ctype}>({p(e.value)})", PRIMARY
    return f"({to.ctype}){p.sub(e.value, UNARY)}", UNARY


def _call_math(p: ExprPrinter, name: str, args: tuple, t: DType) -> Rendered:
    row = ops.INTRINSICS.get(name)
    if row is None:
        raise UnsupportedError(f"unimplemented intrinsic {name} for target cuda")
    if t.is_int or t.is_bool:
        return _int_math(p, name, args, t)
    f32, f64, fast = row.c
    if t.name == "float64":
        return f64.format(p.args(args)), PRIMARY
    tmpl = fast if (p.fast_math and fast is not None) else f32
    if is_lowp(t):
        inner = tmpl.format(", ".join(f"tl::cast<float>({p(a)})" for a in args))
        if name in ("isnan", "isinf"):
            return inner, PRIMARY
        return f"tl::cast<{t.ctype}>({inner})", PRIMARY
    return tmpl.format(p.args(args)), PRIMARY


def _int_math(p: ExprPrinter, name: str, args: tuple, t: DType) -> Rendered:
    a = args[0]
    if name in ("floor", "ceil", "round", "trunc"):
        return p.render(E.as_expr(a))
    if name in ("isnan", "isinf"):
        return "false", PRIMARY
    if name == "abs":
        if t.kind == "uint" or t.is_bool:
            return p.render(E.as_expr(a))
        if t.bits == 64:
            return f"llabs({p(a)})", PRIMARY
        return _narrow(t, f"abs({p(a)})", PRIMARY)
    if name == "fmod":
        return f"{p.sub(a, MUL)} % {p.sub(args[1], MUL, True)}", MUL
    if name == "pow":
        return f"({t.ctype})rint(pow((double){p.sub(a, UNARY)}, (double){p.sub(args[1], UNARY)}))", UNARY
    raise UnsupportedError(f"unimplemented intrinsic {name} on integers for target cuda")


def _call(p: ExprPrinter, e: E.Call) -> Rendered:
    t = e.args[0].dtype
    return _call_math(p, e.name, e.args, t)


def _load(p: ExprPrinter, e: E.BufferLoad) -> Rendered:
    return p.element(e.buffer, e.indices)


def _builtin(p: ExprPrinter, e: E.Builtin) -> Rendered:
    rule = BUILTINS.get(e.name)
    if rule is None and "::" in e.name:
        rule = _extern_call
    if rule is None:
        raise UnsupportedError(f"unimplemented builtin {e.name} for target cuda", span=e.span)
    return rule(p, e)


_RULES: dict[type, Callable[[ExprPrinter, Any], Rendered]] = {
    E.Var: _var, E.Const: _const, E.BinOp: _binop, E.Compare: _compare, E.UnaryOp: _unary,
    E.Select: _select, E.Cast: _cast, E.Call: _call, E.BufferLoad: _load, E.Builtin: _builtin,
}


# ---------------------------------------------------------------------------------------------
# Builtins
# ---------------------------------------------------------------------------------------------

def _extern_call(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``ns::fn<template...>(args)`` for any name with ``::``."""
    tmpl = e.attr("template")
    targs = ""
    if tmpl is not None:
        tmpl = tmpl if isinstance(tmpl, (tuple, list)) else (tmpl,)
        targs = "<" + ", ".join(template_arg(a) for a in tmpl) + ">"
    return f"{e.name}{targs}({p.args(e.args)})", PRIMARY


@builtin_rule("bitcast")
def _bitcast(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``T.reinterpret``: the argument's bits as ``e.ret``. The argument's own type is named:
    C's integer promotion makes a ``uint16`` expression an ``int``, of another width."""
    a = e.args[0]
    return f"tl::bit_cast<{e.ret.ctype}, {a.dtype.ctype}>({p.render(a)[0]})", PRIMARY


@builtin_rule("call_extern")
def _call_extern(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``T.call_extern``: a call of the C function ``attrs["callee"]`` (from ``T.import_source``)."""
    return f"{e.attr('callee')}({p.args(e.args)})", PRIMARY


@builtin_rule("thread_idx")
def _thread_idx(p: ExprPrinter, e: E.Builtin) -> Rendered:
    simple = re.fullmatch(r"[\w.]+", p.thread_idx) is not None
    return p.thread_idx, (PRIMARY if simple else ADD)


@builtin_rule("sync_threads")
def _sync_threads(p: ExprPrinter, e: E.Builtin) -> Rendered:
    return "__syncthreads()", PRIMARY


@builtin_rule("sync_warp")
def _sync_warp(p: ExprPrinter, e: E.Builtin) -> Rendered:
    return "__syncwarp()", PRIMARY


@builtin_rule("address_of")
def _address_of(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``&buf[flat]``; with attrs ``ctype``, that address as a ``ctype*``."""
    ctype = e.attr("ctype")
    addr = p.address(e.args[0])
    if ctype is None:
        return addr
    load = e.args[0]
    if isinstance(load, E.BufferLoad) and load.buffer in p.const_buffers:
        ctype = f"const {ctype}"
    return f"reinterpret_cast<{ctype}*>({addr[0]})", PRIMARY


@builtin_rule("reinterpret")
def _reinterpret(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``*reinterpret_cast<ctype*>(&elem)``: the element's bytes seen as ``ctype`` (an lvalue)."""
    load = e.args[0]
    ctype = e.attr("ctype") or e.ret.ctype
    if isinstance(load, E.BufferLoad) and load.buffer in p.const_buffers:
        ctype = f"const {ctype}"
    addr, _ = p.address(load)
    return f"*reinterpret_cast<{ctype}*>({addr})", UNARY


@builtin_rule("assign")
def _assign(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``lhs = rhs`` where lhs is an lvalue builtin (e.g. reinterpret) or a load."""
    return f"{p.sub(e.args[0], UNARY)} = {p.sub(e.args[1], COND)}", COND + 1


@builtin_rule("shfl_xor")
def _shfl_xor(p: ExprPrinter, e: E.Builtin) -> Rendered:
    value, mask = e.args[0], e.args[1]
    width = e.args[2] if len(e.args) > 2 else None
    if width is None or (isinstance(width, E.Const) and int(width.value) == 32):
        return f"tl::shfl_xor({p.args((value, mask))})", PRIMARY
    return f"tl::shfl_xor_width({p.args((value, mask, width))})", PRIMARY


def _shfl_print(kind: str) -> None:
    @builtin_rule(kind)
    def _shfl(p: ExprPrinter, e: E.Builtin) -> Rendered:
        """``T.shfl_sync`` / ``shfl_down`` / ``shfl_up``: ``tl::shfl_idx(value, lane, width)``..."""
        return f"tl::{kind}({p.args(e.args)})", PRIMARY


for _kind in ("shfl_idx", "shfl_down", "shfl_up"):
    _shfl_print(_kind)


@builtin_rule("device_assert")
def _device_assert(p: ExprPrinter, e: E.Builtin) -> Rendered:
    """``T.device_assert(cond, msg)``: print the message and trap where ``cond`` is false."""
    msg = c_string(f"T.device_assert failed: {e.attr('msg', '')}\n")
    return f"(void)(({p(e.args[0])}) || (printf({msg}), __trap(), 0))", PRIMARY


@builtin_rule("printf")
def _printf(p: ExprPrinter, e: E.Builtin) -> Rendered:
    parts = [c_string(e.attr("fmt", ""))]
    for a in e.args:
        a = E.as_expr(a)
        t = a.dtype
        if t.is_float:
            inner = f"tl::cast<float>({p(a)})" if is_lowp(t) else p.sub(a, UNARY)
            parts.append(f"(double){inner}")
        elif t.is_bool or (t.is_int and t.bits < 32):
            parts.append(f"(int){p.sub(a, UNARY)}")
        elif t.is_int and t.bits == 64:
            parts.append(f"({'unsigned long long' if t.kind == 'uint' else 'long long'}){p.sub(a, UNARY)}")
        else:
            parts.append(p(a))
    return f"printf({', '.join(parts)})", PRIMARY
