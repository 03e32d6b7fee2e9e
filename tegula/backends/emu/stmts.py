"""Statement rules of the emulator: control flow with lane masks, stores, attributes.

A condition that is the same for every thread (it does not depend on the thread index or on
registers) is an ordinary branch. One that differs per thread runs both branches, each under the
mask of the threads that take it (a branch no thread takes is skipped). A loop whose trip count
or condition differs per thread runs until no thread is left in it. Sequences, expression
statements and lets are the rules shared with the interpreter (:mod:`tegula.backends.closure`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.stmt import AttrStmt, Break, BufferStore, Continue, For, IfThenElse, SeqStmt, While
from tegula.backends.closure import (JUMPS, MASK, StmtFn, iteration,
                                     compile_expr, compile_stmt, jump, uniform_if, uniform_while)
from tegula.backends.emu.context import Ctx, and_mask, stmt_rule
from tegula.backends.emu.batch import (batchable_copy, batchable_loop, compile_batched_copy,
                                      compile_batched_loop, mma_runs)
from tegula.backends.emu.memory_ops import compile_store


@stmt_rule(AttrStmt)
def _attr(s: AttrStmt, ctx: Ctx) -> StmtFn:
    if s.key == "tile_op":
        what = str(s.value).split("(")[0].strip() or "tile op"
        return compile_stmt(s.body, ctx.child(span=s.span or ctx.span, tile_op=what))
    return compile_stmt(s.body, ctx)


@stmt_rule(SeqStmt)
def _seq(s: SeqStmt, ctx: Ctx) -> StmtFn:
    """Statements in order; runs of mma.sync on constant registers as one batched product and
    runs of ldmatrix as one gather (:mod:`.batch`)."""
    from tegula.backends.emu.warp import _MMA, compile_ldmatrix_run, compile_mma_run

    fns = []
    for i, j in mma_runs(s.stmts, ctx, _MMA):  # in order: lets mark later uses
        if j - i > 1:
            run = compile_mma_run if isinstance(s.stmts[i].value, E.Builtin) and \
                s.stmts[i].value.name in _MMA else compile_ldmatrix_run
            fns.append(run(s.stmts[i:j], ctx))
        else:
            fns.append(compile_stmt(s.stmts[i], ctx))
    if len(fns) == 1:
        return fns[0]

    def run(env: list) -> None:
        for f in fns:
            f(env)
    return run


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
        if batchable_loop(s, ctx):
            return compile_batched_loop(s, ctx, loop)
        if batchable_copy(s, ctx):
            return compile_batched_copy(s, ctx, loop)
        return loop

    one = iteration(body)
    n = ctx.nthreads

    def loop_jumps(env: list) -> None:
        b = int(fs(env))
        outer = env[MASK]
        rec = _LaneJumps(n)
        _LOOPS.append(rec)
        try:
            for i in range(int(fe(env))):
                alive = rec.alive(outer)
                if alive is not None and not alive.any():
                    break
                env[MASK] = alive
                rec.skipped[:] = False
                env[slot] = vt(b + i * step)
                if not one(env):
                    break
        finally:
            _LOOPS.pop()
            env[MASK] = outer
    return loop_jumps


class _LaneJumps:
    """The lanes of a serial loop that left it (``break``) or this iteration (``continue``) under
    a condition that differs between threads."""

    def __init__(self, n: int):
        self.n = n
        self.exited = np.zeros(n, bool)
        self.skipped = np.zeros(n, bool)

    def alive(self, outer: Any) -> Any:
        if not self.exited.any():
            return outer
        return and_mask(outer, ~self.exited, self.n)


_LOOPS: list = []  # the serial loops with jumps being run, innermost last


def _lane_jump(s: IfThenElse, fc: Any, ctx: Ctx) -> StmtFn:
    """``if c: break`` / ``if c: continue`` at the top level of a serial loop's body, where ``c``
    differs between threads: the lanes where it holds leave the loop (or this iteration); the
    others go on, as each thread of a GPU does."""
    is_break = isinstance(s.then, Break)
    n = ctx.nthreads

    def run(env: list) -> None:
        m = env[MASK]
        c = np.broadcast_to(np.asarray(fc(env), bool), (n,))
        hit = and_mask(m, c, n)
        if hit is not None and not hit.any():
            return
        rec = _LOOPS[-1]
        (rec.exited if is_break else rec.skipped)[hit if hit is not None else slice(None)] = True
        rest = and_mask(m, ~c, n)
        if rest is not None and not rest.any():
            raise JUMPS[type(s.then)][1]()  # no lane goes on in this iteration
        env[MASK] = rest
    return run


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
    return uniform_while(fc, compile_stmt(s.body, ctx.child(loop_ok=True)))


@stmt_rule(Break)
@stmt_rule(Continue)
def _jump(s: Any, ctx: Ctx) -> StmtFn:
    if not ctx.loop_ok:
        raise UnsupportedError(f"'{JUMPS[type(s)][0]}' inside a loop whose threads diverge is not "
                               "supported by the emulator", s.span)
    return jump(s)


@stmt_rule(IfThenElse)
def _if(s: IfThenElse, ctx: Ctx) -> StmtFn:
    cond = compile_expr(s.cond, ctx)
    fc = cond.fn
    if not cond.vec:
        then = compile_stmt(s.then, ctx)
        return uniform_if(fc, then, compile_stmt(s.else_, ctx) if s.else_ is not None else None)
    if ctx.loop_ok and s.else_ is None and isinstance(s.then, (Break, Continue)):
        return _lane_jump(s, fc, ctx)
    # a jump under a per-thread condition would need per-thread loop exits
    inner = ctx.child(loop_ok=False)
    then = compile_stmt(s.then, inner)
    else_ = compile_stmt(s.else_, inner) if s.else_ is not None else None
    n = ctx.nthreads
    if _waits(s.then) or (s.else_ is not None and _waits(s.else_)):
        return _forking_if(fc, then, else_, n, _per_warpgroup(s.then), s.else_ is not None and _per_warpgroup(s.else_))

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


_BLOCKING = ("tl::mbarrier_wait", "tl::mbarrier_try_wait", "tl::named_barrier_sync")


def _waits(s: Any) -> bool:
    """The statement waits on a barrier somewhere (so its threads may wait for other threads)."""
    from tegula.ir.visitor import post_order_visit

    found = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, E.Builtin) and n.name in _BLOCKING else None)
    return bool(found)


def _per_warpgroup(s: Any) -> bool:
    """The statement's warpgroups wait for each other: it arrives at a named barrier without waiting
    (``bar.arrive``) or names a barrier that differs per thread (ping-pong of consumer warpgroups),
    so each warpgroup runs as a task of its own."""
    from tegula.ir.visitor import post_order_visit

    found = []

    def visit(x: Any) -> None:
        if isinstance(x, E.Builtin) and (x.name == "tl::named_barrier_arrive" or (
                x.name == "tl::named_barrier_sync" and not isinstance(x.args[0], E.Const))):
            found.append(x)
    post_order_visit(s, visit)
    return bool(found)


def _warpgroup_masks(mask: Any, n: int) -> list:
    """``mask`` (None: every thread) split by warpgroup, one mask per warpgroup it holds."""
    from tegula.backends.emu.context import lanes_of

    lanes = lanes_of(mask, n)
    out = []
    for g in np.unique(lanes // 128):
        m = np.zeros(n, bool)
        m[lanes[lanes // 128 == g]] = True
        out.append(m)
    return out


def _forking_if(fc: Any, then: StmtFn, else_: Any, n: int, split_then: bool = False,
                split_else: bool = False) -> StmtFn:
    """A per-thread branch whose sides wait on barriers: when threads take both sides, the sides
    run as tasks of the block's scheduler (:mod:`.tasks`), taking turns at their waits. A side whose
    warpgroups wait for each other (:func:`_per_warpgroup`) runs as one task per warpgroup, also
    when no thread takes the other side."""
    from tegula.backends.emu.context import STATE, lanes_of
    from tegula.backends.emu.context import lanes_text
    from tegula.backends.emu.tasks import Scheduler

    def forking_if(env: list) -> None:
        c = fc(env)
        m = env[MASK]
        mt = and_mask(m, c, n)
        mf = and_mask(m, np.logical_not(c), n) if else_ is not None else None
        has_t = mt is None or mt.any()
        has_f = else_ is not None and (mf is None or mf.any())
        if (has_t and has_f) or (has_t and split_then) or (has_f and split_else):
            st = env[STATE]
            if st.scheduler is None:
                st.scheduler = Scheduler()
            sides = []
            for mask, body, has, split in ((mt, then, has_t, split_then), (mf, else_, has_f, split_else)):
                if not has:
                    continue
                for m2 in (_warpgroup_masks(mask, n) if split else [mask]):
                    e2 = list(env)
                    e2[MASK] = m2
                    sides.append((lanes_text(lanes_of(m2, n)), body, e2))
            if len(sides) > 1:
                st.scheduler.fork(sides)
                return
        try:
            if has_t:
                env[MASK] = mt
                then(env)
            elif has_f:
                env[MASK] = mf
                else_(env)
        finally:
            env[MASK] = m
    return forking_if
