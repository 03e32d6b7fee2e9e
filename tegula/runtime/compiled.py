"""Kernel calls while ``torch.compile`` (or ``torch.export``) traces.

A traced call cannot bind, allocate or launch: its tensors are fake. :func:`tracing` says when
that is the case (Dynamo folds it to True while it traces, AOTAutograd's tracing sees it set);
``JITKernel`` and ``JITFunction`` then hand the call to :data:`route`, which ``tegula.torch``
installs: it calls a ``torch.library`` custom op registered for the kernel, which the graph keeps
and which runs the kernel when the graph runs. This floor only holds the hook; the code that
knows torch lives above it.
"""
from __future__ import annotations

import itertools
import sys
import weakref
from typing import Any, Callable, Optional

# (kernel or jit function, args, kwargs) -> the call's result, inside a trace; set by tegula.torch
route: Optional[Callable[[Any, tuple, dict], Any]] = None

# every JITKernel and JITFunction by the key it was given (a trace reads the key, a string that
# Dynamo keeps as a constant, as it may not keep an int, and finds the object here)
objects: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()
_numbers = itertools.count()


def register(obj: Any) -> str:
    """A key for ``obj`` (a JITKernel or JITFunction), by which :data:`objects` finds it."""
    key = f"k{next(_numbers)}"
    objects[key] = obj
    return key


def _tracing_once_torch_is_here() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    global tracing
    compiler = getattr(torch, "compiler", None)   # torch before 2.3 has neither: no route
    tracing = getattr(compiler, "is_dynamo_compiling", None) or getattr(compiler, "is_compiling", None) \
        or (lambda: False)   # from now on one cheap call
    return tracing()


# True while Dynamo traces the code calling a kernel (Dynamo folds the call to True; outside a
# trace it is one call returning False). Other tracers (AOTAutograd of a backward, opcheck,
# torch.export's non-strict mode) hand kernels fake tensors: :func:`fake` tells those.
tracing: Callable[[], bool] = _tracing_once_torch_is_here


def fake(args: Any) -> bool:
    """True when a tensor among ``args`` is fake (traced by AOTAutograd, ``make_fx`` or
    ``opcheck`` outside a torch.compile session)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    is_fake = torch._subclasses.fake_tensor.is_fake
    return any(isinstance(a, torch.Tensor) and type(a) is not torch.Tensor and is_fake(a) for a in args)
