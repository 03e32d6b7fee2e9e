"""The IR verifier: checks the invariants every pass must keep.

``verify(func)`` raises :class:`tegula.errors.VerifyError` at the first broken invariant;
``well_formed(func)`` lists all of them. Checked:

- every variable is used inside the scope that defines it (parameters, dynamic dimensions of
  parameter shapes, kernel block indices, loop variables, let-bindings for the rest of their
  sequence), and no variable is defined again while in scope;
- every buffer used is a parameter or allocated by an enclosing ``Kernel``;
- loads, stores and regions have one index or range per buffer dimension; indices are integers;
- a store's value has the buffer's dtype; binary operands and comparison operands agree in dtype;
- conditions (``if``, ``while``, ``T.if_then_else``) are boolean;
- tile operations appear only inside a ``Kernel``, and kernels do not nest;
- ``break`` / ``continue`` appear only inside loops.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir.annotations import KERNEL_KEYS, LAYOUT_MAP, TMA_MAPS
from tegula.errors import VerifyError
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.buffer import AddressVar, Buffer, BufferRegion
from tegula.ir.span import Span
from tegula.ir.visitor import Visitor, collect_vars


class _Verifier(Visitor):
    def __init__(self) -> None:
        self.errors: list[tuple[str, Optional[Span]]] = []
        self.vars: dict[E.Var, int] = {}
        self.buffers: dict[Buffer, int] = {}
        self.in_kernel = False
        self.loops = 0
        self.span: Optional[Span] = None  # the innermost node with a span, for reports

    def error(self, msg: str, node: Any = None) -> None:
        span = getattr(node, "span", None) or self.span
        self.errors.append((msg, span))

    def visit(self, node: Any) -> None:
        saved = self.span
        # a variable's span is where it was defined: report uses at the enclosing node
        own = None if isinstance(node, E.Var) else getattr(node, "span", None)
        self.span = own or saved
        super().visit(node)
        self.span = saved

    # -- scopes ---------------------------------------------------------------------------------
    def define_var(self, v: E.Var, node: Any) -> None:
        if self.vars.get(v):
            self.error(f"var '{v.name}' is defined again while already in scope", node)
        self.vars[v] = self.vars.get(v, 0) + 1

    def undefine_var(self, v: E.Var) -> None:
        self.vars[v] -= 1

    def define_buffer(self, b: Buffer, node: Any) -> None:
        if self.buffers.get(b):
            self.error(f"buffer '{b.name}' is allocated again while already in scope", node)
        self.buffers[b] = self.buffers.get(b, 0) + 1

    def check_shape(self, b: Buffer) -> None:
        for d in b.shape:
            if isinstance(d, E.Expr):
                self.visit(d)

    # -- function and kernel --------------------------------------------------------------------
    def visit_PrimFunc(self, f: S.PrimFunc) -> None:
        for p in f.params:
            if isinstance(p, Buffer):
                for v in collect_vars(p):
                    if not self.vars.get(v):
                        self.vars[v] = 1
                self.define_buffer(p, f)
            elif isinstance(p, E.Var):
                if not self.vars.get(p):
                    self.vars[p] = 1
            else:
                self.error(f"parameter {p!r} is neither a buffer nor a variable", f)
        self.visit(f.body)

    def visit_Kernel(self, k: S.Kernel) -> None:
        if self.in_kernel:
            self.error("a T.Kernel is nested inside another T.Kernel", k)
        if len(k.block_vars) != len(k.grid):
            self.error(f"T.Kernel has {len(k.grid)} grid dimension(s) but {len(k.block_vars)} block index(es)", k)
        for g in k.grid:
            if isinstance(g, E.Expr):
                self.visit(g)
        # the thread index after lowering; an NPU kernel's vector-core index (tegula.ir.npu)
        extra = tuple(v for v in (getattr(k, "thread_var", None), getattr(k, "sub_var", None))
                      if v is not None)
        # the TMA tensor maps lowering made kernel parameters (tegula.backends.cuda.passes.lower_tile_ops.lower_tma)
        extra += tuple(m.var for m in TMA_MAPS.get(k.annotations) or ())
        for key in KERNEL_KEYS:
            why = key.problem(k.annotations)
            if why is not None:
                self.error(why, k)
        for v in k.block_vars + extra:
            self.define_var(v, k)
        for b in k.allocs:
            self.check_shape(b)
            self.define_buffer(b, k)
        for b, init in k.alloc_inits.items():
            if not any(b is a for a in k.allocs):
                self.error(f"initial value given for buffer '{getattr(b, 'name', b)}' that this kernel does not allocate", k)
            if isinstance(init, E.Expr):
                self.visit(init)
                if isinstance(b, Buffer) and init.dtype != b.dtype:
                    self.error(f"initial value of '{b.name}' has dtype {init.dtype}, buffer has {b.dtype}", k)
        for b in (LAYOUT_MAP.get(k.annotations) or {}):
            if isinstance(b, Buffer):
                self.use_buffer(b, k)
        saved, self.in_kernel = self.in_kernel, True
        saved_loops, self.loops = self.loops, 0
        self.visit(k.body)
        self.in_kernel, self.loops = saved, saved_loops
        for b in k.allocs:
            self.buffers[b] -= 1
        for v in k.block_vars + extra:
            self.undefine_var(v)

    # -- statements -----------------------------------------------------------------------------
    def visit_SeqStmt(self, s: S.SeqStmt) -> None:
        bound: list[E.Var] = []
        made: list[Buffer] = []  # T.make_tensor buffers, bound with their address
        for x in s.stmts:
            if isinstance(x, S.LetStmt):
                self.visit(x)
                self.define_var(x.var, x)
                bound.append(x.var)
                if isinstance(x.var, AddressVar) and x.var.buffer is not None:
                    self.define_buffer(x.var.buffer, x)
                    made.append(x.var.buffer)
            else:
                self.visit(x)
        for v in bound:
            self.undefine_var(v)
        for b in made:
            self.buffers[b] -= 1

    def visit_LetStmt(self, s: S.LetStmt) -> None:
        self.visit(s.value)
        if s.var.dtype != s.value.dtype:
            self.error(f"let '{s.var.name}' of dtype {s.var.dtype} is bound to a {s.value.dtype} value", s)

    def visit_For(self, s: S.For) -> None:
        self.visit(s.start)
        if isinstance(s.extent, E.Expr):
            self.visit(s.extent)
        self.define_var(s.var, s)
        self.loops += 1
        self.visit(s.body)
        self.loops -= 1
        self.undefine_var(s.var)

    def visit_While(self, s: S.While) -> None:
        self.cond(s.cond, "while", s)
        self.loops += 1
        self.visit(s.body)
        self.loops -= 1

    def visit_IfThenElse(self, s: S.IfThenElse) -> None:
        self.cond(s.cond, "if", s)
        self.visit(s.then)
        if s.else_ is not None:
            self.visit(s.else_)

    def visit_Break(self, s: S.Stmt) -> None:
        if not self.loops:
            self.error("break outside a loop", s)

    visit_Continue = visit_Break

    def visit_BufferStore(self, s: S.BufferStore) -> None:
        self.access(s.buffer, s.indices, s)
        self.visit(s.value)
        if s.value.dtype != s.buffer.dtype:
            self.error(f"store of a {s.value.dtype} value into buffer '{s.buffer.name}' of dtype {s.buffer.dtype}", s)

    def visit_TileOp(self, s: S.TileOp) -> None:
        if not self.in_kernel:
            self.error(f"tile operation {type(s).__name__} outside a T.Kernel", s)
        self.generic_visit(s)

    # -- expressions and operands ---------------------------------------------------------------
    def cond(self, c: E.Expr, what: str, node: Any) -> None:
        self.visit(c)
        if not c.dtype.is_bool:
            self.error(f"{what} condition {c} has dtype {c.dtype}, expected bool", node)

    def visit_Var(self, v: E.Var) -> None:
        if not self.vars.get(v):
            self.error(f"var '{v.name}' is used outside the scope that defines it")

    def use_buffer(self, b: Buffer, node: Any = None) -> None:
        if not self.buffers.get(b):
            self.error(f"buffer '{b.name}' is neither a parameter nor allocated by an enclosing T.Kernel", node)

    def visit_Buffer(self, b: Buffer) -> None:
        self.use_buffer(b)

    def access(self, b: Buffer, indices: tuple, node: Any) -> None:
        self.use_buffer(b, node)
        n = len(indices)
        if n != b.ndim and not (b.is_var and n == 1):
            self.error(f"buffer '{b.name}' has {b.ndim} dimension(s) but is accessed with {n} index(es)", node)
        for i in indices:
            self.visit(i)
            if not i.dtype.is_int:
                self.error(f"index {i} of buffer '{b.name}' has dtype {i.dtype}, expected an integer", node)

    def visit_BufferLoad(self, e: E.BufferLoad) -> None:
        self.access(e.buffer, e.indices, e)

    def visit_BufferRegion(self, r: BufferRegion) -> None:
        b = r.buffer
        self.use_buffer(b, r)
        if len(r.ranges) != b.ndim:
            self.error(f"region of buffer '{b.name}' has {len(r.ranges)} range(s) for {b.ndim} dimension(s)", r)
        for start, ext in r.ranges:
            self.visit(start)
            if isinstance(ext, E.Expr):
                self.visit(ext)

    def visit_BinOp(self, e: E.BinOp) -> None:
        self.generic_visit(e)
        if e.a.dtype != e.b.dtype:
            self.error(f"operands of {e} have different dtypes: {e.a.dtype} and {e.b.dtype}", e)
        elif e.op in ("and", "or") and not e.a.dtype.is_bool:
            self.error(f"operands of {e} must be bool, got {e.a.dtype}", e)

    def visit_Compare(self, e: E.Compare) -> None:
        self.generic_visit(e)
        if e.a.dtype != e.b.dtype:
            self.error(f"operands of {e} have different dtypes: {e.a.dtype} and {e.b.dtype}", e)

    def visit_Select(self, e: E.Select) -> None:
        self.cond(e.cond, "T.if_then_else", e)
        self.visit(e.then)
        self.visit(e.else_)
        if e.then.dtype != e.else_.dtype:
            self.error(f"branches of {e} have different dtypes: {e.then.dtype} and {e.else_.dtype}", e)


def _collect(node: Any) -> list[tuple[str, Optional[Span]]]:
    v = _Verifier()
    v.visit(node)
    return v.errors


def well_formed(func: Any) -> list[str]:
    """Every broken invariant of ``func`` (a PrimFunc, or a statement checked on its own), as text."""
    return [msg if span is None else f"{msg} ({span.short()})" for msg, span in _collect(func)]


def verify(func: Any) -> None:
    """Raise :class:`~tegula.errors.VerifyError` at the first broken invariant of ``func``."""
    errors = _collect(func)
    if errors:
        msg, span = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise VerifyError(msg + more, span)
