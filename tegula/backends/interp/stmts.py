"""Statement rules of the interpreter: control flow, element stores and kernel launches.

Sequences, expression statements and lets are the rules shared with the emulator
(:mod:`tegula.backends.closure`).
"""
from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tegula.errors import KernelSyntaxError, ScopeError, UnsupportedError
from tegula.ir.visitor import post_order_visit
from tegula.ir.stmt import (AttrStmt, Break, BufferStore, Continue, For, IfThenElse, Kernel, SeqStmt,
                            Stmt, While)
from tegula.backends.closure import (JUMPS, MASK, StmtFn, is_move, iteration,
                                     compile_expr, compile_stmt, jump, np_scalar, poison,
                                     uniform_if, uniform_while)
from tegula.backends.interp.batch import BLOCKS, Plan, unbatched_global_store
from tegula.backends.interp.context import Ctx, ParVar, dim_value, stmt_rule
from tegula.backends.interp.context import out_of_bounds
from tegula.backends.interp.exprs import moved_load

# Key of the env slot holding the current block index (for T.print).
BLOCK_INDEX = object()


def _scalar(e: Any, ctx: Ctx, what: str, node: Any) -> Any:
    ce = compile_expr(e, ctx)
    if ce.vec:
        raise UnsupportedError(f"{what} that varies over the lanes of a T.Parallel loop is not "
                               "supported", node.span)
    return ce.fn


def _par_depth(s: Any) -> int:
    """How deeply parallel loops nest inside ``s`` (counting ``s`` itself)."""
    if isinstance(s, For):
        return (s.kind == "parallel") + _par_depth(s.body)
    if isinstance(s, SeqStmt):
        return max((_par_depth(x) for x in s.stmts), default=0)
    if isinstance(s, IfThenElse):
        return max(_par_depth(s.then), _par_depth(s.else_) if s.else_ is not None else 0)
    if isinstance(s, (While, AttrStmt)):
        return _par_depth(s.body)
    return 0


@stmt_rule(For)
def _for(s: For, ctx: Ctx) -> StmtFn:
    if s.kind == "parallel":
        return _parallel_for(s, ctx)
    start_c = compile_expr(s.start, ctx)
    start = start_c.fn
    if start_c.vec:  # a loop that starts at a different value in each lane
        return _lane_extent_for(s, ctx, start, dim_value(s.extent, ctx) if isinstance(s.extent, int)
                                else compile_expr(s.extent, ctx).fn, vec_start=True)
    if not isinstance(s.extent, int):
        ext_c = compile_expr(s.extent, ctx)
        if ext_c.vec:
            return _lane_extent_for(s, ctx, start, ext_c.fn)
    extent = dim_value(s.extent, ctx) if isinstance(s.extent, int) else \
        _int_fn(_scalar(s.extent, ctx, "a loop extent", s))
    slot = ctx.slot(s.var)
    step = s.step
    npt = s.var.dtype.np
    inner = ctx.child(loop_ok=True, flags={})
    inner.vec_vars.discard(id(s.var))
    inner.par_vars.pop(id(s.var), None)
    body = compile_stmt(s.body, inner)
    if inner.flags:
        one = iteration(body)

        def loop_jumps(env: list) -> None:
            b = int(start(env))
            for v in np.arange(b, b + extent(env) * step, step, dtype=npt):
                env[slot] = v
                if not one(env):
                    break
        return loop_jumps

    def loop(env: list) -> None:
        b = int(start(env))
        for v in np.arange(b, b + extent(env) * step, step, dtype=npt):
            env[slot] = v
            body(env)
    return loop


def _lane_extent_for(s: For, ctx: Ctx, start: Any, extent: Any, vec_start: bool = False) -> StmtFn:
    """A serial loop inside a parallel body whose trip count (or start, ``vec_start``) differs
    per lane: run up to the largest count, with lanes past their own count masked off."""
    slot = ctx.slot(s.var)
    step = s.step
    npt = s.var.dtype.np
    inner = ctx.child(masked=True, loop_ok=False, flags={})
    if vec_start:
        inner.vec_vars.add(id(s.var))
    else:
        inner.vec_vars.discard(id(s.var))
    inner.par_vars.pop(id(s.var), None)
    body = compile_stmt(s.body, inner)

    def loop(env: list) -> None:
        ext = extent(env)
        old = env[MASK]
        n = int(np.max(ext)) if np.size(ext) else 0
        if vec_start:
            b = np.asarray(start(env))
            values: Any = (np.asarray(b + t * step).astype(npt) for t in range(n))
        else:
            b = int(start(env))
            values = np.arange(b, b + n * step, step, dtype=npt)
        for t, v in enumerate(values):
            live = ext > t
            env[MASK] = live if old is None else old & live
            env[slot] = v
            body(env)
        env[MASK] = old
    return loop


def _int_fn(f: Any) -> Any:
    return lambda env: int(f(env))


def _stored_vars(s: Stmt) -> list:
    """The ``local.var`` buffers that ``s`` stores into, in order of first store."""
    found: dict = {}

    def visit(n: Any) -> None:
        if isinstance(n, BufferStore) and n.buffer.scope == "local.var":
            found.setdefault(id(n.buffer), n.buffer)
    post_order_visit(s, visit)
    return list(found.values())


def _parallel_for(s: For, ctx: Ctx) -> StmtFn:
    top = not ctx.in_parallel
    private: list = []
    if top:
        # A scalar variable written inside the nest holds one value per lane there, as each
        # thread's register does on the GPU; the last lane's value is left when the nest ends.
        lanes_of = dict(ctx.lane_vars)
        for b in _stored_vars(s.body):
            key = ctx.buffers.setdefault(("lane", id(b)), object())  # kept alive: ids stay unique
            lanes_of[id(b)] = ctx.slot(key)
            private.append((ctx.slot(b), lanes_of[id(b)]))
        ctx = ctx.child(in_parallel=True, ndim=_par_depth(s), depth=0, loop_ok=False,
                        masked=False, flags={}, lane_vars=lanes_of)
    axis = ctx.depth
    shape = [1] * ctx.ndim
    start_c = compile_expr(s.start, ctx)
    if start_c.vec:
        raise UnsupportedError("a T.Parallel loop whose start varies over outer lanes", s.span)
    const_start = int(s.start.value) if hasattr(s.start, "value") else None
    const_ext = s.extent if isinstance(s.extent, int) else None
    step = s.step
    npt = s.var.dtype.np
    slot = ctx.slot(s.var)
    inner = ctx.child(depth=axis + 1)
    inner.par_vars[id(s.var)] = ParVar(axis, const_start, const_ext, step)
    inner.vec_vars.add(id(s.var))
    body = compile_stmt(s.body, inner)

    def lanes(b: int, n: int) -> np.ndarray:
        sh = list(shape)
        sh[axis] = n
        return (b + np.arange(n, dtype=np.int64) * step).astype(npt).reshape(sh)

    if const_start is not None and const_ext is not None:
        fixed = lanes(const_start, const_ext)

        def par_fixed(env: list) -> None:
            env[slot] = fixed
            body(env)
        run = par_fixed
    else:
        fs = start_c.fn
        fe = dim_value(s.extent, ctx) if isinstance(s.extent, int) else \
            _int_fn(_scalar(s.extent, ctx, "a T.Parallel extent", s))

        def par_dyn(env: list) -> None:
            env[slot] = lanes(int(fs(env)), max(0, fe(env)))
            body(env)
        run = par_dyn
    if not top:
        return run

    if not private:
        def par_top(env: list) -> None:
            env[MASK] = None
            run(env)
        return par_top

    def par_private(env: list) -> None:
        env[MASK] = None
        for buf_slot, lane_slot in private:
            env[lane_slot] = env[buf_slot][0]
        run(env)
        for buf_slot, lane_slot in private:
            env[buf_slot][0] = np.asarray(env[lane_slot]).flat[-1]
    return par_private


@stmt_rule(While)
def _while(s: While, ctx: Ctx) -> StmtFn:
    c = compile_expr(s.cond, ctx)
    if c.vec:
        return _lane_while(s, ctx, c.fn)
    return uniform_while(c.fn, compile_stmt(s.body, ctx.child(loop_ok=True, flags={})))


def _lane_while(s: While, ctx: Ctx, cond: Any) -> StmtFn:
    """A while loop inside a parallel body on a lane-varying condition: each lane leaves the
    loop when its condition first fails; the loop ends when no lane is left."""
    body = compile_stmt(s.body, ctx.child(masked=True, loop_ok=False, flags={}))

    def loop(env: list) -> None:
        old = env[MASK]
        live = old
        while True:
            c = cond(env)
            live = c if live is None else live & c
            if not np.any(live):
                break
            env[MASK] = live
            body(env)
        env[MASK] = old
    return loop


@stmt_rule(Break)
@stmt_rule(Continue)
def _jump(s: Stmt, ctx: Ctx) -> StmtFn:
    word = JUMPS[type(s)][0]
    if not ctx.loop_ok:
        if ctx.in_parallel:
            raise ScopeError(f"`{word}` cannot be used inside a T.Parallel body", s.span,
                             hint="lanes of a parallel loop run together; use a serial loop "
                             "or an `if` on the lane's condition")
        raise KernelSyntaxError(f"`{word}` outside a loop", s.span)
    ctx.flags[word] = True
    return jump(s)


@stmt_rule(IfThenElse)
def _if(s: IfThenElse, ctx: Ctx) -> StmtFn:
    c = compile_expr(s.cond, ctx)
    fc = c.fn
    if not c.vec:
        then = compile_stmt(s.then, ctx.child())
        else_ = compile_stmt(s.else_, ctx.child()) if s.else_ is not None else None
        return uniform_if(fc, then, else_)
    # a lane-varying condition: run both branches over all lanes, masking their stores
    then = compile_stmt(s.then, ctx.child(masked=True, loop_ok=False))
    else_m = compile_stmt(s.else_, ctx.child(masked=True, loop_ok=False)) \
        if s.else_ is not None else None

    def masked_if(env: list) -> None:
        cv = fc(env)
        old = env[MASK]
        env[MASK] = cv if old is None else old & cv
        then(env)
        if else_m is not None:
            env[MASK] = ~cv if old is None else old & ~cv
            else_m(env)
        env[MASK] = old
    return masked_if


@stmt_rule(BufferStore)
def _store(s: BufferStore, ctx: Ctx) -> StmtFn:
    # a move (``x[i] = f[j]``) carries a never-written element along; its use is what is reported
    val = moved_load(s.value, ctx) if is_move(s.value) else compile_expr(s.value, ctx)
    lane_slot = ctx.lane_vars.get(id(s.buffer))
    if lane_slot is not None:
        return _lane_var_store(lane_slot, val.fn)
    idx = [compile_expr(i, ctx) for i in s.indices]
    if ctx.in_parallel and (val.vec or any(i.vec for i in idx) or ctx.masked):
        from tegula.backends.interp.parallel import vector_store

        return vector_store(s, ctx, idx, val)
    if ctx.batch is not None and s.buffer.is_global:
        raise unbatched_global_store(s)
    bs = ctx.slot(s.buffer)
    fns = [i.fn for i in idx]
    fv = val.fn
    buf = s.buffer
    if len(fns) == 1:
        f0 = fns[0]

        def store1(env: list) -> None:
            a, i = env[bs], f0(env)
            if not 0 <= i < a.shape[0]:
                raise out_of_bounds(s, buf, (i,), a.shape)
            a[i] = fv(env)
        return store1

    def store(env: list) -> None:
        a = env[bs]
        ix = tuple(f(env) for f in fns)
        for i, n in zip(ix, a.shape):
            if not 0 <= i < n:
                raise out_of_bounds(s, buf, ix, a.shape)
        a[ix] = fv(env)
    return store


def _lane_var_store(slot: int, fv: Any) -> StmtFn:
    """A store into a scalar variable that holds one value per lane: masked lanes keep theirs."""
    def store(env: list) -> None:
        v, mask = fv(env), env[MASK]
        env[slot] = np.array(v) if mask is None else np.where(mask, v, env[slot]).astype(v.dtype)
    return store


@stmt_rule(Kernel)
def _kernel(s: Kernel, ctx: Ctx) -> StmtFn:
    grid = [dim_value(g, ctx) for g in s.grid]
    bslots = [ctx.slot(v) for v in s.block_vars]
    btypes = [v.dtype.np.type for v in s.block_vars]
    block_slot = ctx.slot(BLOCK_INDEX)
    inits = {id(k): v for k, v in s.alloc_inits.items()}
    allocs = []
    for b in s.allocs:
        shape = [dim_value(d, ctx) for d in b.shape]
        init = inits.get(id(b))
        if b.is_var:
            if init is None:
                fill: Any = (lambda v: lambda env: v)(np_scalar(b.dtype, 0))
            elif hasattr(init, "dtype") and hasattr(init, "span"):
                fill = compile_expr(init, ctx).fn
            else:
                fill = (lambda v: lambda env: v)(np_scalar(b.dtype, init))
        else:
            fill = (lambda v: lambda env: v)(poison(b.dtype))
        allocs.append((ctx.slot(b), shape, b.dtype.np, fill))
    body = compile_stmt(s.body, ctx.child(in_parallel=False, loop_ok=False, masked=False,
                                          flags={}, threads=s.num_threads))

    plan = Plan.of(s, ctx, allocs)

    def run_block(env: list, bidx: tuple) -> None:
        for slot, t, v in zip(bslots, btypes, bidx):
            env[slot] = t(v)
        env[block_slot] = bidx
        for slot, shape, npd, fill in allocs:
            a = np.empty([f(env) for f in shape], npd)
            a.fill(fill(env))
            env[slot] = a
        body(env)

    def launch(env: list) -> None:
        env[MASK] = None
        dims = [g(env) for g in grid]
        if plan is not None:
            plan.launch(env, dims, run_block)
            return
        BLOCKS["single"] += int(np.prod(dims))
        for bidx in itertools.product(*(range(d) for d in dims)):
            run_block(env, bidx)
    return launch
