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
        _walk(k.body, False, v)
        if (len(v.vars), len(v.buffers)) == size:
            return v


def _walk(s: Stmt, divergent: bool, v: Variance) -> None:
    if isinstance(s, SeqStmt):
        for x in s.stmts:
            _walk(x, divergent, v)
    elif isinstance(s, LetStmt):
        if v.varies(s.value):
            v.vars.add(id(s.var))
    elif isinstance(s, For):
        d = divergent or v.varies(s.start, s.extent)
        if v.varies(s.start):
            v.vars.add(id(s.var))
        _walk(s.body, d, v)
    elif isinstance(s, While):
        _walk(s.body, divergent or v.varies(s.cond), v)
    elif isinstance(s, IfThenElse):
        d = divergent or v.varies(s.cond)
        _walk(s.then, d, v)
        if s.else_ is not None:
            _walk(s.else_, d, v)
    elif isinstance(s, AttrStmt):
        _walk(s.body, divergent or s.key == WARP_SPECIALIZE, v)
    elif isinstance(s, TileOp):
        if divergent or v.varies(s):
            for f in ("dst", "C"):
                r = getattr(s, f, None)
                if isinstance(r, BufferRegion):
                    v._mark(r.buffer)
    elif isinstance(s, BufferStore):
        if divergent or v.varies(s.value, *s.indices):
            v._mark(s.buffer)


def _block_adds(s: Stmt, divergent: bool, v: Variance, threads: int) -> Iterator[tuple]:
    """The element-form ``T.atomic_add`` statements of block-level code that every one of more
    than one thread makes with the same index and value, each with that number of threads."""
    if isinstance(s, SeqStmt):
        for x in s.stmts:
            yield from _block_adds(x, divergent, v, threads)
    elif isinstance(s, For):
        if s.kind != "parallel":
            yield from _block_adds(s.body, divergent or v.varies(s.start, s.extent), v, threads)
    elif isinstance(s, While):
        yield from _block_adds(s.body, divergent or v.varies(s.cond), v, threads)
    elif isinstance(s, IfThenElse):
        d = divergent or v.varies(s.cond)
        yield from _block_adds(s.then, d, v, threads)
        if s.else_ is not None:
            yield from _block_adds(s.else_, d, v, threads)
    elif isinstance(s, AttrStmt):
        if s.key == WARP_SPECIALIZE:
            threads = s.value[1]
        yield from _block_adds(s.body, divergent, v, threads)
    elif isinstance(s, Atomic) and s.kind == "add" and isinstance(s.value, Expr) and threads > 1:
        if not divergent and not v.varies(s):
            yield s, threads


def warn_uniform_adds(func: PrimFunc) -> None:
    """Warn (:class:`~tegula.errors.SemanticsWarning`, at the user's line) for each element
    ``T.atomic_add`` outside ``T.Parallel`` that every thread of a block makes with one value."""
    kernels = func.body.stmts if isinstance(func.body, SeqStmt) else (func.body,)
    for k in kernels:
        if not isinstance(k, Kernel):
            continue
        var = thread_variance(k, k.thread_var)
        for s, threads in _block_adds(k.body, False, var, k.num_threads):
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
