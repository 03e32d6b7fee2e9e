"""Software-pipeline ``T.Pipelined(n, num_stages=S)`` loops: their global -> shared copies run
``S - 1`` iterations ahead with ``cp.async``, into ``S`` copies of each shared tile.

A copy qualifies (a *producer*) when it sits at the top level of the loop body, reads global
memory at indices that depend only on the loop variable and values fixed before the loop, and
writes a shared tile that nothing else in the loop writes and nothing after the loop reads.
Everything else in the body is the *consumer* part and reads stage ``k % S``.

Before/after (S = 3, one producer)::

    for k in T.Pipelined(n, num_stages=3):       A_s = T.alloc_shared((3, 128, 32), "float16")
        T.copy(A[by * 128, k * 32], A_s)         for s in (0, 1):                        # prologue
        T.gemm(A_s, B_s, C)                          if s < n: T.copy(A[.., s * 32], A_s[s])  # async
                                                     T.cp_async_commit()
                                                 for k in T.serial(n):
                                                     T.cp_async_wait(1)
                                                     T.sync_threads()
                                                     if k + 2 < n: T.copy(A[.., (k + 2) * 32], A_s[(k + 2) % 3])
                                                     T.cp_async_commit()
                                                     T.gemm(A_s[k % 3], B_s, C)

The issue statements are wrapped in ``AttrStmt("pipeline_issue", ...)``: barrier insertion
leaves them to the barriers placed here.
"""
from __future__ import annotations

from typing import Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.expr import Builtin
from tegula.ir.stmt import (AttrStmt, Copy, Evaluate, For, IfThenElse, PrimFunc, Stmt, seq)
from tegula.ir.visitor import substitute
from tegula.backends.cuda.analysis.pipelined_loop import Restage, pipeline_parts, rewrite_pipelined_loops, staged_tiles



def _builtin(name: str, template: tuple = ()) -> Stmt:
    attrs = (("template", template),) if template else ()
    return Evaluate(Builtin(name, (), dt.bool_, attrs))


def _pipeline_loop(loop: For, others: list[Stmt], new_allocs: dict) -> Optional[Stmt]:
    parts = pipeline_parts(loop, others)
    if parts is None:
        return None
    S, producers, consumers = parts.stages, parts.producers, parts.consumers
    mb = staged_tiles(producers, S, new_allocs)
    k, n, start = loop.var, loop.extent, loop.start

    def issue(it: E.Expr) -> Stmt:
        """The producer copies of iteration ``it`` (0-based), into stage it % S."""
        kval = start + it
        stage = it % S
        out = []
        for p in producers:
            src = substitute(p.src, {k: kval})
            dst = Restage(mb, stage).visit(p.dst)
            out.append(Copy(src, dst, {**p.annotations, "async": True}, span=p.span))
        return seq(*out)

    commit = _builtin("tl::cp_async_commit")
    prologue = []
    for s in range(S - 1):
        guard = E.compare("lt", E.const(s), n)
        st = issue(E.const(s))
        prologue.append(AttrStmt("pipeline_issue", S, st if isinstance(guard, E.Const) and guard.value
                                 else IfThenElse(guard, st), span=loop.span))
        prologue.append(commit)
    it = k - start
    ahead = it + (S - 1)
    nxt = AttrStmt("pipeline_issue", S, IfThenElse(E.compare("lt", ahead, n), issue(ahead)), span=loop.span)
    cons = Restage(mb, it % S).visit(seq(*consumers))
    sync = _builtin("sync_threads")
    # one barrier per iteration: after it, stage k has landed for every thread and every thread
    # is done with stage (k - 1) % S, which the copies issued next overwrite
    new_body = seq(_builtin("tl::cp_async_wait", (S - 2,)), sync, nxt, commit, cons)
    return seq(*prologue, For(k, start, n, new_body, "serial", 1,
                              {a: v for a, v in loop.annotations.items() if a not in ("num_stages",)},
                              span=loop.span))


def pipeline_copies(func: PrimFunc) -> PrimFunc:
    """Apply software pipelining to every qualifying ``T.Pipelined`` loop."""
    return rewrite_pipelined_loops(func, _pipeline_loop)