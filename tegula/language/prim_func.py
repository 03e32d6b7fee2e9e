"""Entry points of the frontend: ``@T.prim_func``, ``@T.macro`` and eager-style tracing."""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from tegula import config
from tegula.errors import KernelSyntaxError, KernelTypeError, TegulaError
from tegula.ir.buffer import Buffer
from tegula.ir.dtype import DType
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.span import span_scope
from tegula.ir.stmt import PrimFunc, seq
from tegula.ir.verify import verify
from tegula.language import semantic
from tegula.language.builder import Builder, active, building, caller_span
from tegula.language.parser import ElementRef, Parser, Source, function_scope, is_ref_annotation, run_body
from tegula.language.proxy import TensorSpec, ptr_like
from tegula.language.views import resolve_views


def _clean_errors(fn: Callable) -> Callable:
    """Re-raise tegula errors from the frontend without its internal frames in the traceback."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TegulaError as e:
            if config.get().debug_tracebacks:
                raise
            e.__traceback__ = None
            raise e from None

    return wrapper


def _annotation(func: Callable, name: str, ann: Any, scope: dict) -> Any:
    if isinstance(ann, str) and not isinstance(ann, DType):  # ``from __future__ import annotations``
        try:
            ann = eval(ann, scope)  # noqa: S307 - the user's own annotation
        except TegulaError:
            raise
        except Exception as e:
            raise KernelTypeError(f"cannot evaluate the annotation of parameter '{name}': {e}") from None
    return ann


@_clean_errors
def parse_prim_func(func: Callable, outer: Optional[dict] = None) -> PrimFunc:
    """Parse a function whose parameters are annotated ``T.Tensor(shape, dtype)`` or a scalar dtype.

    ``outer`` holds the locals of the function that defined ``func``: string annotations
    (``from __future__ import annotations``) may name them without making them closure variables.
    """
    src = Source.of(func)
    scope = function_scope(func)
    ann_scope = {**scope, **(outer or {})}
    b = Builder("prim_func")
    params: list[Any] = []
    sig = inspect.signature(func)
    locals_: dict = {}
    for name, p in sig.parameters.items():
        node = next((a for a in src.tree.args.args if a.arg == name), src.tree)
        span = src.span(node)
        if p.annotation is inspect.Parameter.empty:
            raise KernelSyntaxError(f"parameter '{name}' of a @T.prim_func needs an annotation", span,
                                    hint=f"{name}: T.Tensor((M, N), \"float16\") or {name}: T.int32")
        with span_scope(span):
            try:
                ann = _annotation(func, name, p.annotation, ann_scope)
            except TegulaError as e:
                raise e.with_span(span)
            if isinstance(ann, TensorSpec):
                param: Any = Buffer(name, ann.shape, ann.dtype, "global")
            elif ptr_like(ann) is not None:
                param = Var(name, ptr_like(ann))
            else:
                raise KernelTypeError(f"parameter '{name}' has annotation {ann!r}; expected "
                                      "T.Tensor(shape, dtype) or a scalar dtype like T.int32", span)
        params.append(param)
        locals_[name] = param
        b.param_names.add(name)
    parser = Parser(b, src, scope, locals_)
    with building(b):
        ret = run_body(parser, src.tree.body)
    if ret is not None:
        ret_node = next((n for n in src.tree.body if isinstance(n, ast.Return)), src.tree)
        raise KernelSyntaxError("a @T.prim_func returns nothing; outputs are parameters it writes",
                                src.span(ret_node))
    return PrimFunc(func.__name__, tuple(params) + tuple(b.workspaces), resolve_views(seq(b.stack[0]), b.views),
                    _workspace_attrs(b), span=src.span(src.tree))


def _workspace_attrs(b: Builder) -> dict:
    """``attrs["workspaces"]``: how many trailing parameters are T.alloc_global scratch tensors."""
    return {"workspaces": len(b.workspaces)} if b.workspaces else {}


def prim_func(func: Optional[Callable] = None, *, private: bool = False, check_well_formed: bool = True) -> Any:
    """Decorator: parse the function into a :class:`PrimFunc` now; with ``check_well_formed``
    (the default) the result is verified (:func:`tegula.ir.verify.verify`), raising
    ``VerifyError`` at the offending line."""
    caller = inspect.currentframe().f_back  # type: ignore[union-attr]
    outer = dict(caller.f_locals) if caller is not None else None

    def parse(f: Callable) -> PrimFunc:
        pf = parse_prim_func(f, outer)
        if check_well_formed:
            verify(pf)
        return pf
    if func is None:
        return parse
    return parse(func)


@dataclass
class EagerTrace:
    """The result of tracing an eager-style function for one set of arguments."""

    func: PrimFunc
    out_idx: list[int]
    tensor_args: list[str]          # names of the function parameters that are tensors, in order
    consts: dict                    # values of T.const symbols and other constants
    const_names: tuple = ()         # the names the body declared with T.const, in order


def tensor_params(func: Callable) -> list[str]:
    """Parameters of an eager function declared in its body as ``A: T.Tensor(...)``, in order."""
    src = Source.of(func)
    names = [a.arg for a in src.tree.args.args]
    annotated = {n.target.id for n in src.tree.body
                 if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    return [n for n in names if n in annotated]


@_clean_errors
def trace_eager(func: Callable, bound: dict, tensors: dict, consts: dict) -> EagerTrace:
    """Trace an eager-style function.

    ``bound`` maps non-tensor parameters to their values; ``tensors`` maps tensor parameters to
    ``(shape, dtype)`` of the actual argument (or None when compiling ahead of time with
    ``consts`` giving the shape symbols).
    """
    src = Source.of(func)
    scope = function_scope(func)
    b = Builder("eager", consts)
    b.pending = dict(tensors)
    b.shape_hints = _shape_hints(src.tree, tensors)
    locals_ = dict(bound)
    for n in tensors:
        locals_[n] = _Undeclared(n)
        b.param_names.add(n)
    parser = Parser(b, src, scope, locals_)
    with building(b):
        ret = run_body(parser, src.tree.body)
    declared = {p.name for p in b.params if isinstance(p, Buffer)}
    missing = [n for n in tensors if n not in declared]
    if missing:
        raise KernelSyntaxError(f"tensor parameter '{missing[0]}' is never declared in the body",
                                src.span(src.tree), hint=f"add `{missing[0]}: T.Tensor(shape, dtype)`")
    order = {n: i for i, n in enumerate(tensors)}
    inputs = sorted((p for p in b.params if p not in b.outputs), key=lambda p: order.get(p.name, 0))
    params = inputs + list(b.outputs)
    rets = ret if isinstance(ret, (tuple, list)) else ([] if ret is None else [ret])
    out_idx = []
    for r in rets:
        if not isinstance(r, Buffer) or r not in params:
            raise KernelSyntaxError(f"an eager kernel returns its output tensors; got {semantic.describe(r)}",
                                    src.span(src.tree))
        out_idx.append(params.index(r))
    if not rets and b.outputs:
        out_idx = [params.index(o) for o in b.outputs]
    pf = PrimFunc(func.__name__, tuple(params) + tuple(b.workspaces), resolve_views(seq(b.stack[0]), b.views),
                  _workspace_attrs(b), span=src.span(src.tree))
    return EagerTrace(pf, out_idx, list(tensors), dict(b.consts), tuple(b.const_names))


def _shape_dims(ann: ast.expr, shapes: dict) -> list:
    """The dimension nodes of ``T.Tensor((M, K), ...)`` / ``T.Tensor[(M, K), ...]``, if literal or
    a name that ``shapes`` maps to a literal tuple (``A_shape = (M, K)`` earlier in the body)."""
    shape: Any = None
    if isinstance(ann, ast.Call) and ann.args:
        shape = ann.args[0]
    elif isinstance(ann, ast.Subscript) and isinstance(ann.slice, ast.Tuple) and ann.slice.elts:
        shape = ann.slice.elts[0]
    if isinstance(shape, ast.Name):
        shape = shapes.get(shape.id)
    return list(shape.elts) if isinstance(shape, (ast.Tuple, ast.List)) else []


def _shape_hints(tree: ast.FunctionDef, tensors: dict) -> dict:
    """Values of ``T.const`` symbols read off the tensor arguments: a symbol named as a plain
    dimension of a top-level ``A: T.Tensor((M, K), ...)`` annotation takes that dimension of the
    actual ``A`` (the first such annotation wins). This gives the symbols their values from the
    start of the body, so host arithmetic on them before the annotations (``splitK = K // s``)
    works as in TileLang."""
    hints: dict = {}
    alias: dict = {}  # KH, KW = K, K: a dimension named KH is K's
    shapes: dict = {}  # A_shape = (M, K): an annotation T.Tensor(A_shape, ...) names M and K
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t, v = node.targets[0], node.value
            if isinstance(t, ast.Name):
                if isinstance(v, (ast.Tuple, ast.List)):
                    shapes[t.id] = v
                else:
                    shapes.pop(t.id, None)
            pairs = [(t, v)] if isinstance(t, ast.Name) else \
                list(zip(t.elts, v.elts)) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) \
                and len(t.elts) == len(v.elts) else []
            for a, b in pairs:
                if isinstance(a, ast.Name):
                    if isinstance(b, ast.Name):
                        alias[a.id] = alias.get(b.id, b.id)
                    else:
                        alias.pop(a.id, None)
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        actual = tensors.get(node.target.id)
        if actual is None:
            continue
        for i, d in enumerate(_shape_dims(node.annotation, shapes)):
            if isinstance(d, ast.Name) and i < len(actual[0]):
                hints.setdefault(alias.get(d.id, d.id), int(actual[0][i]))
    return hints


class _Undeclared:
    """A tensor parameter before its ``A: T.Tensor(...)`` declaration."""

    def __init__(self, name: str):
        self.name = name

    def __getattr__(self, attr: str) -> Any:
        raise KernelTypeError(f"tensor '{self.name}' is used before its declaration",
                              hint=f"declare it first: {self.name}: T.Tensor(shape, dtype)")

    def __getitem__(self, key: Any) -> Any:
        return self.__getattr__("__getitem__")


MAX_MACRO_DEPTH = 24  # nested macro expansions; deeper is a macro that calls itself


class Macro:
    """``@T.macro``: a helper whose body is inlined where it is called inside a kernel."""

    def __init__(self, func: Callable):
        self.func = func
        self.__name__ = func.__name__
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        b = active()
        if b is None:
            raise KernelSyntaxError(f"macro '{self.__name__}' can only be called inside a kernel",
                                    caller_span())
        sig = inspect.signature(self.func)
        try:
            ba = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise KernelTypeError(f"macro '{self.__name__}': {e}") from None
        ba.apply_defaults()
        src = Source.of(self.func)
        if len(b.macros) >= MAX_MACRO_DEPTH:
            chain = " -> ".join(b.macros[:3] + ["..."] + b.macros[-2:] + [self.__name__])
            raise KernelSyntaxError(f"macro expansion is more than {MAX_MACRO_DEPTH} levels deep "
                                    f"({chain}): a macro that calls itself never stops expanding",
                                    hint="a macro is inlined where it is called; write the repetition "
                                         "as a loop (T.serial, or a Python loop over host values)")
        args = dict(ba.arguments)
        for name, p in sig.parameters.items():  # T.Ref parameters given an element bind to it
            v = args.get(name)
            if is_ref_annotation(p.annotation) and isinstance(v, BufferLoad) and not v.buffer.is_var:
                args[name] = ElementRef(v)
        parser = Parser(b, src, function_scope(self.func), args, is_macro=True)
        b.macros.append(self.__name__)
        try:
            return run_body(parser, src.tree.body)
        except RecursionError:
            raise KernelSyntaxError(f"macro '{self.__name__}' nests too deeply to expand",
                                    hint="a macro is inlined where it is called; write the repetition "
                                         "as a loop") from None
        finally:
            b.macros.pop()

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        import functools

        return functools.partial(self.__call__, obj)


def macro(func: Optional[Callable] = None, *, hygienic: bool = True) -> Any:
    """``@T.macro`` (or ``@T.macro(hygienic=...)``): a helper whose body is inlined into the
    calling ``@T.prim_func`` at each call, with the call's arguments (buffers, expressions,
    Python values) substituted. All targets. Example::

        @T.macro
        def relu(buf):
            for i in T.Parallel(128):
                buf[i] = T.max(buf[i], 0)"""
    if func is None:
        return lambda f: Macro(f)
    return Macro(func)


__all__ = ["prim_func", "macro", "Macro", "parse_prim_func", "trace_eager", "tensor_params",
           "EagerTrace"]
