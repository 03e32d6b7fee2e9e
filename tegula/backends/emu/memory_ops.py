"""Element loads and stores (``buf[i]`` and ``buf[i] = v``) in every scope."""
from __future__ import annotations

from typing import Any

import numpy as np

from tegula.ir import expr as E
from tegula.ir.stmt import BufferStore
from tegula.backends.closure import (MASK, CExpr, StmtFn, checks_unwritten, compile_expr, is_move, unwritten,
                                     unwritten_read)
from tegula.backends.emu.context import STATE, Ctx, expr_rule, lanes_of
from tegula.backends.emu.exprs import compile_element
from tegula.backends.emu.hopper import check_registers
from tegula.backends.emu.memory import check_tma_sources


def _bcast(v: Any, n: int) -> np.ndarray:
    a = np.asarray(v)
    return a if a.shape == (n,) else np.broadcast_to(a, (n,))


@expr_rule(E.BufferLoad)
def compile_load(e: E.BufferLoad, ctx: Ctx, checked: bool = True) -> CExpr:
    """An element load; ``checked=False`` for the load of a move (never-written registers go along)."""
    info = ctx.buf(e.buffer, e)
    s = info.slot
    n = ctx.nthreads
    if info.scope == "local.var":
        return CExpr(lambda env: env[s].copy(), True)
    elem, vec = compile_element(e, ctx)
    if info.scope == "local":
        if id(info.buffer) in ctx.info.get("wgmma_regs", ()):
            return _checked_load(info, elem, ctx, e.span or ctx.span)
        if checked and checks_unwritten(info.buffer):
            return _unwritten_checked_load(info, elem, vec, ctx, e.span or ctx.span)
        if not vec:
            return CExpr(lambda env: env[s][elem(env)[0]].copy(), True)
        ar = np.arange(n)
        return CExpr(lambda env: env[s][elem(env)[0], ar], True)
    if info.scope == "global":
        return CExpr(lambda env: env[s][elem(env)[0]], vec)
    # shared: every active thread's read is recorded
    site = ctx.site(info, "load", e.span or ctx.span)
    off, isz = info.offset, info.itemsize

    def load_shared(env: list) -> Any:
        f, m = elem(env)
        st = env[STATE]
        lanes = lanes_of(m, n)
        if len(lanes):
            fl = _bcast(f, n)[lanes] if vec else np.full(len(lanes), f, np.int64)
            st.tracker.read(st.tracker.units(off + fl * isz, isz), lanes, site, info)
        return env[s][f]
    return CExpr(load_shared, vec)


def _unwritten_checked_load(info: Any, elem: Any, vec: bool, ctx: Ctx, span: Any) -> CExpr:
    """A load of registers that reports the active threads' reads of elements never written."""
    s, n = info.slot, ctx.nthreads
    ar = np.arange(n)

    def load(env: list) -> Any:
        f, m = elem(env)
        v = env[s][f, ar] if vec else env[s][f].copy()
        if unwritten(v) is not None:
            lanes = lanes_of(m, n)
            unwritten_read(info.buffer, np.broadcast_to(v, (n,))[lanes], span, "a read", tile=False)
        return v
    return CExpr(load, True)


def _checked_load(info: Any, elem: Any, ctx: Ctx, span: Any) -> CExpr:
    """A load of registers that wgmma writes: checked against the wgmma in flight."""
    s, n = info.slot, ctx.nthreads
    ar = np.arange(n)

    def load(env: list) -> Any:
        f, m = elem(env)
        check_registers(env[STATE], info, f, lanes_of(m, n), False, span)
        return env[s][_bcast(f, n), ar]
    return CExpr(load, True)


def compile_store(st_: BufferStore, ctx: Ctx) -> StmtFn:
    info = ctx.buf(st_.buffer, st_)
    s = info.slot
    n = ctx.nthreads
    value = E.as_expr(st_.value, like=st_.buffer.dtype)
    v = compile_load(value, ctx, checked=False) if is_move(value) else compile_expr(value, ctx)
    fv = v.fn
    npd = info.np
    if value.dtype != st_.buffer.dtype:
        fv0 = fv
        fv = lambda env: np.asarray(fv0(env)).astype(npd)  # noqa: E731
    if info.scope == "local.var":
        def store_var(env: list) -> None:
            m = env[MASK]
            if m is None:
                env[s][...] = fv(env)
            else:
                np.copyto(env[s], fv(env), where=m, casting="unsafe")
        return store_var
    elem, vec = compile_element(E.BufferLoad(st_.buffer, st_.indices, span=st_.span), ctx)
    if info.scope == "local" and id(info.buffer) in ctx.info.get("wgmma_regs", ()):
        span = st_.span or ctx.span

        def store_regs(env: list) -> None:
            val = fv(env)
            f, m = elem(env)
            lanes = lanes_of(m, n)
            check_registers(env[STATE], info, f, lanes, True, span)
            env[s][_bcast(f, n)[lanes], lanes] = _bcast(val, n)[lanes]
        return store_regs
    if info.scope == "local":
        if not vec:
            def store_local(env: list) -> None:
                val = fv(env)
                f, m = elem(env)
                if m is None:
                    env[s][f] = val
                else:
                    np.copyto(env[s][f], val, where=m, casting="unsafe")
            return store_local

        def store_local_vec(env: list) -> None:
            val = fv(env)
            f, m = elem(env)
            lanes = lanes_of(m, n)
            env[s][_bcast(f, n)[lanes], lanes] = _bcast(val, n)[lanes]
        return store_local_vec
    site = ctx.site(info, "store", st_.span or ctx.span) if info.scope == "shared" else -1
    off, isz = info.offset, info.itemsize
    span = st_.span or ctx.span

    def store(env: list) -> None:
        val = fv(env)
        f, m = elem(env)
        lanes = lanes_of(m, n)
        if not len(lanes):
            return
        fl = _bcast(f, n)[lanes]
        st = env[STATE]
        if site >= 0:
            st.tracker.write(st.tracker.units(off + fl.astype(np.int64) * isz, isz), lanes, site, info)
        elif st.mbarriers:
            check_tma_sources(st, info, env[s], fl, lanes, span)
        env[s][fl] = _bcast(val, n)[lanes]
    return store
