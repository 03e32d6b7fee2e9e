"""The one walker of lowered NPU IR that both emitters (PTO C++, Ascend C) are spelling tables over.

:class:`Walker` walks one core kind's code of an ``NpuKernel``: the structure (sequences, core
scopes, lets, loops, ifs) and the ``// file.py:LINE  source`` comment above each statement are
here, as is the C spelling of index expressions (from the operator table, :mod:`tegula.ir.ops`).
A leaf statement (a tile op, a flag, a barrier) is printed by its rule of the language's aspect
(``npu.pto`` or ``npu.ascendc`` in :mod:`tegula.ir.tile_rules`); a ``T.tile`` op by its row of the
vector-op table (:mod:`tegula.ir.vecops`), the spelling of the language keyed by the op's form.
A ``T.Parallel`` loop has been turned into vector ops by ParallelToVec before; one it could not
turn is an UnsupportedError here.
"""
from __future__ import annotations

import linecache
import math
from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir import ops, vecops
from tegula.ir.buffer import BufferRegion
from tegula.ir.npu import CoreScope, NpuKernel, VecOp
from tegula.ir.stmt import For, IfThenElse, LetStmt, SeqStmt, Stmt
from tegula.ir.tile_rules import TILE_RULES, add_aspect
from tegula.ir.visitor import post_order_visit

C_TYPES = {"float16": "half", "bfloat16": "bfloat16_t", "float32": "float", "int8": "int8_t",
           "int32": "int32_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
           "uint32": "uint32_t", "int64": "int64_t", "bool": "bool"}

# C++ helpers an index expression may call (the operator table's spellings), emitted on use
HELPERS = {
    "tl::floordiv": "template <typename T> {q} inline T floordiv(T a, T b) "
                    "{{ T r = a / b; return (r * b != a && ((a < 0) != (b < 0))) ? r - 1 : r; }}",
    "tl::floormod": "template <typename T> {q} inline T floormod(T a, T b) "
                    "{{ T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }}",
    "tl::min": "template <typename T> {q} inline T min(T a, T b) {{ return a < b ? a : b; }}",
    "tl::max": "template <typename T> {q} inline T max(T a, T b) {{ return a < b ? b : a; }}",
}


def c_type(d: Any) -> str:
    """The C type of dtype ``d`` (its name where the table has none)."""
    return C_TYPES.get(d.name, d.name)


def c_expr(e: Any, used: Any = None, load: Any = None) -> str:
    """An index expression as C, spelled by the operator table; the ``tl::`` helpers it calls
    are added to ``used`` (a set) so the emitter can define them; ``load(e)`` spells an element
    load (the scalar unit reading an on-chip tile)."""
    if isinstance(e, int):
        return str(e)
    if isinstance(e, E.Const):
        if e.dtype.is_int:
            return str(int(e.value))
        v = float(e.value)
        return ("INFINITY" if v > 0 else "-INFINITY") if math.isinf(v) else "NAN" if v != v else repr(v)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, (E.BinOp, E.Compare)):
        row = (ops.BINARY if isinstance(e, E.BinOp) else ops.COMPARE)[e.op]
        a, b = c_expr(e.a, used, load), c_expr(e.b, used, load)
        if row.c_prec == ops.C_PRIMARY:  # a function (tl::floordiv, tl::min, ...)
            if used is not None:
                used.add(row.c)
            return f"{row.c}({a}, {b})"
        return f"({a} {row.c} {b})"
    if isinstance(e, E.UnaryOp):
        return f"({ops.UNARY[e.op].c}{c_expr(e.a, used, load)})"
    if isinstance(e, E.Cast):
        return c_expr(e.value, used, load)
    if isinstance(e, E.Select):
        return f"({c_expr(e.cond, used, load)} ? {c_expr(e.then, used, load)} : {c_expr(e.else_, used, load)})"
    if isinstance(e, E.BufferLoad) and load is not None:
        return load(e)
    raise UnsupportedError(f"the NPU emitters cannot print {type(e).__name__} expressions yet",
                           getattr(e, "span", None))


def helpers(used: set, qualifier: str) -> list:
    """The ``namespace tl`` block defining the helpers in ``used`` (empty when none)."""
    names = [n for n in HELPERS if n in used]
    if not names:
        return []
    return ["namespace tl {"] + [HELPERS[n].format(q=qualifier) for n in names] + ["}", ""]


class Walker:
    """Walks one core kind's code of an NpuKernel (see the module docstring). A language sets
    ``LANG`` (its name in errors), ``ASPECT`` (the rule kind of its leaf statements) and
    ``SPELLING`` (the vector-op table's column), and defines ``declare``, ``tile`` and
    ``operand`` (how a source of a vector op is named)."""

    LANG = ""
    ASPECT = ""
    SPELLING = ""

    def __init__(self, k: NpuKernel, m: Any, kind: str, used: Any = None):
        self.k, self.m, self.kind = k, m, kind
        self.layouts = k.annotations.get("layouts", {})
        self.offsets = k.annotations.get("offsets", {})
        self.lines: list[str] = []
        self.depth = 1
        self.last_line: Any = None
        self.subs = 0          # tiles declared for parts of buffers
        self.used: set = used if used is not None else set()

    def out(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def c(self, e: Any) -> str:
        """``e`` as C (helpers it calls recorded)."""
        return c_expr(e, self.used, self.load)

    # the scalar unit reading an element of an on-chip tile, and the flag that makes the vector
    # pipe's writes visible to it first (a language may spell them otherwise)
    V_S = ""

    def load(self, e: Any) -> str:
        b = e.buffer
        if b.scope in ("global", "local.var"):
            raise UnsupportedError(f"the {self.LANG} emitter cannot print a load of '{b.name}' "
                                   f"({b.scope}) in a vector operand yet", getattr(e, "span", None))
        flat, stride = [], 1
        for idx, n in reversed(list(zip(e.indices, b.shape))):
            flat.append(self.c(idx) if stride == 1 else f"{self.c(idx)} * {stride}")
            stride *= int(n)
        return f"{self.tile(b.region())}.GetValue({' + '.join(reversed(flat))})"

    def comment(self, s: Stmt) -> None:
        sp = getattr(s, "span", None)
        if sp is None or (sp.file, sp.line) == self.last_line:
            return
        self.last_line = (sp.file, sp.line)
        src = linecache.getline(sp.file, sp.line).strip()
        self.out(f"// {sp.file.rsplit('/', 1)[-1]}:{sp.line}  {src}")

    def nested(self, head: str, body: Stmt) -> None:
        self.out(head)
        self.depth += 1
        self.stmt(body)
        self.depth -= 1

    # -- structure ---------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, CoreScope):
            if s.kind == self.kind:
                self.stmt(s.body)
        elif isinstance(s, LetStmt):
            self.out(f"int32_t {s.var.name} = {self.c(s.value)};")
        elif isinstance(s, For) and s.kind == "parallel":
            raise UnsupportedError(f"the {self.LANG} emitter prints a T.Parallel loop only when its "
                                   "body is one elementwise operation on whole UB tiles (ParallelToVec "
                                   "turns those into vector ops)", s.span,
                                   hint="use T.tile.* vector operations, or target='ascend-emu'")
        elif isinstance(s, For):
            v, start = s.var.name, self.c(s.start)
            stop = self.c(s.extent) if start == "0" and s.step == 1 else \
                f"{start} + {self.c(s.extent)} * {s.step}"
            inc = f"++{v}" if s.step == 1 else f"{v} += {s.step}"
            self.nested(f"for (int32_t {v} = {start}; {v} < {stop}; {inc}) {{", s.body)
            self.out("}")
        elif isinstance(s, IfThenElse):
            self.nested(f"if {self.c(s.cond)} {{", s.then)
            if s.else_ is not None:
                self.nested("} else {", s.else_)
            self.out("}")
        else:
            self.comment(s)
            self.leaf(s)

    def leaf(self, s: Stmt) -> None:
        """A tile op, flag or barrier: its rule of this language's aspect."""
        rule = TILE_RULES.get(type(s), self.ASPECT)
        if rule is None:
            raise UnsupportedError(f"the {self.LANG} emitter cannot print {type(s).__name__} yet", s.span,
                                   hint="run it on target='ascend-emu' instead")
        rule(self, s)

    # -- vector ops: the table's spelling ---------------------------------------------------------
    def operand(self, x: Any, letter: str) -> str:
        """How source ``x`` of form letter ``letter`` is named in a template."""
        return self.tile(x) if letter != "s" else self.c(x)

    def vec_fields(self, s: VecOp, row: Any) -> dict:
        n = s.attrs.get("count")
        if n is None:
            n = 1
            for e in s.dst.tile_shape():
                n *= int(e)
        fields = {"n": n, "T": c_type(s.dst.dtype), **row.defaults(), **s.attrs}
        if s.srcs and isinstance(s.srcs[0], BufferRegion):
            fields["ST"] = c_type(s.srcs[0].dtype)
        if row.fields is not None:
            fields.update(row.fields(s))
        return fields

    def vec(self, s: VecOp) -> None:
        row = vecops.row(s.op)
        form = vecops.form(s.srcs, tuple(s.dst.tile_shape()))
        spell = getattr(row, self.SPELLING)
        tmpl = spell.get(form)
        if tmpl is None:
            if self.vec_other(s, row, form):
                return
            have = ", ".join(sorted(spell)) or "none"
            raise UnsupportedError(f"the {self.LANG} emitter has no spelling of T.tile.{s.op} with "
                                   f"operands of form '{form}' (t: tile, r: one value per row, s: "
                                   f"scalar; it has: {have})", s.span,
                                   hint="run it on target='ascend-emu', or add the spelling to the "
                                        "op's row in tegula/ir/vecops.py")
        if self.V_S and any(f == "s" and _loads_tile(x) for x, f in zip(s.srcs, form)):
            self.out(self.V_S)
        dst = self.tile(s.dst)
        args = [self.operand(x, f) for x, f in zip(s.srcs, form)]
        self.out(tmpl.format(*args, d=dst, **self.vec_fields(s, row)))

    def vec_other(self, s: VecOp, row: Any, form: str) -> bool:
        """A language's way of printing a form the table does not spell (False: none)."""
        return False

    # what the language defines
    def tile(self, r: Any) -> str:
        raise NotImplementedError

    def declare(self) -> None:
        raise NotImplementedError


def _loads_tile(e: Any) -> bool:
    found: list = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, E.BufferLoad) else None)
    return bool(found)


add_aspect("npu.pto", "ascend-pto")
add_aspect("npu.ascendc", "ascendc")

# a tile op reaches an emitter through its rule; a vector op through the table
for _aspect in ("npu.pto", "npu.ascendc"):
    TILE_RULES.register(VecOp, _aspect)(lambda em, s: em.vec(s))


__all__ = ["Walker", "c_expr", "c_type", "helpers", "C_TYPES", "HELPERS"]
