"""Layouts written by the user: ``T.Layout(shape, fn)`` and ``T.Fragment(shape, ...)``.

``T.Layout([M, N], lambda i, j: (j, i))`` maps each logical index of a tile to a physical index
(the forward index), ``T.Fragment(shape, forward_thread_fn=, forward_index_fn=)`` maps it to the
thread holding it and the register in that thread. Both evaluate the user's function once on
symbolic indices, so the mapping is an IR expression that can be printed, evaluated and bounded.

What the compiler does with them (``T.annotate_layout``; see docs/language.md): they never change
what a kernel computes. The interpreter and the emulator ignore them; the CUDA lowering keeps its
own placement of shared tiles and fragments (placement is not observable), and global buffers
stay row-major in their logical shape, so kernels that agree on a layout agree on the data.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from tegula.arith.bound import bound
from tegula.arith.simplify import simplify
from tegula.errors import KernelTypeError
from tegula.ir import expr as E
from tegula.ir.expr import Expr, Var
from tegula.ir.visitor import substitute


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise KernelTypeError(f"{what}: the shape must be a tuple of ints, got {shape!r}") from None
    if not out or any(d <= 0 for d in out):
        raise KernelTypeError(f"{what}: the shape must be positive ints, got {shape!r}")
    return out


def _outputs(fn: Callable, vars_: Sequence[Var], what: str) -> tuple[Expr, ...]:
    try:
        out = fn(*vars_)
    except TypeError as e:
        raise KernelTypeError(f"{what}: the function must take {len(vars_)} index argument(s) "
                              f"(one per dimension): {e}") from None
    if not isinstance(out, (list, tuple)):
        out = (out,)
    res = []
    for o in out:
        e = E.as_expr(o)
        if not e.dtype.is_int:
            raise KernelTypeError(f"{what}: the function must return integer indices, got {e}")
        res.append(e)
    return tuple(res)


def _extent(e: Expr, ranges: dict, what: str) -> int:
    b = bound(e, ranges)
    if b is None or b[0] < 0:
        raise KernelTypeError(f"{what}: cannot bound the index {e} to a non-negative range")
    return int(b[1]) + 1


class Layout:
    """``T.Layout(shape, forward_fn)``: logical index -> physical index.

    ``output_shape`` is the extent of each physical dimension (from the bounds of the function).
    """

    def __init__(self, shape: Any, forward_fn: Callable, *, what: str = "T.Layout"):
        self.input_shape = _shape(shape, what)
        self.vars = tuple(Var(f"i{k}") for k in range(len(self.input_shape)))
        self.forward_index = _outputs(forward_fn, self.vars, what)
        ranges = {v: (0, n - 1) for v, n in zip(self.vars, self.input_shape)}
        self.output_shape = tuple(_extent(e, ranges, what) for e in self.forward_index)

    def map_forward_index(self, indices: Sequence[Any]) -> tuple[Any, ...]:
        """The physical index of logical ``indices`` (ints give ints, expressions expressions)."""
        return _apply(self.forward_index, self.vars, indices)

    def get_forward_index(self) -> tuple[Expr, ...]:
        return self.forward_index

    def describe(self) -> str:
        args = ", ".join(str(v) for v in self.vars)
        outs = ", ".join(str(e) for e in self.forward_index)
        return f"T.Layout({list(self.input_shape)}, lambda {args}: [{outs}])"

    __repr__ = describe


class Fragment:
    """``T.Fragment(shape, forward_thread_fn=, forward_index_fn=, replicate=1)``: logical index
    -> (thread, register index); ``forward_fn`` may give both at once as ``(thread, index)``."""

    def __init__(self, shape: Any, forward_fn: Optional[Callable] = None,
                 forward_thread_fn: Optional[Callable] = None, replicate: int = 1,
                 forward_index_fn: Optional[Callable] = None):
        what = "T.Fragment"
        self.input_shape = _shape(shape, what)
        self.vars = tuple(Var(f"i{k}") for k in range(len(self.input_shape)))
        if forward_fn is not None:
            both = _outputs(forward_fn, self.vars, what)
            if len(both) < 2:
                raise KernelTypeError(f"{what}: forward_fn must return (thread, index...)")
            self.forward_thread, self.forward_index = both[0], tuple(both[1:])
        else:
            if forward_thread_fn is None or forward_index_fn is None:
                raise KernelTypeError(f"{what}: give forward_fn, or both forward_thread_fn and "
                                      "forward_index_fn")
            self.forward_thread = _outputs(forward_thread_fn, self.vars, what)[0]
            self.forward_index = _outputs(forward_index_fn, self.vars, what)
        if not isinstance(replicate, int) or replicate < 1:
            raise KernelTypeError(f"{what}: replicate must be a positive int, got {replicate!r}")
        self.replicate = replicate
        ranges = {v: (0, n - 1) for v, n in zip(self.vars, self.input_shape)}
        self.thread_count = _extent(self.forward_thread, ranges, what) * replicate
        self.output_shape = tuple(_extent(e, ranges, what) for e in self.forward_index)

    def map_forward_thread(self, indices: Sequence[Any]) -> Any:
        return _apply((self.forward_thread,), self.vars, indices)[0]

    def map_forward_index(self, indices: Sequence[Any]) -> tuple[Any, ...]:
        return _apply(self.forward_index, self.vars, indices)

    def get_thread_size(self) -> int:
        return self.thread_count

    def describe(self) -> str:
        args = ", ".join(str(v) for v in self.vars)
        outs = ", ".join(str(e) for e in self.forward_index)
        return (f"T.Fragment({list(self.input_shape)}, forward_thread_fn=lambda {args}: "
                f"{self.forward_thread}, forward_index_fn=lambda {args}: [{outs}])")

    __repr__ = describe


def _apply(exprs: Sequence[Expr], vars_: Sequence[Var], indices: Sequence[Any]) -> tuple[Any, ...]:
    if len(indices) != len(vars_):
        raise KernelTypeError(f"the layout takes {len(vars_)} indices, got {len(indices)}")
    vmap = {v: E.as_expr(i) for v, i in zip(vars_, indices)}
    out = []
    for e in exprs:
        r = simplify(substitute(e, vmap))
        out.append(int(r.value) if isinstance(r, E.Const) else r)
    return tuple(out)
