"""Printing IR as T-script: readable, valid Python in TileLang style.

:func:`expr_str` prints one expression with as few parentheses as Python's precedence allows
(``Expr.__str__`` uses it). :func:`script` prints a whole ``PrimFunc``::

    m = T.dynamic("m")

    @T.prim_func
    def main(A: T.Tensor((m, 64), "float16"), B: T.Tensor((m, 64), "float16")):
        with T.Kernel(T.ceildiv(m, 128), threads=128) as bx:
            for i, j in T.Parallel(128, 64):
                B[bx * 128 + i, j] = A[bx * 128 + i, j]

Distinct variables or buffers that share a name while both are in scope print with suffixes
``_1``, ``_2``, ... so the text can be read back without ambiguity.
"""
from __future__ import annotations

import keyword
import math
from typing import Any, Callable, Optional, Union

from tegula.ir.annotations import CLUSTER, LAYOUT_MAP, SWIZZLE
from tegula.ir import dtype as dt
from tegula.ir import hooks
from tegula.ir import expr as E
from tegula.ir import ops
from tegula.ir import stmt as S
from tegula.ir.buffer import FRAGMENT, SHARED_DYN, Buffer, BufferRegion
from tegula.ir.linear import cancel
from tegula.ir.tile_rules import TILE_RULES, tile_rule

# Python precedence, loosest first; atoms (names, calls, subscripts) bind tightest.
PREC_COMPARE, PREC_OR, PREC_UNARY, PREC_ATOM = ops.PY_COMPARE, ops.PY_OR, ops.PY_UNARY, ops.PY_ATOM
_DEFAULT_CONST_DTYPES = ("int32", "float32", "bool")
_INDENT = "    "


def _q(s: str) -> str:
    """A string literal, double-quoted as TileLang code writes them."""
    if '"' not in s and "\\" not in s and "\n" not in s:
        return f'"{s}"'
    return repr(s)


def const_str(c: E.Const) -> tuple[str, int]:
    """Text and precedence of a constant (``T.float16(1.5)`` for non-default dtypes)."""
    v = c.value
    name = c.dtype.name
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v)):
        if math.isnan(v):
            return f"T.{name}(float(\"nan\"))", PREC_ATOM
        text = f"T.infinity({_q(name)})"
        return (text, PREC_ATOM) if v > 0 else ("-" + text, PREC_UNARY)
    text = _float_text(v, c.dtype) if isinstance(v, float) else repr(v)
    if name not in _DEFAULT_CONST_DTYPES:
        return f"T.{name}({text})", PREC_ATOM
    return text, (PREC_UNARY if text.startswith("-") else PREC_ATOM)


def _float_text(v: float, d: dt.DType) -> str:
    """The shortest decimal that reads back as ``v`` at dtype ``d``, in Python's style."""
    if d.bits < 64:
        for digits in range(1, 17):
            short = float(f"{v:.{digits}g}")
            if ops.wrap(short, d) == v:
                return repr(short)
    return repr(v)


class ExprPrinter:
    """Prints expressions; ``name_of`` gives the printed name of a Var or Buffer."""

    def __init__(self, name_of: Optional[Callable[[Any], str]] = None):
        self.name_of = name_of or (lambda obj: obj.name)

    def __call__(self, e: E.Expr) -> str:
        return self.expr(e)[0]

    def wrap(self, e: E.Expr, min_prec: int) -> str:
        """``e`` in parentheses unless it binds at least as tightly as ``min_prec``."""
        text, prec = self.expr(e)
        return text if prec >= min_prec else f"({text})"

    def expr(self, e: Any) -> tuple[str, int]:
        if not isinstance(e, E.Expr):
            return repr(e), PREC_ATOM
        if isinstance(e, E.Var):
            return self.name_of(e), PREC_ATOM
        if isinstance(e, E.Const):
            return const_str(e)
        if isinstance(e, E.BinOp):
            row = ops.BINARY[e.op]
            if row.is_call:
                return f"{row.py}({self(e.a)}, {self(e.b)})", PREC_ATOM
            ceil = _ceildiv_operands(e)
            if ceil is not None:
                return f"T.ceildiv({self(ceil[0])}, {self(ceil[1])})", PREC_ATOM
            p = row.py_prec
            # left-associative: an equal-precedence right operand keeps its parentheses
            return f"{self.wrap(e.a, p)} {row.py} {self.wrap(e.b, p + 1)}", p
        if isinstance(e, E.Compare):
            # comparisons chain in Python, so neither side may be a bare comparison
            sym = ops.COMPARE[e.op].py
            return f"{self.wrap(e.a, PREC_OR)} {sym} {self.wrap(e.b, PREC_OR)}", PREC_COMPARE
        if isinstance(e, E.UnaryOp):
            return f"{ops.UNARY[e.op].py}{self.wrap(e.a, PREC_UNARY)}", PREC_UNARY
        if isinstance(e, E.Select):
            return f"T.if_then_else({self(e.cond)}, {self(e.then)}, {self(e.else_)})", PREC_ATOM
        if isinstance(e, E.Cast):
            return f"T.Cast({_q(e.to.name)}, {self(e.value)})", PREC_ATOM
        if isinstance(e, E.Call):
            return f"T.{e.name}({', '.join(self(a) for a in e.args)})", PREC_ATOM
        if isinstance(e, E.Builtin):
            args = [self(a) for a in e.args] + [f"{k}={value_str(v)}" for k, v in e.attrs]
            if e.ret != dt.int32:
                args.append(f"ret={_q(e.ret.name)}")
            return f"T.{e.name}({', '.join(args)})", PREC_ATOM
        if isinstance(e, E.BufferLoad):
            name = self.name_of(e.buffer)
            if e.buffer.is_var:
                return name, PREC_ATOM
            return f"{name}[{', '.join(self(i) for i in e.indices)}]", PREC_ATOM
        return f"<{type(e).__name__}>", PREC_ATOM


def _ceildiv_operands(e: E.BinOp) -> Optional[tuple[E.Expr, E.Expr]]:
    """``(x + (c - 1)) // c`` (or ``(x + c - 1) // c``) as ``(x, c)``: how ``T.ceildiv`` is built."""
    if e.op != "floordiv" or not isinstance(e.b, E.Const) or not e.b.dtype.is_int or e.b.value <= 1:
        return None
    c, a = e.b.value, e.a
    if isinstance(a, E.BinOp) and a.op == "add" and isinstance(a.b, E.Const) and a.b.value == c - 1:
        return a.a, e.b
    if isinstance(a, E.BinOp) and a.op == "sub" and isinstance(a.b, E.Const) and a.b.value == 1 \
            and isinstance(a.a, E.BinOp) and a.a.op == "add" and isinstance(a.a.b, E.Const) \
            and a.a.b.value == c:
        return a.a.a, e.b
    return None


def expr_str(e: E.Expr) -> str:
    """One expression as T-script text, with minimal parentheses."""
    return ExprPrinter()(e)


# ---------------------------------------------------------------------------------------------
# Statements and functions
# ---------------------------------------------------------------------------------------------

_RESERVED = {"T", "tilelang", "range", "float", "int", "bool"} | set(keyword.kwlist)
_ALLOC_CALL = {SHARED_DYN: "T.alloc_shared", FRAGMENT: "T.alloc_fragment",
               "local": "T.alloc_local"}
_PIPELINE_KEYS = ("num_stages", "order", "stage", "group")


def _sanitize(name: str) -> str:
    out = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in name) or "v"
    return "v_" + out if out[0].isdigit() else out


class ScriptPrinter:
    """Prints statements and functions, giving distinct names to distinct Vars and Buffers."""

    def __init__(self) -> None:
        self.names: dict[Any, str] = {}
        self.live: set[str] = set()
        self.scopes: list[list[str]] = [[]]
        self.lines: list[str] = []
        self.ep = ExprPrinter(self.name_of)

    # -- names ----------------------------------------------------------------------------------
    def define(self, obj: Union[E.Var, Buffer]) -> str:
        """Give ``obj`` a name not used by anything in scope, in the innermost scope."""
        if obj in self.names and self.names[obj] in self.live:
            return self.names[obj]
        base = _sanitize(obj.name)
        name, k = base, 1
        while name in self.live or name in _RESERVED:
            name, k = f"{base}_{k}", k + 1
        self.names[obj] = name
        self.live.add(name)
        self.scopes[-1].append(name)
        return name

    def name_of(self, obj: Union[E.Var, Buffer]) -> str:
        name = self.names.get(obj)
        if name is not None:
            return name
        # referenced but never defined (ill-formed IR): name it in the outermost scope
        saved, self.scopes = self.scopes, self.scopes[:1]
        try:
            return self.define(obj)
        finally:
            self.scopes = saved

    def push(self) -> None:
        self.scopes.append([])

    def pop(self) -> None:
        for name in self.scopes.pop():
            self.live.discard(name)

    # -- pieces ---------------------------------------------------------------------------------
    def e(self, x: Any) -> str:
        if isinstance(x, E.Expr):
            return self.ep(x)
        if isinstance(x, Buffer):
            return self.name_of(x)
        if isinstance(x, BufferRegion):
            return self.region(x)
        return value_str(x)

    def dim(self, d: Any) -> str:
        return str(d) if isinstance(d, int) else self.e(d)

    def shape(self, shape: tuple) -> str:
        dims = [self.dim(d) for d in shape]
        return f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})"

    def region(self, r: BufferRegion) -> str:
        """Whole buffer: its name; unit extents: an index; other dimensions: slices."""
        buf = r.buffer
        name = self.name_of(buf)
        full = [_is_zero(s) and _same_dim(ext, d) for (s, ext), d in zip(r.ranges, buf.shape)]
        if len(r.ranges) == buf.ndim and all(full):
            return name
        parts = []
        for (start, ext), is_full in zip(r.ranges, full):
            if is_full:
                parts.append(":")
            elif isinstance(ext, int) and ext == 1:
                parts.append(self.e(start))
            else:
                stop = E.binary("add", start, ext)
                lo = "" if _is_zero(start) else self.e(start)
                parts.append(f"{lo}:{self.e(stop)}")
        return f"{name}[{', '.join(parts)}]"

    def line(self, text: str, depth: int) -> None:
        self.lines.append(_INDENT * depth + text)

    # -- statements -----------------------------------------------------------------------------
    def block(self, body: Any, depth: int) -> None:
        """A nested block in its own naming scope."""
        self.push()
        start = len(self.lines)
        self.stmt(body, depth)
        if len(self.lines) == start:
            self.line("pass", depth)
        self.pop()

    def stmt(self, s: Any, depth: int) -> None:
        if isinstance(s, S.TileOp):
            self.line(TILE_RULES.require(s, "print")(self, s), depth)
            return
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            for cls in type(s).__mro__[1:]:
                method = getattr(self, "stmt_" + cls.__name__, None)
                if method is not None:
                    break
        if method is None or type(s) is S.Stmt:
            self.line(f"# <{type(s).__name__}>", depth)
            return
        method(s, depth)

    def stmt_SeqStmt(self, s: Any, depth: int) -> None:
        for x in s.stmts:
            self.stmt(x, depth)

    def stmt_AttrStmt(self, s: Any, depth: int) -> None:
        if s.key == S.WARP_SPECIALIZE and len(s.value) == 2:  # tile level: as the user writes it
            lo, n = s.value
            groups = ", ".join(str(g) for g in range(lo // S.WARPGROUP, (lo + n) // S.WARPGROUP))
            self.line(f"with T.ws({groups}):", depth)
            self.block(s.body, depth + 1)
            return
        where = f"  ({s.span.short()})" if s.span is not None else ""
        self.line(f"# {s.key}: {s.value}{where}", depth)
        self.stmt(s.body, depth)

    def stmt_Evaluate(self, s: Any, depth: int) -> None:
        self.line(f"T.evaluate({self.e(s.value)})", depth)

    def stmt_Break(self, s: Any, depth: int) -> None:
        self.line("break", depth)

    def stmt_Continue(self, s: Any, depth: int) -> None:
        self.line("continue", depth)

    def stmt_While(self, s: Any, depth: int) -> None:
        self.line(f"while {self.e(s.cond)}:", depth)
        self.block(s.body, depth + 1)

    def stmt_IfThenElse(self, s: Any, depth: int) -> None:
        from tegula.ir.stmt import IfThenElse

        keyword_ = "if"
        while True:
            self.line(f"{keyword_} {self.e(s.cond)}:", depth)
            self.block(s.then, depth + 1)
            if isinstance(s.else_, IfThenElse):
                s, keyword_ = s.else_, "elif"
                continue
            if s.else_ is not None:
                self.line("else:", depth)
                self.block(s.else_, depth + 1)
            return

    def stmt_BufferStore(self, s: Any, depth: int) -> None:
        if s.buffer.is_var and len(s.indices) == 1 and _is_zero(s.indices[0]):
            # assigning to a T.alloc_var name stores into it
            self.line(f"{self.name_of(s.buffer)} = {self.e(s.value)}", depth)
            return
        idx = ", ".join(self.e(i) for i in s.indices)
        self.line(f"{self.name_of(s.buffer)}[{idx}] = {self.e(s.value)}", depth)

    def stmt_LetStmt(self, s: Any, depth: int) -> None:
        value = self.e(s.value)  # printed before the name exists: the value cannot see it
        self.line(f"{self.define(s.var)} = {value}", depth)

    def stmt_For(self, s: Any, depth: int) -> None:
        from tegula.ir.stmt import For

        if s.kind == "parallel" and _plain(s):
            loops = [s]
            while isinstance(loops[-1].body, For) and loops[-1].body.kind == "parallel" \
                    and _plain(loops[-1].body) and not loops[-1].annotations:
                loops.append(loops[-1].body)
            extents = [self.dim(f.extent) for f in loops]
            self.push()
            names = [self.define(f.var) for f in loops]
            kw = _kwargs(loops[-1].annotations, (), self.e)
            self.line(f"for {', '.join(names)} in T.Parallel({', '.join(extents + kw)}):", depth)
            start = len(self.lines)
            self.stmt(loops[-1].body, depth + 1)
            if len(self.lines) == start:
                self.line("pass", depth + 1)
            self.pop()
            return
        args = self.loop_range(s)
        keys = _PIPELINE_KEYS if s.kind == "pipelined" else ()
        kw = _kwargs(s.annotations, keys, self.e)
        func = {"pipelined": "T.Pipelined", "serial": "T.serial", "unroll": "T.unroll",
                "vectorized": "T.vectorized", "parallel": "T.Parallel"}.get(s.kind, f"T.{s.kind}")
        self.push()
        name = self.define(s.var)
        self.line(f"for {name} in {func}({', '.join(args + kw)}):", depth)
        start = len(self.lines)
        self.stmt(s.body, depth + 1)
        if len(self.lines) == start:
            self.line("pass", depth + 1)
        self.pop()

    def loop_range(self, s: Any) -> list[str]:
        if _is_zero(s.start) and s.step == 1:
            return [self.dim(s.extent)]
        stop = cancel(E.binary("add", s.start, E.binary("mul", s.extent, s.step)))
        args = [self.e(s.start), self.e(stop)]
        if s.step != 1:
            args.append(str(s.step))
        return args

    def stmt_Kernel(self, k: Any, depth: int) -> None:
        grid = [self.dim(g) for g in k.grid]
        threads = str(k.threads[0]) if len(k.threads) == 1 else self.shape(k.threads)
        self.push()
        names = [self.define(v) for v in k.block_vars]
        target = names[0] if len(names) == 1 else f"({', '.join(names)})"
        cluster = CLUSTER.get(k.annotations)  # thread block clusters (T.Kernel's cluster_dims)
        extra = [f"cluster_dims={tuple(int(c) for c in cluster)}"] if cluster else []
        head = f"with T.Kernel({', '.join(grid + [f'threads={threads}'] + extra)})"
        self.line(f"{head} as {target}:" if names else f"{head}:", depth)
        d = depth + 1
        start = len(self.lines)
        thread_var = getattr(k, "thread_var", None)
        if thread_var is not None:
            self.line(f"{self.define(thread_var)} = T.get_thread_binding()", d)
        for buf in k.allocs:
            self.line(f"{self.define(buf)} = {self.alloc(buf, k.alloc_inits)}", d)
        ann = dict(k.annotations)
        ann.pop(CLUSTER.name, None)  # in the T.Kernel line
        swizzle = ann.pop(SWIZZLE.name, None)
        if swizzle is not None:
            panel, order = swizzle if isinstance(swizzle, tuple) else (swizzle, "row")
            self.line(f"T.use_swizzle({self.e(panel)}, order={_q(str(order))})", d)
        disabled = ann.pop("swizzle_disabled", None)
        if disabled is not None:
            self.line(f"T.use_swizzle({self.e(disabled[0])}, order={_q(str(disabled[1]))}, enable=False)", d)
        min_blocks = ann.pop("min_blocks_per_sm", None)
        if min_blocks is not None:
            self.line(f"T.annotate_min_blocks_per_sm({min_blocks})", d)
        layouts = ann.pop(LAYOUT_MAP.name, None)
        ann.pop("layout_spans", None)  # where each layout was given (for errors), not IR
        if layouts:
            items = [f"{self.name_of(b)}: {self.e(lay)}" for b, lay in layouts.items()]
            if len(items) == 1:
                self.line(f"T.annotate_layout({{{items[0]}}})", d)
            else:  # one buffer a line, so a diff shows the one that changed
                self.line("T.annotate_layout({", d)
                for item in items:
                    self.line(f"{item},", d + 1)
                self.line("})", d)
        for key, value in ann.items():
            self.line(f"# annotation {key} = {self.e(value)}", d)
        self.stmt(k.body, d)
        if len(self.lines) == start:
            self.line("pass", d)
        self.pop()

    def alloc(self, buf: Buffer, inits: dict) -> str:
        dtype = _q(buf.dtype.name)
        if buf.is_var:
            init = inits.get(buf)
            return f"T.alloc_var({dtype}" + (f", init={self.e(init)})" if init is not None else ")")
        if buf.scope in _ALLOC_CALL:
            return f"{_ALLOC_CALL[buf.scope]}({self.shape(buf.shape)}, {dtype})"
        if buf.scope == "shared":  # T.alloc_shared defaults to "shared.dyn", as in TileLang
            return f"T.alloc_shared({self.shape(buf.shape)}, {dtype}, scope=\"shared\")"
        return f"T.alloc_buffer({self.shape(buf.shape)}, {dtype}, scope={_q(buf.scope)})"

    # -- functions ------------------------------------------------------------------------------
    def func(self, f: Any) -> str:
        from tegula.ir.visitor import collect_vars

        scalars = [p for p in f.params if isinstance(p, E.Var)]
        dyn: list[E.Var] = []
        for p in f.params:
            if isinstance(p, Buffer):
                for v in collect_vars(p):
                    if not any(v is s for s in dyn) and not any(v is s for s in scalars):
                        dyn.append(v)
        header = []
        for v in dyn:
            extra = "" if v.dtype == dt.int32 else f", {_q(v.dtype.name)}"
            header.append(f"{self.define(v)} = T.dynamic({_q(v.name)}{extra})")
        params = []
        for p in f.params:
            if isinstance(p, Buffer):
                params.append(f"{self.define(p)}: {self.tensor_type(p)}")
            else:
                params.append(f"{self.define(p)}: T.{p.dtype.name}")
        out = header + ([""] if header else [])
        out.append("@T.prim_func")
        out.append(f"def {_sanitize(f.name)}({', '.join(params)}):")
        self.block(f.body, 1)
        return "\n".join(out + self.lines) + "\n"

    def tensor_type(self, b: Buffer) -> str:
        args = [self.shape(b.shape), _q(b.dtype.name)]
        if b.strides is not None:
            args.append(f"strides={self.shape(b.strides)}")
        if not b.is_global:
            args.append(f"scope={_q(b.scope)}")
        return f"T.Tensor({', '.join(args)})"


# ---------------------------------------------------------------------------------------------
# Tile operations: one "print" rule each (tegula.ir.tile_rules), giving the op's line
# ---------------------------------------------------------------------------------------------

@tile_rule(S.Copy, "print")
def _print_copy(p: ScriptPrinter, s: S.Copy) -> str:
    kw = _kwargs(s.annotations, (), p.e)
    return f"T.copy({', '.join([p.e(s.src), p.e(s.dst)] + kw)})"


@tile_rule(S.Gemm, "print")
def _print_gemm(p: ScriptPrinter, s: S.Gemm) -> str:
    args = [p.e(s.A), p.e(s.B), p.e(s.C)]
    if s.transpose_A:
        args.append("transpose_A=True")
    if s.transpose_B:
        args.append("transpose_B=True")
    if s.policy != "Square":
        args.append(f"policy=T.GemmWarpPolicy.{s.policy}")
    if isinstance(s.clear_accum, E.Expr):  # a runtime condition (NPU accumulators only)
        args.append(f"clear_accum={p.e(s.clear_accum)}")
    elif s.clear_accum:
        args.append("clear_accum=True")
    if s.k_pack != 1:
        args.append(f"k_pack={s.k_pack}")
    if s.wg_wait != 0:
        args.append(f"wg_wait={s.wg_wait}")
    return f"T.gemm({', '.join(args)})"


@tile_rule(S.Reduce, "print")
def _print_reduce(p: ScriptPrinter, s: S.Reduce) -> str:
    clear = "" if s.clear else ", clear=False"
    return f"{s.op_name}({p.e(s.src)}, {p.e(s.dst)}, dim={s.dim}{clear})"


@tile_rule(S.CumSum, "print")
def _print_scan(p: ScriptPrinter, s: S.CumSum) -> str:
    rev = ", reverse=True" if s.reverse else ""
    return f"{s.op_name}({p.e(s.src)}, {p.e(s.dst)}, dim={s.dim}{rev})"


@tile_rule(S.Fill, "print")
def _print_fill(p: ScriptPrinter, s: S.Fill) -> str:
    return f"T.fill({p.e(s.dst)}, {p.e(s.value)})"


@tile_rule(S.Atomic, "print")
def _print_atomic(p: ScriptPrinter, s: S.Atomic) -> str:
    return f"T.atomic_{s.kind}({p.e(s.dst)}, {p.e(s.value)})"


@tile_rule(S.Print, "print")
def _print_print(p: ScriptPrinter, s: S.Print) -> str:
    msg = f", msg={_q(s.msg)}" if s.msg else ""
    return f"T.print({p.e(s.obj)}{msg})"


@tile_rule(S.TileOp, "print")
def _print_tile_op(p: ScriptPrinter, s: S.TileOp) -> str:
    """Any tile op without a rule of its own: ``T.ClassName(field=value, ...)``."""
    from tegula.ir.visitor import node_fields

    args = [f"{f}={p.e(getattr(s, f))}" for f in node_fields(s)]
    return f"T.{type(s).__name__}({', '.join(args)})"


def _is_zero(e: Any) -> bool:
    return (isinstance(e, int) and e == 0) or (isinstance(e, E.Const) and e.value == 0)


def _same_dim(a: Any, b: Any) -> bool:
    if isinstance(a, E.Const):
        a = a.value
    if isinstance(b, E.Const):
        b = b.value
    if isinstance(a, int) or isinstance(b, int):
        return isinstance(a, int) and isinstance(b, int) and a == b
    from tegula.ir.structural import structural_equal

    return a is b or structural_equal(a, b, map_free_vars=False)


def _plain(f: Any) -> bool:
    return _is_zero(f.start) and f.step == 1


def _kwargs(ann: dict, order: tuple[str, ...], fmt: Callable[[Any], str]) -> list[str]:
    keys = [k for k in order if k in ann] + [k for k in ann if k not in order]
    return [f"{k}={fmt(ann[k])}" for k in keys]


def value_str(v: Any) -> str:
    """A Python value (annotation, layout, list) as source text."""
    if isinstance(v, E.Expr):
        return expr_str(v)
    if isinstance(v, dt.DType):
        return _q(v.name)
    if isinstance(v, str):
        return _q(v)
    if isinstance(v, list):
        return f"[{', '.join(value_str(x) for x in v)}]"
    if isinstance(v, tuple):
        return f"({value_str(v[0])},)" if len(v) == 1 else f"({', '.join(value_str(x) for x in v)})"
    if isinstance(v, Buffer):
        return v.name
    return repr(v)


def script(node: Any) -> str:
    """``node`` printed as T-script: a ``PrimFunc`` as a whole function, a statement as its lines,
    an expression as its text."""
    from tegula.ir.stmt import PrimFunc

    if isinstance(node, E.Expr):
        return expr_str(node)
    p = ScriptPrinter()
    if isinstance(node, PrimFunc):
        return p.func(node)
    p.stmt(node, 0)
    return "\n".join(p.lines) + "\n"


# str() of expressions and statements, and structural mismatches, print through these
hooks.provide("expr_str", expr_str)
hooks.provide("script", script)
