"""tegula kernels as PyTorch operators.

- :func:`op` registers a ``torch.library`` custom op for a tegula kernel: its schema comes from
  the kernel's parameters, its fake (meta) implementation from the output shapes and dtypes
  (symbolic dimensions included), and ``backward`` makes it differentiable. The op works in
  eager PyTorch, under ``torch.compile`` and ``torch.export``, and passes
  ``torch.library.opcheck``.
- Any tegula kernel called directly inside ``torch.compile(fullgraph=True)`` is routed through an
  op registered for it on the first trace (namespace ``tegula``), with no graph break and nothing
  for the user to register.

Importing this module does not import torch (``import tegula`` imports it to install the
route); the functions import torch when called. See docs/torch.md.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tegula.runtime import compiled as _compiled

__all__ = ["op"]


def op(name: str, fn: Any, *, mutates_args: Sequence[str] = (), backward: Optional[Callable] = None,
       setup_context: Optional[Callable] = None) -> Any:
    """Register ``fn`` as the custom op ``name`` (``"ns::name"``, or ``"name"`` in namespace
    ``tegula``) and return it (``torch.ops.<ns>.<name>``).

    ``fn`` is a ``JITKernel`` (e.g. a lazy ``@tegula.jit`` factory called with its arguments, or
    ``tegula.compile(...)``), a ``@T.prim_func`` (compiled for the default target, every parameter
    an input), a ``functools.partial`` of a lazy factory, or an eager ``@tegula.jit`` function
    (its tensor parameters are the op's tensors, its int/float/bool parameters with defaults the
    op's keyword arguments). ``mutates_args`` names the inputs the kernel writes (each one it
    writes must be named). ``backward(ctx, *grads)`` returns one gradient per input (None for
    non-tensors) and may call tegula kernels or torch; ``setup_context(ctx, inputs, output)``
    saves what it needs (default: every tensor input, then the outputs, in
    ``ctx.saved_tensors``). Raises ArgumentError for a kernel it cannot express."""
    from tegula.torch import ops

    return ops.register(name, fn, mutates_args=mutates_args, backward=backward,
                        setup_context=setup_context)


def _route(fn: Any, args: tuple, kwargs: dict) -> Any:
    """The call of a kernel (or jit function) while torch.compile traces: through its op."""
    from tegula.torch import route

    return route.call(fn, args, kwargs)


_compiled.route = _route
