"""Kernel calls inside ``torch.compile``: each becomes a call of a custom op registered for it.

Dynamo traces :func:`call` (so it stays plain Python over tensors and constants); the op is
found, or registered, by functions Dynamo runs once at trace time and keeps the result of
(``assume_constant_result``), keyed by the kernel's key (``_route_key``, a string attribute
Dynamo guards on) and the constant arguments. The op's real implementation runs the kernel as an eager call would, so an eager
kernel still compiles once per shape; its fake implementation gives the outputs' shapes,
symbolic ones included. Outside Dynamo (AOTAutograd tracing a backward, ``torch.export``'s
non-strict mode) the same functions simply run.
"""
from __future__ import annotations

from typing import Any

import torch

from tegula.errors import ArgumentError
from tegula.jit import _freeze
from tegula.runtime import compiled
from tegula.runtime.kernel import JITKernel
from tegula.torch import ops

_KERNEL_OPS: dict = {}   # kernel key -> (kernel, op name)
_EAGER_OPS: dict = {}    # (function key, constant arguments) -> (function, op name)


@torch._dynamo.assume_constant_result
def _kernel_op(key: str) -> str:
    """``"name"`` of the op in namespace ``tegula`` for the kernel keyed ``key``
    (``kernel._route_key``), registered on first use."""
    kernel = compiled.objects[key]
    got = _KERNEL_OPS.get(key)
    if got is None or got[0] is not kernel:
        qual = ops.unique_name(kernel.func.name)
        ops.define(qual, ops.kernel_spec(kernel))
        got = _KERNEL_OPS[key] = (kernel, qual)
    return got[1].split("::")[1]


@torch._dynamo.assume_constant_result
def _input_names(key: str) -> str:
    kernel = compiled.objects[key]
    return ",".join(kernel.func.params[i].name for i in kernel.inputs)


@torch._dynamo.assume_constant_result
def _eager_op(key: str, spec: tuple, kwspec: tuple) -> str:
    """``"name|i,j,..."``: the op for the eager function keyed ``key`` called with these
    constant arguments (tensors marked None in ``spec``, ``kwspec``), and which given tensor
    goes to each tensor parameter."""
    fn = compiled.objects[key]
    full = (key, _freeze(spec), _freeze(kwspec))
    got = _EAGER_OPS.get(full)
    if got is None or got[0] is not fn:
        marks = [_Marker(i) for i in range(sum(1 for s in spec if s is None) + sum(1 for _, s in kwspec if s is None))]
        it = iter(marks)
        args = [next(it) if s is None else s for s in spec]
        kwargs = {n: (next(it) if s is None else s) for n, s in kwspec}
        kwargs, consts = fn._consts_apart(kwargs)
        try:
            ba = fn.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{fn.func.__name__}(): {e}") from None
        ba.apply_defaults()
        order = []
        for n in fn.tensor_names:
            v = ba.arguments.get(n)
            if not isinstance(v, _Marker):
                raise ArgumentError(f"argument '{n}': expected a tensor, got {type(v).__name__}")
            order.append(v.index)
        fixed = {n: v for n, v in ba.arguments.items() if n not in fn.tensor_names}
        for n, v in fixed.items():
            if isinstance(v, _Marker):
                raise ArgumentError(f"argument '{n}' is a tensor, but the body does not declare it",
                                    hint=f"add `{n}: T.Tensor(shape, dtype)` at the top of the body")
        qual = ops.unique_name(fn.func.__name__)
        ops.define(qual, ops.eager_spec(fn, fixed, consts, listed=True, keyword_args=False))
        got = _EAGER_OPS[full] = (fn, qual + "|" + ",".join(str(i) for i in order))
    return got[1].split("::")[1]


_LAZY: dict = {}   # kernel key -> a kernel a lazy factory built inside a trace


@torch._dynamo.assume_constant_result
def _lazy_kernel(key: str, args: tuple, kwargs: tuple) -> str:
    """The key of the kernel the lazy factory keyed ``key`` builds from these (constant)
    arguments, built now (once per arguments, as outside a trace)."""
    kernel = compiled.objects[key]._call(args, dict(kwargs))
    _LAZY[kernel._route_key] = kernel
    return kernel._route_key


class _Marker:
    """Where a tensor stood among an eager call's arguments."""

    def __init__(self, index: int):
        self.index = index


def _op(name: str) -> Any:
    return getattr(torch.ops.tegula, name)


def call(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The result of ``fn(*args, **kwargs)`` (a JITKernel or a JITFunction) as a custom op call."""
    if isinstance(fn, JITKernel):
        if kwargs:
            names = _input_names(fn._route_key).split(",")
            args = tuple(args) + tuple(kwargs[n] for n in names[len(args):] if n in kwargs)
        return _op(_kernel_op(fn._route_key))(*args)
    if not fn.eager:   # a lazy factory: the kernel it builds, found by its key
        return _LAZY[_lazy_kernel(fn._route_key, tuple(args), tuple(sorted(kwargs.items())))]
    tensors = []
    spec = []
    for a in args:
        if isinstance(a, torch.Tensor):
            tensors.append(a)
            spec.append(None)
        else:
            spec.append(a)
    kwspec = []
    for n in sorted(kwargs):
        v = kwargs[n]
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            kwspec.append((n, None))
        else:
            kwspec.append((n, v))
    name, order = _eager_op(fn._route_key, tuple(spec), tuple(kwspec)).split("|")
    ordered = [tensors[int(i)] for i in order.split(",")] if order else []
    outs = _op(name)(*ordered)
    if len(outs) == 0:
        return None
    return outs[0] if len(outs) == 1 else tuple(outs)

