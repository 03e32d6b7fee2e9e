"""Which values of a kernel's block-level code can differ between its threads.

Outside ``T.Parallel`` and tile operations every thread of a block runs a kernel's statements
(TileLang's semantics). Stores whose index and value are the same in every thread leave memory
the same whoever makes them, so the CUDA lowering has thread 0 alone make them; the others, and
every element atomic, are made by each thread. What can differ between threads: the thread index
of thread-level code (``T.get_thread_binding``), lets and loop variables computed from varying
values, and registers (``T.alloc_local``, ``T.alloc_var``, one-element fragments) written from
varying values or under control flow that depends on one (a branch on the thread index, a
``T.ws`` region). :func:`thread_variance` finds them, to a fixed point::

    tx = T.get_thread_binding()
    acc[0] = X[bx, tx]                 # acc varies: written from tx
    T.atomic_add(Y[bx], acc[0])        # every thread adds its own acc[0]

:func:`warn_uniform_adds` warns where that rule adds one value once per thread, which is what
the program says but seldom what its author meant.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from tegula.errors import SemanticsWarning, render
from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import BufferLoad, Expr, Var
from tegula.ir.stmt import (WARP_SPECIALIZE, AttrStmt, Atomic, BufferStore, For, IfThenElse, Kernel,
                            LetStmt, PrimFunc, SeqStmt, Stmt, TileOp, While)
from tegula.ir.visitor import post_order_visit


@dataclass
class Variance:
    """The variables and per-thread buffers (by id) whose values can differ between threads."""

    vars: set = field(default_factory=set)
    buffers: set = field(default_factory=set)

    def varies(self, *nodes: Any) -> bool:
        """Whether any of ``nodes`` (expressions, statements) reads a varying value."""
        if not self.vars and not self.buffers:  # a kernel with no thread index: nothing varies
            return False
        found = False

        def see(n: Any) -> None:
            nonlocal found
            if (isinstance(n, Var) and id(n) in self.vars) or \
                    (isinstance(n, BufferLoad) and id(n.buffer) in self.buffers):
                found = True

        for n in nodes:
            if n is not None and not isinstance(n, (int, float, bool, str)):
                post_order_visit(n, see)
            if found:
                return True
        return False

    def _mark(self, buf: Any) -> None:
        if buf.is_local or buf.is_fragment:
            self.buffers.add(id(buf))


def thread_variance(k: Kernel, tid: Optional[Var] = None) -> Variance:
    """What varies between the threads of kernel ``k`` whose thread index is ``tid`` (its
    ``thread_var``; a kernel without one varies only inside ``T.ws`` regions)."""
    v = Variance({id(tid)} if tid is not None else set())
    while True:
        size = (len(v.vars), len(v.buffers))
        for s, divergent, region, _, _ in _statements(k.body, v):
            if isinstance(s, LetStmt):
                if v.varies(s.value):
                    v.vars.add(id(s.var))
            elif isinstance(s, For):
                if v.varies(s.start):
                    v.vars.add(id(s.var))
            elif isinstance(s, TileOp):
                if divergent or region or v.varies(s):
                    for f in ("dst", "C"):
                        r = getattr(s, f, None)
                        if isinstance(r, BufferRegion):
                            v._mark(r.buffer)
            elif isinstance(s, BufferStore):
                if divergent or region or v.varies(s.value, *s.indices):
                    v._mark(s.buffer)
        if (len(v.vars), len(v.buffers)) == size:
            return v


def _statements(s: Stmt, v: Variance, divergent: bool = False, region: bool = False, threads: int = 0,
                parallel: bool = False) -> Iterator[tuple]:
    """Each statement of ``s`` but the sequences, branches and attributes around them, with what
    governs it: ``(statement, divergent, region, threads, parallel)``: whether a branch or loop
    bound around it depends on a value that varies in ``v``, whether it is inside a ``T.ws``
    region, how many threads run it (a region's own count inside one) and whether it is inside a
    ``T.Parallel`` loop. A loop comes before its body (so that what its header makes vary is
    known there)."""
    if isinstance(s, SeqStmt):
        for x in s.stmts:
            yield from _statements(x, v, divergent, region, threads, parallel)
    elif isinstance(s, For):
        yield s, divergent, region, threads, parallel
        yield from _statements(s.body, v, divergent or v.varies(s.start, s.extent), region, threads,
                               parallel or s.kind == "parallel")
    elif isinstance(s, While):
        yield from _statements(s.body, v, divergent or v.varies(s.cond), region, threads, parallel)
    elif isinstance(s, IfThenElse):
        d = divergent or v.varies(s.cond)
        yield from _statements(s.then, v, d, region, threads, parallel)
        if s.else_ is not None:
            yield from _statements(s.else_, v, d, region, threads, parallel)
    elif isinstance(s, AttrStmt):
        ws = s.key == WARP_SPECIALIZE
        yield from _statements(s.body, v, divergent, region or ws, s.value[1] if ws else threads, parallel)
    else:
        yield s, divergent, region, threads, parallel


def _block_adds(k: Kernel, v: Variance) -> Iterator[tuple]:
    """The element-form ``T.atomic_add`` statements of block-level code that every one of more
    than one thread makes with the same index and value, each with that number of threads."""
    for s, divergent, _, threads, parallel in _statements(k.body, v, threads=k.num_threads):
        if isinstance(s, Atomic) and s.kind == "add" and isinstance(s.value, Expr) and threads > 1 \
                and not parallel and not divergent and not v.varies(s):
            yield s, threads


def warn_uniform_adds(func: PrimFunc) -> None:
    """Warn (:class:`~tegula.errors.SemanticsWarning`, at the user's line) for each element
    ``T.atomic_add`` outside ``T.Parallel`` that every thread of a block makes with one value."""
    kernels = func.body.stmts if isinstance(func.body, SeqStmt) else (func.body,)
    for k in kernels:
        if not isinstance(k, Kernel):
            continue
        var = thread_variance(k, k.thread_var)
        for s, threads in _block_adds(k, var):
            msg = render(
                f"T.atomic_add outside T.Parallel is made by every thread of the block, so this "
                f"adds the same value {threads} times (once per thread, as in TileLang)",
                s.span,
                "to add it once per block, write it under `if T.get_thread_binding() == 0:`, or "
                "inside `for i in T.Parallel(1):`")
            if s.span is not None:  # reported at the user's line, not at tegula's
                warnings.warn_explicit(msg, SemanticsWarning, s.span.file, s.span.line)
            else:
                warnings.warn(msg, SemanticsWarning, stacklevel=2)
