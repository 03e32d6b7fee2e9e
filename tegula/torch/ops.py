"""Registering tegula kernels as ``torch.library`` custom ops (see :func:`tegula.torch.op`).

A :class:`Spec` says what an op is: its schema (one argument per kernel input, in the kernel's
order; outputs as returns), how the real call runs the kernel and how the fake call makes
outputs of the right shapes and dtypes without running it. Specs come from a ``JITKernel``
(:func:`kernel_spec`) or from an eager ``@tegula.jit`` function and the values of its non-tensor
arguments (:func:`eager_spec`); :func:`define` turns one into an op.
"""
from __future__ import annotations

import ast
import functools
import inspect
import itertools
import operator
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from tegula.errors import ArgumentError, TegulaError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.stmt import PrimFunc
from tegula.jit import JITFunction, _freeze
from tegula.language.parser import Source
from tegula.language.prim_func import _shape_hints, trace_eager
from tegula.runtime import args as A
from tegula.runtime.kernel import JITKernel
from tegula.torch import backward as backward_op

NAMESPACE = "tegula"


@dataclass
class Spec:
    """One op: ``args`` are ``(name, schema type, default text or None)`` in call order;
    ``returns`` the schema's return text; ``run(*args)`` the real call; ``fake(*args)`` the
    outputs' fakes; ``mutated`` the tensor arguments the kernel writes."""

    args: list
    returns: str
    run: Callable[..., Any]
    fake: Callable[..., Any]
    mutated: frozenset = field(default_factory=frozenset)

    def schema(self) -> str:
        letters = iter("abcdefghijklmnopqrstuvwxyz")
        parts = []
        for name, ty, default in self.args:
            if name in self.mutated:
                ty = f"Tensor({next(letters)}!)"
            # joined, not an f-string: the GPU machine's torch 2.11 lost the space of
            # f"{ty} {name}" here ("TensorX" in the schema); unexplained, not seen on 2.13
            parts.append(" ".join((ty, name)) + ("" if default is None else "=" + str(default)))
        return f"({', '.join(parts)}) -> {self.returns}"

    def names(self) -> list:
        return [a[0] for a in self.args]


def _returns(n: int, listed: bool = False) -> str:
    if listed:
        return "Tensor[]"
    return "()" if n == 0 else "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"


def _scalar_type(d: dt.DType) -> str:
    return "bool" if d.is_bool else "float" if d.is_float else "SymInt"


# -- output shapes, symbolic dimensions included ---------------------------------------------------
# The integer rows of the operator table that shape expressions use, as Python operators on
# Python ints and torch SymInts (which have no fold of their own).
def _sym_rows() -> dict:
    import torch

    return {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
            "floordiv": operator.floordiv, "floormod": operator.mod,
            "min": torch.sym_min, "max": torch.sym_max}


def sym_dim(d: Any, dyn: dict) -> Any:
    """The value of shape expression ``d`` with dynamic dimensions ``dyn`` (Var -> int or
    SymInt); concrete values go through the operator table (:func:`tegula.runtime.args.eval_dim`)."""
    if isinstance(d, int):
        return d
    if isinstance(d, E.Var):
        if d not in dyn:
            raise ArgumentError(f"dimension '{d.name}' is not bound by any argument")
        return dyn[d]
    if all(isinstance(v, int) for v in dyn.values()):
        return A.eval_dim(d, {k: int(v) for k, v in dyn.items()})
    if isinstance(d, E.Const):
        return int(d.value)
    row = _sym_rows().get(getattr(d, "op", None)) if isinstance(d, E.BinOp) else None
    if row is None:
        raise ArgumentError(f"the output dimension {d} cannot be computed from symbolic sizes")
    return row(sym_dim(d.a, dyn), sym_dim(d.b, dyn))


def fake_outputs(func: PrimFunc, inputs: Sequence[int], outputs: Sequence[int], args: Sequence[Any]) -> list:
    """Empty tensors shaped like the outputs at positions ``outputs`` of ``func`` for the
    (fake) tensors ``args`` given for the parameters at ``inputs``."""
    import torch

    dyn: dict = {}
    device = None
    for pos, a in zip(inputs, args):
        p = func.params[pos]
        if isinstance(p, E.Var):
            dyn[p] = a
            continue
        if device is None:
            device = a.device
        for k, d in enumerate(p.shape):
            if isinstance(d, E.Var):
                if d in dyn:  # the kernel checks this when it runs; the graph may rely on it
                    torch._check(a.shape[k] == dyn[d], lambda: f"'{d.name}' differs between arguments")
                else:
                    dyn[d] = a.shape[k]
    outs = []
    for i in outputs:
        p = func.params[i]
        shape = [sym_dim(d, dyn) for d in p.shape]
        outs.append(torch.empty(shape, dtype=A._torch_dtype(p.dtype), device=device or "cpu"))
    return outs


def _pack(outs: list, listed: bool = False) -> Any:
    if listed:
        return list(outs)
    if not outs:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)


# -- specs ---------------------------------------------------------------------------------------
def kernel_spec(kernel: JITKernel) -> Spec:
    """The op of a built kernel: its inputs (tensors and scalars) in order, its ``out_idx``
    outputs as returns; it mutates the input tensors it writes."""
    func = kernel.func
    args = []
    for i in kernel.inputs:
        p = func.params[i]
        args.append((p.name, "Tensor" if isinstance(p, Buffer) else _scalar_type(p.dtype), None))
    names = {func.params[i].name for i in kernel.inputs if isinstance(func.params[i], Buffer)}
    mutated = frozenset(A.written_params(func) & names)

    def run(*a: Any) -> Any:
        return kernel._call(a, {})

    def fake(*a: Any) -> Any:
        return _pack(fake_outputs(func, kernel.inputs, kernel.out_idx, a))

    return Spec(args, _returns(len(kernel.out_idx)), run, fake, mutated)


def _default_text(v: Any) -> Optional[str]:
    """A schema type for a non-tensor argument's default (None: not expressible)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return None


def eager_spec(fn: JITFunction, fixed: dict, consts: dict, listed: bool, keyword_args: bool) -> Spec:
    """The op of an eager function: its tensor parameters in order, then (``keyword_args``) its
    int/float/bool parameters with defaults as arguments with those defaults; ``fixed`` gives
    the values of the other non-tensor parameters, ``consts`` of ``T.const`` symbols. Outputs are
    a ``Tensor[]`` when ``listed``, else as many returns as one trace of the body gives."""
    sig = fn.signature
    scalars = []
    if keyword_args:
        for n, p in sig.parameters.items():
            if n in fn.tensor_names or n in fixed or p.default is inspect.Parameter.empty:
                continue
            ty = _default_text(p.default)
            if ty is not None:
                scalars.append((n, ty, repr(p.default) if ty != "bool" else str(p.default)))
    names = list(fn.tensor_names)
    args = [(n, "Tensor", None) for n in names] + scalars
    others_default = {n: p.default for n, p in sig.parameters.items()
                      if n not in fn.tensor_names and p.default is not inspect.Parameter.empty}
    symbolic: dict = {}

    def split(a: tuple) -> tuple[dict, dict]:
        tensors = dict(zip(names, a[:len(names)]))
        others = {**others_default, **fixed, **{s[0]: v for s, v in zip(scalars, a[len(names):])}}
        return tensors, others

    def run(*a: Any) -> Any:
        tensors, others = split(a)
        out = fn._eager_kernel(tensors, others, consts)._call(tuple(tensors[n] for n in names), {})
        outs = [] if out is None else list(out) if isinstance(out, tuple) else [out]
        return _pack(outs, listed)

    def trace(tensors: dict, others: dict) -> Any:
        concrete = all(isinstance(s, int) for t in tensors.values() for s in t.shape)
        if concrete:
            info = {n: (tuple(int(s) for s in t.shape), str(t.dtype)) for n, t in tensors.items()}
            return trace_eager(fn.func, others, info, consts)
        info = {n: (tuple(_hint(s) for s in t.shape), str(t.dtype)) for n, t in tensors.items()}
        at_hints = trace_eager(fn.func, others, info, consts)
        key = (_freeze(others), tuple((n, i[1], len(i[0])) for n, i in info.items()))
        dynamic = tuple((n, k) for n, t in tensors.items() for k, d in enumerate(t.shape)
                        if not isinstance(d, int))
        key = key + (dynamic,)
        if key not in symbolic:
            symbolic[key] = _symbolic_trace(fn, others, info, consts, at_hints, set(dynamic))
        # shapes the body computes from sizes it branches on: as at the sizes' hints
        return symbolic[key] or at_hints

    def fake(*a: Any) -> Any:
        tensors, others = split(a)
        tr = trace(tensors, others)
        pos = {p.name: i for i, p in enumerate(tr.func.params)}
        inputs = [pos[n] for n in names]
        return _pack(fake_outputs(tr.func, inputs, tr.out_idx, [tensors[n] for n in names]), listed)

    if listed:
        returns = _returns(0, listed=True)
        mutated = frozenset()
    else:
        tr = _count_trace(fn, {**others_default, **fixed}, names, consts)
        returns = _returns(len(tr.out_idx))
        mutated = frozenset(A.written_params(tr.func) & set(names))
    return Spec(args, returns, run, fake, mutated)


def _symbolic_trace(fn: JITFunction, others: dict, info: dict, consts: dict, at_hints: Any,
                    dynamic: set) -> Any:
    """The eager body traced with the ``T.const`` shape symbols read off dynamic dimensions
    (``dynamic``: (tensor, axis) pairs) left symbolic, the others at their values in
    ``at_hints``, so output shapes are expressions of the dynamic sizes; None when the body needs
    a dynamic size's value (host arithmetic, a branch on it)."""
    marks = {n: (tuple(1_000_003 + 64 * j + k for k in range(len(i[0]))), i[1])
             for j, (n, i) in enumerate(info.items())}
    where = {m: (n, k) for n, i in marks.items() for k, m in enumerate(i[0])}
    read = _shape_hints(Source.of(fn.func).tree, marks)   # symbol -> the dimension it is read from
    values = dict(at_hints.consts)
    for sym, m in read.items():
        if where.get(m) in dynamic and sym not in consts:
            values[sym] = E.Var(sym, dt.int32)
    try:
        return trace_eager(fn.func, others, {n: None for n in info}, values)
    except (TegulaError, TypeError, ValueError):
        return None


def _count_trace(fn: JITFunction, others: dict, names: list, consts: dict) -> Any:
    """A trace of an eager body without tensors, for its number of outputs and the inputs it
    writes: its ``T.const`` symbols symbolic, else (tiles sized by them) all at 128."""
    syms = [n for n in _const_names(fn) if n not in consts]
    err = None
    for values in ({n: E.Var(n, dt.int32) for n in syms}, {n: 128 for n in syms}):
        try:
            return trace_eager(fn.func, others, {n: None for n in names}, {**values, **consts})
        except TegulaError as e:
            err = err or e
    raise ArgumentError(f"tegula.torch.op: cannot trace '{fn.func.__name__}' without tensors to count "
                        f"its outputs: {err}", hint="declare the tensors with T.const shape symbols "
                        "(`M, N = T.const('M, N')`), or register fn.compile(M=...)")


def _const_names(fn: JITFunction) -> list:
    """The names an eager body declares with ``T.const("M, N")``."""
    out = []
    for node in ast.walk(Source.of(fn.func).tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "const" and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            out += [n.strip() for n in node.args[0].value.replace(",", " ").split()]
    return out


def _hint(s: Any) -> int:
    return int(s) if isinstance(s, int) else int(s.node.hint)


# -- registration --------------------------------------------------------------------------------
_LIBS: dict = {}
_COUNT = itertools.count()


# Op names of this process only: torch.compile's disk caches key graphs by the ops they call, and
# another process numbers its kernels' ops in another order (a graph of theirs must not hit).
_PROCESS = uuid.uuid4().hex[:8]


def unique_name(base: str) -> str:
    """A fresh op name in the ``tegula`` namespace derived from ``base``, unique to this process."""
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in base) or "kernel"
    return f"{NAMESPACE}::{clean}_{next(_COUNT)}_{_PROCESS}"


def define(qualname: str, spec: Spec, backward: Optional[Callable] = None,
           setup_context: Optional[Callable] = None) -> Any:
    """Register ``spec`` as the custom op ``qualname``; returns ``torch.ops.<ns>.<name>``."""
    import torch

    names = spec.names()

    def positional(args: tuple, kwargs: dict) -> tuple:
        if not kwargs:
            return args
        return tuple(args) + tuple(kwargs[n] for n in names[len(args):])

    def impl(*args: Any, **kwargs: Any) -> Any:
        return spec.run(*positional(args, kwargs))

    def fake(*args: Any, **kwargs: Any) -> Any:
        return spec.fake(*positional(args, kwargs))

    ns, name = qualname.split("::")
    lib = _LIBS.get(ns)
    if lib is None:
        lib = _LIBS[ns] = torch.library.Library(ns, "FRAGMENT")  # kept: registrations live with it
    lib.define(name + spec.schema())
    for key in ("CPU", "CUDA"):
        lib.impl(name, impl, key)
    torch.library.register_fake(qualname, fake, lib=lib)
    if backward is not None:
        tensor_idx = [i for i, a in enumerate(spec.args) if a[1] == "Tensor"]
        backward_op.register(lib, qualname, tensor_idx, len(spec.args), backward, setup_context or _save_all)
    return getattr(getattr(torch.ops, ns), name)


def _save_all(ctx: Any, inputs: tuple, output: Any) -> None:
    """The default ``setup_context``: every tensor input, then the outputs, in
    ``ctx.saved_tensors``; the inputs as given in ``ctx.inputs``."""
    import torch

    outs = output if isinstance(output, (tuple, list)) else (output,)
    ctx.save_for_backward(*[x for x in inputs if isinstance(x, torch.Tensor)],
                          *[o for o in outs if isinstance(o, torch.Tensor)])
    ctx.inputs = tuple(None if isinstance(x, torch.Tensor) else x for x in inputs)


def _as_kernel(fn: Any) -> Any:
    """A JITKernel or an eager JITFunction from what :func:`tegula.torch.op` accepts."""
    if isinstance(fn, (JITKernel, JITFunction)) and not (isinstance(fn, JITFunction) and not fn.eager):
        return fn
    if isinstance(fn, PrimFunc):
        return JITKernel(fn)
    if isinstance(fn, functools.partial) and isinstance(fn.func, JITFunction) and not fn.func.eager:
        return fn()
    if isinstance(fn, JITFunction):
        raise ArgumentError(f"tegula.torch.op: '{fn.func.__name__}' is a lazy-style factory; give the "
                            "kernel its arguments build",
                            hint=f"tegula.torch.op(name, {fn.func.__name__}(...)) or "
                                 f"functools.partial({fn.func.__name__}, ...)")
    raise ArgumentError(f"tegula.torch.op: expected a JITKernel, a @T.prim_func, a lazy factory with its "
                        f"arguments or an eager @tegula.jit function, got {type(fn).__name__}")


def register(name: str, fn: Any, *, mutates_args: Sequence[str] = (), backward: Optional[Callable] = None,
             setup_context: Optional[Callable] = None) -> Any:
    """:func:`tegula.torch.op`."""
    if not isinstance(name, str) or not name or name.count("::") > 1:
        raise ArgumentError(f"tegula.torch.op: name {name!r} is not 'namespace::name' or 'name'")
    qualname = name if "::" in name else f"{NAMESPACE}::{name}"
    if isinstance(mutates_args, str):
        mutates_args = (mutates_args,)
    kernel = _as_kernel(fn)
    spec = kernel_spec(kernel) if isinstance(kernel, JITKernel) else \
        eager_spec(kernel, {}, {}, listed=False, keyword_args=True)
    tensors = [n for n, ty, _ in spec.args if ty == "Tensor"]
    for m in mutates_args:
        if m not in tensors:
            raise ArgumentError(f"tegula.torch.op('{name}'): mutates_args names '{m}', which is not a "
                                f"tensor input of the kernel", hint=f"its tensor inputs: {', '.join(tensors)}")
    missing = sorted(spec.mutated - set(mutates_args))
    if missing:
        raise ArgumentError(f"tegula.torch.op('{name}'): the kernel writes its input '{missing[0]}', "
                            "which mutates_args does not name",
                            hint=f"mutates_args=({', '.join(repr(m) for m in spec.mutated)},)")
    spec.mutated = frozenset(mutates_args)
    backward_op.check(name, backward, setup_context)
    return define(qualname, spec, backward, setup_context)
