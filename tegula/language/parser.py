"""The AST frontend: walks a kernel function's Python source and drives the builder.

Host-side Python (arithmetic on ints, helper calls, list comprehensions) is evaluated as Python;
values that are only known when the kernel runs are IR expressions, built through operator
overloading. Control flow on runtime values (``if``, ``for ... in T.Parallel(...)``, ``while``)
becomes IR; control flow on host values is executed by the parser (a Python ``if`` on a
compile-time constant keeps only the branch taken).

Any failure while visiting a node becomes a tegula error carrying the node's file, line and
column, so the user sees their own line with a caret.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import functools
import importlib
import inspect
import operator
import os
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from tegula.arith.bound import bound
from tegula.errors import (DTypeError, KernelNameError, KernelSyntaxError, KernelTypeError,
                           ScopeError, TegulaError)
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.span import Span, span_scope
from tegula.ir.stmt import (Break, Continue, BufferStore, For, IfThenElse, Kernel, LetStmt, While,
                            seq)
from tegula.language import lowlevel, semantic
from tegula.language.builder import DIALECT, Builder, KernelFrame, new_var
from tegula.language.primitives import KernelSpec, LoopSpec, serial
from tegula.language.proxy import ConstSymbol, TensorSpec
from tegula.language.loop_fragments import widen_loop_fragments
from tegula.language.safe_access import guard_global_accesses
from tegula.language.views import BufferData


def _ascend() -> Any:
    """The Ascend dialect, loaded on first use (``import tegula`` does not load the NPU IR)."""
    return importlib.import_module("tegula.language.ascend")


@dataclass
class Source:
    """A function's parsed source and where it sits in its file."""

    file: str
    first_line: int
    indent: int
    tree: ast.FunctionDef

    @classmethod
    def of(cls, func: Callable) -> "Source":
        cached = getattr(func, "__tegula_source__", None)
        if cached is not None:
            return cached
        try:
            lines, first = inspect.getsourcelines(func)
            file = inspect.getsourcefile(func) or "<unknown>"
        except (OSError, TypeError) as e:
            raise KernelSyntaxError(f"cannot read the source of {getattr(func, '__name__', func)!r}: {e}",
                                    hint="kernels must be defined in a file, not typed at an interactive prompt") from None
        text = "".join(lines)
        indent = len(lines[0]) - len(lines[0].lstrip())
        tree = ast.parse(textwrap.dedent(text))
        fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        src = cls(file, first, indent, fdef)  # type: ignore[arg-type]
        if isinstance(fdef, ast.AsyncFunctionDef):
            raise KernelSyntaxError(f"'{fdef.name}' is an `async def`; kernels and macros are plain functions",
                                    src.span(fdef), hint="write `def` instead of `async def`")
        try:
            func.__tegula_source__ = src  # type: ignore[attr-defined]
        except AttributeError:
            pass
        return src

    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        end_col = getattr(node, "end_col_offset", None)
        end_line = getattr(node, "end_lineno", line)
        return Span(self.file, self.first_line + line - 1, col + self.indent,
                    end_col + self.indent if end_col is not None and end_line == line else None)


def function_scope(func: Callable) -> dict:
    """Globals and closure variables a kernel function can see."""
    scope = dict(func.__globals__)  # type: ignore[attr-defined]
    code = func.__code__  # type: ignore[attr-defined]
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):  # type: ignore[attr-defined]
        try:
            scope[name] = cell.cell_contents
        except ValueError:  # a closure variable assigned after the kernel was defined
            pass
    return scope


class _EndedLoopVar:
    """What a kernel loop's variable names after the loop: using it is an error (in Python the
    name would keep its last value; a kernel loop's variable has none outside the loop)."""

    def __init__(self, name: str):
        self.name = name


class _Return(Exception):
    def __init__(self, value: Any):
        self.value = value


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.MatMult: operator.matmul,
}
_CMPOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


def _no_fp8_arith(result: Any) -> Any:
    """``result`` of an arithmetic operator, unless it computes in an 8-bit float (no target has
    such arithmetic: values are converted to a wider float first)."""
    if isinstance(result, E.Expr) and result.dtype.name.startswith("float8") \
            and not isinstance(result, (E.BufferLoad, E.Const, E.Var, E.Cast)):
        raise DTypeError(f"arithmetic on {result.dtype} values is not supported",
                         hint="convert to a wider float first, e.g. T.Cast(\"float32\", x) * y")
    return result


def _arith(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    return _no_fp8_arith(op(a, b))


def _is_ir(x: Any) -> bool:
    return isinstance(x, E.Expr) or (isinstance(x, Buffer) and x.is_var)


def _py_builtin_over_ir(name: str, args: list) -> Any:
    """``min``/``max``/``abs``/``int``/``float`` applied to runtime values map to T.* forms."""
    from tegula.language import primitives as P

    if name in ("min", "max") and len(args) >= 2:
        f = P.min if name == "min" else P.max
        out = args[0]
        for a in args[1:]:
            out = f(out, a)
        return out
    if name == "abs" and len(args) == 1:
        return P.abs(args[0])
    if name in ("int", "float", "bool") and len(args) == 1:
        return E.cast({"int": "int32", "float": "float32", "bool": "bool"}[name], args[0])
    raise KernelTypeError(f"Python's {name}() cannot take values only known when the kernel runs")


class Parser:
    """Visits one function body (a kernel, or a macro inlined into one)."""

    def __init__(self, builder: Builder, source: Source, globals_: dict, locals_: dict,
                 is_macro: bool = False):
        self.b = builder
        self.src = source
        self.globals = globals_
        self.locals = locals_
        self.is_macro = is_macro
        self.bound_depth: dict[str, int] = {}  # name -> IR loop depth where it was last bound
        self.base_depth = len(builder.stack)     # statement nesting of the function's own body

    # ------------------------------------------------------------------------------------------
    # statements
    # ------------------------------------------------------------------------------------------
    def visit_body(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            self.visit_stmt(s)

    def visit_stmt(self, node: ast.stmt) -> None:
        span = self.src.span(node)
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise KernelSyntaxError(f"`{type(node).__name__}` statements are not supported in kernels", span)
        with span_scope(span):
            try:
                method(node)
            except TegulaError as e:
                raise e.with_span(span)
            except (_Return, RecursionError):
                raise
            except Exception as e:  # a host-side Python failure in the user's code
                raise _wrap(e, span) from e
    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        lowlevel.evaluate(self.eval(node.value))  # a call made for its effect (T.call_extern)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_Assign(self, node: ast.Assign) -> None:
        name = node.targets[0].id if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) else None
        with self.b.naming(name):
            value = self.eval(node.value)
        for t in node.targets:
            self.assign(t, value, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        ann = self.eval(node.annotation)
        if isinstance(ann, TensorSpec):
            if node.value is not None or not isinstance(node.target, ast.Name):
                raise KernelSyntaxError("a tensor annotation must have the form `A: T.Tensor(shape, dtype)`")
            self.declare_tensor(node.target.id, ann)
            return
        if node.value is None:
            return
        value = self.eval(node.value)
        if isinstance(ann, str):  # a dtype name: an unknown one is the user's mistake
            value = E.cast(semantic.check_dtype(ann, "annotation"), value)
        else:
            try:
                d = dt.as_dtype(ann)
            except (TypeError, ValueError):
                d = None  # a Python type (list, tuple, ...) that is no dtype: host code
            if d is not None:
                value = E.cast(d, value)
        self.assign(node.target, value, node.value)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        op = functools.partial(_arith, _BINOPS[type(node.op)])
        t = node.target
        if isinstance(t, ast.Name):
            old = self.lookup(t.id, t)
            if isinstance(old, Buffer) and old.is_var:
                self.store(old, (0,), op(old.as_load(), self.eval(node.value)))
                return
            self.assign(t, op(old, self.eval(node.value)), node)
        elif isinstance(t, ast.Subscript):
            buf = self.eval(t.value)
            key = self.eval_index(t.slice)
            if not isinstance(buf, Buffer):
                setitem = getattr(buf, "__setitem__", None)
                if setitem is None:
                    raise KernelTypeError(f"cannot assign into {semantic.describe(buf)}")
                setitem(key, op(buf[key], self.eval(node.value)))
                return
            self.store(buf, key, op(buf[key], self.eval(node.value)))
        else:
            raise KernelSyntaxError("unsupported augmented assignment target")

    def assign(self, target: ast.expr, value: Any, value_node: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, value_node)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (Buffer, E.Expr)):
                raise KernelTypeError(f"cannot unpack {semantic.describe(value)} into {len(target.elts)} names")
            vals = list(value)
            if len(vals) != len(target.elts):
                raise KernelTypeError(f"cannot unpack {len(vals)} values into {len(target.elts)} names")
            for t, v in zip(target.elts, vals):
                self.assign(t, v, value_node)
        elif isinstance(target, ast.Subscript):
            obj = self.eval(target.value)
            key = self.eval_index(target.slice)
            if isinstance(obj, Buffer):
                self.store(obj, key, value)
            else:
                obj[key] = value
        elif isinstance(target, ast.Attribute):
            setattr(self.eval(target.value), target.attr, value)
        else:
            raise KernelSyntaxError(f"cannot assign to {type(target).__name__}")

    def assign_name(self, name: str, value: Any, value_node: ast.AST) -> None:
        old = self.locals.get(name)
        if isinstance(old, Buffer) and old.is_var and not isinstance(value, Buffer):
            self.store(old, (0,), value)
            return
        if isinstance(old, ElementRef):  # a T.Ref macro parameter: the caller's element
            self.store(old.load.buffer, old.load.indices, value)
            return
        depth = len(self.b.loop_kinds)
        if name in self.bound_depth and self.bound_depth[name] < depth and _is_ir(value) \
                and any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(value_node)):
            raise KernelSyntaxError(
                f"'{name}' is updated from its own value inside a kernel loop, but names bound in a "
                "kernel are values, not variables: each iteration would start from the value before the loop",
                hint=f"make it a variable: {name} = T.alloc_var(dtype, init=...), then assign to it")
        if self.b.kernel is not None and isinstance(value, E.Expr) and not isinstance(value, (E.Var, E.Const)):
            var = new_var(name, value.dtype)
            if not self.b.in_parallel:
                semantic.check_fragment_reads(value)
            self.b.emit(LetStmt(var, value))
            r = bound(value, self.b.ranges) if value.dtype.is_int else None
            if r is not None:
                self.b.ranges[var] = r
            value = var
        self.locals[name] = value
        self.bound_depth[name] = depth

    def store(self, buf: Buffer, key: Any, value: Any) -> None:
        if self.b.kernel is None:
            raise KernelSyntaxError(f"stores into '{buf.name}' can only happen inside `with T.Kernel(...)`")
        idx = semantic.index_list(buf, key)
        if buf.is_local and not buf.is_var and self.b.in_parallel:
            raise ScopeError(
                f"local buffer '{buf.name}' is written inside T.Parallel; a T.alloc_local buffer is "
                "private to each thread, so which iterations' values it holds would depend on how the "
                "loop is split across threads",
                hint="use T.alloc_var for a temporary of each iteration, or T.alloc_fragment for a "
                     "tile the block shares")
        if not self.b.in_parallel:
            for e in (*idx, value):
                semantic.check_fragment_reads(e)
        if buf.is_fragment and not self.b.in_parallel and buf.numel() != 1:
            raise ScopeError(
                f"fragment '{buf.name}' is written element by element outside T.Parallel; a fragment "
                "is spread across the threads of the block, so single elements can only be addressed "
                "inside a T.Parallel loop or through tile operations",
                hint="wrap the store in `for i, j in T.Parallel(...)`, or use T.alloc_local / T.alloc_var")
        atomic = lowlevel.reducer_update(self.b.kernel, buf, idx, value) if self.b.kernel.reducers else None
        if atomic is not None:
            self.b.emit(atomic)
            return
        self.b.emit(BufferStore(buf, idx, semantic.store_value(buf, value)))

    def declare_tensor(self, name: str, spec: TensorSpec) -> None:
        b = self.b
        if b.mode != "eager" or self.is_macro:
            raise KernelSyntaxError("`A: T.Tensor(...)` declarations belong to @tegula.jit functions; "
                                    "in a @T.prim_func, annotate the parameter instead")
        if name not in b.pending:
            raise KernelSyntaxError(f"'{name}' is not a tensor parameter of this function",
                                    hint="annotate parameters of the function: def f(A, B, ...): A: T.Tensor(...)")
        actual = b.pending[name]
        dims = []
        for i, d in enumerate(spec.shape):
            if isinstance(d, ConstSymbol):
                if d.name in b.consts:
                    d = b.consts[d.name]
                elif actual is None:
                    raise KernelTypeError(f"the value of '{d.name}' is not known",
                                          hint=f"pass {d.name}=... to compile()")
                else:
                    shape = actual[0]
                    if i >= len(shape):
                        raise KernelTypeError(
                            f"argument '{name}' has {len(shape)} dimension(s), but is declared with {len(spec.shape)}")
                    d = int(shape[i])
                    b.consts[spec.shape[i].name] = d
                    self._bind_symbol(spec.shape[i], d)
            dims.append(d)
        buf = Buffer(name, dims, spec.dtype, "global")
        b.params.append(buf)
        b.param_names.add(name)
        self.locals[name] = buf

    def _bind_symbol(self, sym: ConstSymbol, value: int) -> None:
        for scope in (self.locals, self.globals):
            for k, v in list(scope.items()):
                if v is sym:
                    scope[k] = value

    def visit_If(self, node: ast.If) -> None:
        cond = self.eval(node.test)
        if not _is_ir(cond):
            self.visit_body(node.body if cond else node.orelse)
            return
        c = E.cast("bool", E.as_expr(cond))
        if isinstance(c, E.Const):
            self.visit_body(node.body if c.value else node.orelse)
            return
        self.b.require_kernel("an `if` on a runtime value")
        if not self.b.in_parallel:
            semantic.check_fragment_reads(c)
        with self.b.frame() as then:
            self.visit_body(node.body)
        orelse = None
        if node.orelse:
            with self.b.frame() as els:
                self.visit_body(node.orelse)
            orelse = seq(els)
        self.b.emit(IfThenElse(c, seq(then), orelse))

    def visit_For(self, node: ast.For) -> None:
        if node.orelse:
            raise KernelSyntaxError("`for ... else` is not supported in kernels")
        it = self.eval(node.iter)
        if isinstance(it, range) and self.b.kernel is not None:
            it = serial(it.start, it.stop, it.step)
        if not isinstance(it, LoopSpec):
            if self.b.kernel is not None and isinstance(it, (E.Expr,)):
                raise KernelTypeError("cannot iterate over an expression; use range(n) or T.serial(n)")
            for v in it:  # host-side iteration, unrolled into the kernel
                self.assign(node.target, v, node.iter)
                self.visit_body(node.body)
            return
        self.b.require_kernel(f"a T.{it.kind} loop")
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            raise KernelSyntaxError("loop variables must be plain names")
        if len(targets) != len(it.extents):
            raise KernelTypeError(f"T.{it.kind} has {len(it.extents)} dimension(s) but the loop binds "
                                  f"{len(targets)} name(s)")
        if it.kind == "parallel" and self.b.loop_kinds and self.b.loop_kinds[-1] != "parallel" \
                and "parallel" in self.b.loop_kinds:
            raise ScopeError("a T.Parallel loop cannot be nested in a serial loop inside another T.Parallel")
        vars_ = [new_var(t.id) for t in targets]  # type: ignore[attr-defined]
        for t, v in zip(targets, vars_):
            self.locals[t.id] = v  # type: ignore[attr-defined]
            self.bound_depth[t.id] = len(self.b.loop_kinds) + 1  # type: ignore[attr-defined]
        for v, st, ext in zip(vars_, it.starts, it.extents):
            self.b.ranges.pop(v, None)
            if isinstance(st, int) and isinstance(ext, int) and ext > 0:
                last = st + (ext - 1) * it.step
                self.b.ranges[v] = (min(st, last), max(st, last))
        outer_parallel = self.b.in_parallel
        with self.b.loop(it.kind), self.b.frame() as body:
            self.visit_body(node.body)
        for t, v in zip(targets, vars_):
            if self.locals.get(t.id) is v:  # type: ignore[attr-defined]
                self.locals[t.id] = _EndedLoopVar(t.id)  # type: ignore[attr-defined]
        stmt = seq(body)
        for i in reversed(range(len(vars_))):
            start = E.as_expr(it.starts[i])
            stmt = For(vars_[i], start, it.extents[i], stmt, it.kind, it.step,
                       dict(it.annotations) if i == 0 else {})
        if it.kind == "parallel" and not outer_parallel:
            semantic.check_lane_conflicts(stmt)
            stmt = guard_global_accesses(stmt, self.b.ranges, self.b.kernel.safe_values)
        self.b.emit(stmt)

    def visit_While(self, node: ast.While) -> None:
        if node.orelse:
            raise KernelSyntaxError("`while ... else` is not supported in kernels")
        cond = self.eval(node.test)
        if not _is_ir(cond):
            if self.b.kernel is not None:
                raise KernelSyntaxError("a `while` loop in a kernel needs a condition on a runtime value",
                                        hint="use a variable from T.alloc_var in the condition")
            n = 0
            while cond:
                self.visit_body(node.body)
                cond = self.eval(node.test)
                n += 1
                if n > 1_000_000:
                    raise KernelSyntaxError("host-side while loop did not finish")
            return
        self.b.require_kernel("a `while` loop")
        if not self.b.in_parallel:
            semantic.check_fragment_reads(cond)
        with self.b.loop("while"), self.b.frame() as body:
            self.visit_body(node.body)
        self.b.emit(While(E.cast("bool", cond), seq(body)))

    def _loop_control(self, node: ast.stmt, cls: type) -> None:
        loop_control(self.b, cls)

    def visit_Break(self, node: ast.Break) -> None:
        self._loop_control(node, Break)

    def visit_Continue(self, node: ast.Continue) -> None:
        self._loop_control(node, Continue)

    def visit_With(self, node: ast.With) -> None:
        if len(node.items) != 1:
            raise KernelSyntaxError("use one context manager per `with` in a kernel")
        item = node.items[0]
        ctx = self.eval(item.context_expr)
        hook = getattr(ctx, "tegula_with", None)
        if hook is not None:  # a dialect's block statement (T.Scope, ...): it builds its own node
            hook(self, item, node.body)
            return
        if not isinstance(ctx, KernelSpec):
            raise KernelSyntaxError(f"`with` in a kernel takes T.Kernel(...), got {semantic.describe(ctx)}")
        if self.b.kernel is not None:
            raise KernelSyntaxError("T.Kernel cannot be nested inside another T.Kernel")
        if ctx.npu:
            _ascend().enter_kernel(self, item, node.body, ctx.grid)
            return
        names: list[str] = []
        tv = item.optional_vars
        if isinstance(tv, ast.Name):
            names = [tv.id]
        elif isinstance(tv, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in tv.elts):
            names = [e.id for e in tv.elts]  # type: ignore[attr-defined]
        elif tv is not None:
            raise KernelSyntaxError("bind the block indices to plain names: `as bx` or `as (bx, by)`")
        if names and len(names) != len(ctx.grid):
            raise KernelTypeError(f"T.Kernel has {len(ctx.grid)} grid dimension(s) but binds "
                                  f"{len(names)} block index name(s)")
        default = ["bx", "by", "bz"]
        block_vars = tuple(new_var(names[i] if names else default[i]) for i in range(len(ctx.grid)))
        frame = KernelFrame(threads=tuple(ctx.threads), block_vars=block_vars, grid=tuple(ctx.grid))
        if ctx.cluster is not None:
            frame.annotations["cluster"] = ctx.cluster
        frame.names.update(self.b.param_names)
        for n, v in zip(names, block_vars):
            self.locals[n] = v
            self.bound_depth[n] = 0
        for v, g in zip(block_vars, ctx.grid):
            if isinstance(g, int):
                self.b.ranges[v] = (0, g - 1)
        self.b.kernel = frame
        try:
            with self.b.frame() as body:
                self.visit_body(node.body)
        finally:
            self.b.kernel = None
        if DIALECT in frame.annotations and _ascend().is_npu_frame(frame):  # T.Cube / T.Vector: NPU
            self.b.emit(_ascend().finish_kernel(ctx.grid, block_vars, frame, seq(body)))
            return
        self.b.emit(widen_loop_fragments(Kernel(ctx.grid, ctx.threads, block_vars, tuple(frame.allocs),
                                                seq(body), frame.alloc_inits, frame.annotations,
                                                thread_var=frame.thread_var)))

    def visit_Return(self, node: ast.Return) -> None:
        if len(self.b.stack) != self.base_depth or self.b.kernel is not None and not self.is_macro:
            raise KernelSyntaxError("`return` can only appear at the top level of the function, "
                                    "not inside a kernel, loop or runtime `if`")
        raise _Return(self.eval(node.value) if node.value is not None else None)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        raise KernelSyntaxError("functions cannot be defined inside a kernel",
                                hint="define helpers outside the kernel and decorate them with @T.macro")

    def visit_Assert(self, node: ast.Assert) -> None:
        cond = self.eval(node.test)
        if _is_ir(cond):
            raise KernelSyntaxError("`assert` in a kernel needs a condition known at compile time")
        if not cond:
            msg = self.eval(node.msg) if node.msg is not None else "assertion failed"
            raise KernelTypeError(str(msg))

    # ------------------------------------------------------------------------------------------
    # expressions
    # ------------------------------------------------------------------------------------------
    def lookup(self, name: str, node: ast.AST) -> Any:
        if name in self.locals:
            value = self.locals[name]
            if isinstance(value, ElementRef):  # a T.Ref macro parameter reads its element
                return value.load
            if isinstance(value, _EndedLoopVar):
                raise KernelNameError(f"'{name}' is the variable of a loop that has ended; it has no "
                                      "value here", self.src.span(node),
                                      hint="use it inside its loop, or copy what you need into a "
                                           "T.alloc_var inside the loop")
            return value
        if name in self.globals:
            return self.globals[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        known = list(self.locals) + [k for k in self.globals if not k.startswith("__")]
        close = difflib.get_close_matches(name, known, n=1)
        raise KernelNameError(f"name '{name}' is not defined", self.src.span(node),
                              hint=f"did you mean '{close[0]}'?" if close else None)

    def eval(self, node: ast.expr) -> Any:
        method = getattr(self, f"eval_{type(node).__name__}", None)
        span = self.src.span(node)
        with span_scope(span):
            try:
                if method is None:
                    return self._eval_python(node)
                return method(node)
            except TegulaError as e:
                raise e.with_span(span)
            except _Return:
                raise
            except RecursionError:
                raise
            except Exception as e:
                raise _wrap(e, span) from e

    def _eval_python(self, node: ast.expr) -> Any:
        """Host-only expressions (comprehensions, lambdas, f-strings...) run as plain Python."""
        code = compile(ast.fix_missing_locations(ast.Expression(node)), self.src.file, "eval")
        return eval(code, {**self.globals, **self.locals})  # noqa: S307 - the user's own code

    def eval_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def eval_Name(self, node: ast.Name) -> Any:
        return self.lookup(node.id, node)

    def eval_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.eval(node.value)
        if isinstance(obj, Buffer) and node.attr == "data" and getattr(obj, "data", None) is None:
            return BufferData(obj)  # A.data: A's memory, for T.Tensor(shape, dtype, A.data)
        try:
            return getattr(obj, node.attr)
        except AttributeError:
            owner = getattr(obj, "__name__", None) or semantic.describe(obj)
            names = [n for n in dir(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(node.attr, names, n=1)
            raise KernelNameError(f"{owner} has no attribute '{node.attr}'",
                                  hint=f"did you mean '{close[0]}'?" if close else None) from None

    def eval_index(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Tuple):
            return tuple(self.eval_index(e) for e in node.elts)
        return self.eval(node)

    def eval_Subscript(self, node: ast.Subscript) -> Any:
        obj = self.eval(node.value)
        key = self.eval_index(node.slice)
        if isinstance(obj, Buffer):
            load = obj[key]
            if isinstance(load, E.BufferLoad):
                for i in load.indices:
                    if not i.dtype.is_int:
                        raise DTypeError(f"index into '{obj.name}' must be an integer, got {i.dtype}")
                semantic.check_in_bounds(obj, load.indices)
            return load
        return obj[key]

    def eval_Slice(self, node: ast.Slice) -> slice:
        f = lambda n: None if n is None else self.eval(n)  # noqa: E731
        bounds = slice(f(node.lower), f(node.upper), f(node.step))
        for b in (bounds.start, bounds.stop, bounds.step):
            if isinstance(b, float) or (isinstance(b, E.Expr) and not b.dtype.is_int):
                raise DTypeError(f"slice bounds must be integers, got {b!r}")
        return bounds

    def eval_Tuple(self, node: ast.Tuple) -> tuple:
        return tuple(self._elts(node.elts))

    def eval_List(self, node: ast.List) -> list:
        return list(self._elts(node.elts))

    def _elts(self, elts: list[ast.expr]) -> list:
        out: list = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.eval(e.value))
            else:
                out.append(self.eval(e))
        return out

    def eval_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.eval(node.left), self.eval(node.right)
        return _arith(_BINOPS[type(node.op)], a, b)

    def eval_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return E.unary("not", v) if _is_ir(v) else not v
        if isinstance(node.op, ast.USub):
            return _no_fp8_arith(-v)
        if isinstance(node.op, ast.UAdd):
            return +v
        return ~v

    def eval_BoolOp(self, node: ast.BoolOp) -> Any:
        is_and = isinstance(node.op, ast.And)
        acc = self.eval(node.values[0])
        for n in node.values[1:]:
            if not _is_ir(acc):
                if (is_and and not acc) or (not is_and and acc):
                    return acc  # Python short-circuit on a host value
                acc = self.eval(n)
                continue
            v = self.eval(n)
            acc = E.binary("and" if is_and else "or", acc, v)
        return acc

    def eval_Compare(self, node: ast.Compare) -> Any:
        left = self.eval(node.left)
        result: Any = True
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node)
            if _is_ir(left) or _is_ir(right):
                if isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                    raise KernelTypeError(f"`{type(op).__name__}` cannot compare runtime values")
                left_e = left.as_load() if isinstance(left, Buffer) else left
                right_e = right.as_load() if isinstance(right, Buffer) else right
                c = _CMPOPS[type(op)](left_e, right_e)
            else:
                c = _CMPOPS[type(op)](left, right)
            if result is True:
                result = c
            elif _is_ir(result) or _is_ir(c):
                result = E.binary("and", result, c)
            else:
                result = result and c
            left = right
        return result

    def eval_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.eval(node.test)
        if not _is_ir(cond):
            return self.eval(node.body) if cond else self.eval(node.orelse)
        return E.select(cond, self.eval(node.body), self.eval(node.orelse))

    def eval_Call(self, node: ast.Call) -> Any:
        func = self.eval(node.func)
        args = self._elts(node.args)
        kwargs: dict = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.eval(kw.value))
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        if func in (min, max, abs, int, float, bool) and any(_is_ir(a) for a in args):
            return _py_builtin_over_ir(func.__name__, args)
        if func is builtins.print and any(_is_ir(a) or isinstance(a, Buffer) for a in (*args, *kwargs.values())):
            raise KernelTypeError("print() runs while the kernel is built, so it cannot show a value "
                                  "only known when the kernel runs", hint="use T.print(x) to print it "
                                  "from the kernel")
        if func is range and any(_is_ir(a) for a in args):
            return serial(*args)
        if func is len and args and isinstance(args[0], Buffer):
            return args[0].shape[0]
        try:
            return func(*args, **kwargs)
        except TypeError as e:
            if isinstance(e, TegulaError):
                raise
            # A wrong call signature of a T.* primitive (missing/unknown argument).
            name = getattr(func, "__name__", None)
            mod = getattr(func, "__module__", "") or ""
            if name and mod.startswith("tegula") and _is_signature_error(e, func):
                raise KernelTypeError(f"T.{name}: {_signature_message(e)}",
                                      hint=f"T.{name}{_signature(func)}") from None
            raise


def _is_signature_error(e: TypeError, func: Any) -> bool:
    msg = str(e)
    return any(s in msg for s in ("positional argument", "keyword argument", "required", "takes"))


class Ref:
    """``T.Ref`` (also ``T.Ref[dtype]``): the annotation of a ``@T.macro`` parameter passed by
    reference. Given an element ``X[i]``, the macro reads ``X[i]`` through the name and an
    assignment to the name stores into ``X[i]``; a ``T.alloc_var`` is passed as itself (as every
    macro argument that is a variable is). Example::

        @T.macro
        def bump(x: T.Ref, d):
            x = x + d          # stores into the caller's element

        bump(S[1], 7)          # S[1] += 7
    """

    def __class_getitem__(cls, item: Any) -> type:
        return cls


class ElementRef:
    """A ``T.Ref`` macro parameter bound to the element ``load`` of the caller."""

    def __init__(self, load: E.BufferLoad):
        self.load = load


def is_ref_annotation(ann: Any) -> bool:
    """Whether a macro parameter's annotation is ``T.Ref`` (or its string form)."""
    if isinstance(ann, str):
        return ann.replace(" ", "").split("[")[0].split(".")[-1] == "Ref"
    return ann is Ref


def loop_control(b: Any, cls: type) -> None:
    """Emit ``break`` (``cls`` Break) or ``continue`` into the innermost kernel loop of builder
    ``b``; errors outside a loop and in T.Parallel (whose iterations run at once)."""
    kinds = b.loop_kinds
    word = "break" if cls is Break else "continue"
    if not kinds:
        raise KernelSyntaxError(f"`{word}` outside a kernel loop")
    if kinds[-1] == "parallel":
        raise ScopeError(f"`{word}` cannot be used in a T.Parallel loop: its iterations run at once")
    b.emit(cls())


def _signature_message(e: TypeError) -> str:
    """Python's "copy() missing 1 required ..." without the function's own name in front."""
    import re

    return re.sub(r"^[\w.]+\(\) ", "", str(e))


def _signature(func: Any) -> str:
    try:
        return str(inspect.signature(func))
    except (TypeError, ValueError):
        return "(...)"


def _wrap(e: Exception, span: Span) -> TegulaError:
    """A Python exception raised by the user's host code, as a tegula error at their line; when it
    came from inside helper functions that line calls, their lines are listed too."""
    if isinstance(e, TegulaError):
        return e.with_span(span)
    return KernelTypeError(f"{type(e).__name__}: {e}" + helper_frames(e, span), span)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def helper_frames(e: BaseException, span: "Span | None") -> str:
    """The user's frames ``e`` passed through below the kernel line ``span`` (helper functions the
    kernel calls), outermost first, as ``"\n  in NAME, FILE:LINE: SOURCE"`` lines; "" when none."""
    import linecache
    import traceback

    lines = []
    for fs in traceback.extract_tb(e.__traceback__):
        path = os.path.abspath(fs.filename)
        if path.startswith(_PACKAGE_DIR + os.sep) or fs.filename.startswith("<"):
            continue   # tegula's own frames, and code the parser compiled
        if span is not None and fs.lineno == span.line and path == os.path.abspath(span.file or ""):
            continue   # the kernel line itself, shown below
        text = (fs.line or linecache.getline(fs.filename, fs.lineno or 0)).strip()
        lines.append(f"\n  in {fs.name}, {os.path.basename(fs.filename)}:{fs.lineno}: {text}")
    return "".join(lines)


def run_body(parser: Parser, body: list[ast.stmt]) -> Any:
    """Visit a function body; returns the value of a top-level ``return`` (or None)."""
    try:
        parser.visit_body(body)
    except _Return as r:
        return r.value
    return None
