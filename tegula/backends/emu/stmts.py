"""Statement rules: control flow with lane masks, stores, lets, attributes.

A condition that is the same for every thread (it does not depend on the thread index or on
registers) is an ordinary branch. One that differs per thread runs both branches, each under the
mask of the threads that take it (a branch no thread takes is skipped). A loop whose trip count
or condition differs per thread runs until no thread is left in it.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.stmt import (AttrStmt, Break, BufferStore, Continue, Evaluate, For, IfThenElse,
                            LetStmt, SeqStmt, While)
from tegula.backends.emu.context import (MASK, BreakSignal, ContinueSignal, Ctx, StmtFn, and_mask,
                                         compile_expr, compile_stmt, stmt_rule)
from tegula.backends.emu.memory_ops import compile_store


def _nop(env: list) -> None:
    return None


@stmt_rule(SeqStmt)
def _seq(s: SeqStmt, ctx: Ctx) -> StmtFn:
    fns = tuple(compile_stmt(x, ctx) for x in s.stmts)
    if not fns:
        return _nop
    if len(fns) == 1:
        return fns[0]

    def run(env: list) -> None:
        for f in fns:
            f(env)
    return run


@stmt_rule(Evaluate)
def _evaluate(s: Evaluate, ctx: Ctx) -> StmtFn:
    f = compile_expr(s.value, ctx).fn

    def run(env: list) -> None:
        f(env)
    return run


@stmt_rule(LetStmt)
def _let(s: LetStmt, ctx: Ctx) -> StmtFn:
    v = compile_expr(s.value, ctx)
    slot = ctx.slot(s.var)
    f = v.fn
    if v.vec:
        ctx.vec_vars.add(id(s.var))

        def let_vec(env: list) -> None:
            x = f(env)
            env[slot] = x.copy() if isinstance(x, np.ndarray) else x
        return let_vec
    ctx.vec_vars.discard(id(s.var))

    def let(env: list) -> None:
        env[slot] = f(env)
    return let


@stmt_rule(AttrStmt)
def _attr(s: AttrStmt, ctx: Ctx) -> StmtFn:
    if s.key == "tile_op":
        what = str(s.value).split("(")[0].strip() or "tile op"
        return compile_stmt(s.body, ctx.child(span=s.span or ctx.span, tile_op=what))
    return compile_stmt(s.body, ctx)


@stmt_rule(BufferStore)
def _store(s: BufferStore, ctx: Ctx) -> StmtFn:
    return compile_store(s, ctx)


def _has_jumps(s: Any) -> bool:
    from tegula.ir.visitor import post_order_visit

    found = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, (Break, Continue)) else None)
    return bool(found)


@stmt_rule(For)
def _for(s: For, ctx: Ctx) -> StmtFn:
    if s.kind not in ("serial", "unroll", "vectorized"):
        raise UnsupportedError(f"a '{s.kind}' loop reached the emulator: the CUDA pipeline must lower "
                               "it to serial or unrolled loops", s.span)
    start = compile_expr(E.as_expr(s.start), ctx)
    extent = compile_expr(E.as_expr(s.extent), ctx)
    slot = ctx.slot(s.var)
    step = int(s.step)
    vt = s.var.dtype.np.type
    if start.vec or extent.vec:
        return _lane_for(s, ctx, start, extent, slot, step)
    ctx = ctx.child(loop_ok=True)
    ctx.vec_vars.discard(id(s.var))
    body = compile_stmt(s.body, ctx)
    fs, fe = start.fn, extent.fn
    jumps = _has_jumps(s.body)

    if not jumps:
        def loop(env: list) -> None:
            b = int(fs(env))
            for i in range(int(fe(env))):
                env[slot] = vt(b + i * step)
                body(env)
        return loop

    def loop_jumps(env: list) -> None:
        b = int(fs(env))
        for i in range(int(fe(env))):
            env[slot] = vt(b + i * step)
            try:
                body(env)
            except ContinueSignal:
                continue
            except BreakSignal:
                break
    return loop_jumps


def _lane_for(s: For, ctx: Ctx, start: Any, extent: Any, slot: int, step: int) -> StmtFn:
    ctx = ctx.child(loop_ok=False)
    ctx.vec_vars.add(id(s.var))
    body = compile_stmt(s.body, ctx)
    fs, fe = start.fn, extent.fn
    n = ctx.nthreads
    npd = s.var.dtype.np

    def loop(env: list) -> None:
        outer = env[MASK]
        b = np.broadcast_to(np.asarray(fs(env)), (n,)).astype(np.int64)
        e = np.broadcast_to(np.asarray(fe(env)), (n,)).astype(np.int64)
        i = 0
        try:
            while True:
                m = and_mask(outer, i < e, n)
                if m is not None and not m.any():
                    break
                env[MASK] = m
                env[slot] = (b + i * step).astype(npd)
                body(env)
                i += 1
        finally:
            env[MASK] = outer
    return loop


@stmt_rule(While)
def _while(s: While, ctx: Ctx) -> StmtFn:
    cond = compile_expr(s.cond, ctx)
    fc = cond.fn
    n = ctx.nthreads
    if cond.vec:
        body = compile_stmt(s.body, ctx.child(loop_ok=False))

        def lane_loop(env: list) -> None:
            outer = env[MASK]
            m = outer
            try:
                while True:
                    m = and_mask(m, fc(env), n)
                    if m is not None and not m.any():
                        break
                    env[MASK] = m
                    body(env)
            finally:
                env[MASK] = outer
        return lane_loop
    body = compile_stmt(s.body, ctx.child(loop_ok=True))

    def loop(env: list) -> None:
        while fc(env):
            try:
                body(env)
            except ContinueSignal:
                continue
            except BreakSignal:
                break
    return loop


def _jump(s: Any, ctx: Ctx, word: str, sig: type) -> StmtFn:
    if not ctx.loop_ok:
        raise UnsupportedError(f"'{word}' inside a loop whose threads diverge is not supported by "
                               "the emulator", s.span)

    def jump(env: list) -> None:
        raise sig()
    return jump


@stmt_rule(Break)
def _break(s: Break, ctx: Ctx) -> StmtFn:
    return _jump(s, ctx, "break", BreakSignal)


@stmt_rule(Continue)
def _continue(s: Continue, ctx: Ctx) -> StmtFn:
    return _jump(s, ctx, "continue", ContinueSignal)


@stmt_rule(IfThenElse)
def _if(s: IfThenElse, ctx: Ctx) -> StmtFn:
    cond = compile_expr(s.cond, ctx)
    fc = cond.fn
    if not cond.vec:
        then = compile_stmt(s.then, ctx)
        if s.else_ is None:
            def if_(env: list) -> None:
                if fc(env):
                    then(env)
            return if_
        else_ = compile_stmt(s.else_, ctx)

        def if_else(env: list) -> None:
            if fc(env):
                then(env)
            else:
                else_(env)
        return if_else
    # a jump under a per-thread condition would need per-thread loop exits
    inner = ctx.child(loop_ok=False)
    then = compile_stmt(s.then, inner)
    else_ = compile_stmt(s.else_, inner) if s.else_ is not None else None
    n = ctx.nthreads

    def masked_if(env: list) -> None:
        c = fc(env)
        m = env[MASK]
        mt = and_mask(m, c, n)
        try:
            if mt is None or mt.any():
                env[MASK] = mt
                then(env)
            if else_ is not None:
                mf = and_mask(m, np.logical_not(c), n)
                if mf is None or mf.any():
                    env[MASK] = mf
                    else_(env)
        finally:
            env[MASK] = m
    return masked_if
