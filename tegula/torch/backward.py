"""The backward of a ``tegula.torch.op`` as an op of its own, ``<name>_backward``.

Compiled graphs hold op names, and torch.compile caches them on disk: a graph loaded from the
cache in a later process calls its ops by name without tracing anything. A backward that called
tegula kernels directly would trace into ops registered while tracing (``tegula::<kernel>_<n>``),
which a later process has not registered. So the user's backward runs inside one op, registered
with the forward op under a stable name: the graph calls it with the tensor inputs, the tensors
``setup_context`` saved, the output gradients and the context's other attributes as text, and it
runs the user's code on real tensors (its fake runs the same code on fake tensors, where tegula
kernels give fake outputs). Gradients of tensor inputs the backward leaves None come back as
zeros.
"""
from __future__ import annotations

import ast
from typing import Any, Callable, Optional

from tegula.errors import ArgumentError


class _Recorder:
    """What ``setup_context`` gives its ``ctx``: the tensors it saves and its other attributes."""

    def __init__(self) -> None:
        object.__setattr__(self, "saved", ())
        object.__setattr__(self, "attrs", {})

    def save_for_backward(self, *tensors: Any) -> None:
        object.__setattr__(self, "saved", tensors)

    def __setattr__(self, name: str, value: Any) -> None:
        self.attrs[name] = value


class _Context:
    """The ``ctx`` the user's backward sees: ``saved_tensors`` and the attributes it was given."""

    def __init__(self, saved: tuple, attrs: dict):
        self.saved_tensors = saved
        self.__dict__.update(attrs)


def _state_text(name: str, attrs: dict) -> str:
    text = repr(attrs)
    try:
        if ast.literal_eval(text) != attrs:
            raise ValueError
    except (ValueError, SyntaxError):
        raise ArgumentError(f"tegula.torch.op('{name}'): setup_context set ctx attributes that are not "
                            f"plain values: {text[:200]}",
                            hint="keep tensors in ctx.save_for_backward and numbers, strings, bools, "
                                 "None and tuples of them in attributes") from None
    return text


def register(lib: Any, qualname: str, tensor_idx: list, n_args: int, backward: Callable,
             setup_context: Callable) -> None:
    """Register ``<qualname>_backward`` running ``backward`` and the forward op's autograd
    through it; ``tensor_idx`` are the positions of the forward op's tensor arguments."""
    import torch

    ns, name = qualname.split("::")
    bname = f"{name}_backward"
    lib.define(f"{bname}(Tensor[] inputs, Tensor[] saved, Tensor?[] grads, str state) -> Tensor[]")

    def run(inputs: list, saved: list, grads: list, state: str) -> list:
        got = backward(_Context(tuple(saved), ast.literal_eval(state)), *grads)
        got = got if isinstance(got, (tuple, list)) else (got,)
        if len(got) != n_args:
            raise ArgumentError(f"the backward of {qualname} returned {len(got)} gradient(s); the op has "
                                f"{n_args} argument(s)", hint="return one per argument, None for non-tensors")
        seen = {id(t) for t in (*inputs, *saved, *grads) if t is not None}
        out = []
        for k, i in enumerate(tensor_idx):
            g = got[i]
            if g is None:
                g = torch.zeros_like(inputs[k])
            elif id(g) in seen:   # an op's outputs may not alias its inputs
                g = g.clone()
            out.append(g)
        return out

    for key in ("CPU", "CUDA"):
        lib.impl(bname, run, key)
    torch.library.register_fake(f"{ns}::{bname}", run, lib=lib)
    bop = getattr(getattr(torch.ops, ns), bname)

    def setup(ctx: Any, inputs: tuple, output: Any) -> None:
        rec = _Recorder()
        setup_context(rec, inputs, output)
        ctx.save_for_backward(*[inputs[i] for i in tensor_idx], *rec.saved)
        ctx.state = _state_text(qualname, rec.attrs)

    def grad(ctx: Any, *grads: Any) -> tuple:
        saved = ctx.saved_tensors
        n = len(tensor_idx)
        outs = bop(list(saved[:n]), list(saved[n:]), list(grads), ctx.state)
        res: list = [None] * n_args
        for k, i in enumerate(tensor_idx):
            res[i] = outs[k]
        return tuple(res)

    torch.library.register_autograd(qualname, grad, setup_context=setup, lib=lib)


def check(name: str, backward: Optional[Callable], setup_context: Optional[Callable]) -> None:
    """ArgumentError for a ``setup_context`` given without ``backward``."""
    if backward is None and setup_context is not None:
        raise ArgumentError(f"tegula.torch.op('{name}'): setup_context without backward")
