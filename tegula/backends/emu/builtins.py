"""Builtins of thread-level IR: thread index, barriers, shuffles, vector copies, cp.async,
atomics and printf. Warp-wide matrix builtins (ldmatrix, mma) live in :mod:`.warp`.

Every builtin runs for the active threads only. Vector copies move bytes (so the two sides may
have different dtypes); cp.async reads its source when issued and lands at the
``cp_async_wait`` that completes its commit group, group by group, per thread.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from tegula.errors import RaceError, UnsupportedError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, CExpr, bitcast, compile_expr, device_assert, extern_code_error
from tegula.backends.emu.context import STATE, BufInfo, Ctx, builtin_rule, lanes_of
from tegula.backends.emu.exprs import compile_element
from tegula.backends.emu.memory import (Addr, AsyncCopy, byte_offset, check_align, check_tma_sources,
                                        read_elems, write_elems)


def template(e: E.Builtin) -> tuple:
    t = e.attr("template")
    if t is None:
        return ()
    return tuple(t) if isinstance(t, (tuple, list)) else (t,)


def compile_addr(arg: Any, ctx: Ctx, what: str) -> tuple[Callable, BufInfo]:
    """``fn(env) -> Addr`` for an ``address_of(buf[...])`` argument."""
    if not (isinstance(arg, E.Builtin) and arg.name == "address_of" and arg.args
            and isinstance(arg.args[0], E.BufferLoad)):
        raise UnsupportedError(f"{what}: expected an address_of(buffer element) argument, got {arg}",
                               getattr(arg, "span", None) or ctx.span)
    load = arg.args[0]
    info = ctx.buf(load.buffer, load)
    elem, _vec = compile_element(load, ctx)
    return (lambda env: Addr(info, elem(env)[0])), info


@builtin_rule("address_of")
def _address_of(e: E.Builtin, ctx: Ctx) -> CExpr:
    f, _ = compile_addr(e, ctx, "address_of")
    return CExpr(f, True)


@builtin_rule("thread_idx")
def _thread_idx(e: E.Builtin, ctx: Ctx) -> CExpr:
    ids = np.arange(ctx.nthreads, dtype=e.ret.np)
    return CExpr(lambda env: ids, True)


def _true(env: list) -> Any:
    return np.True_


def _divergence(env: list, n: int, span: Any, what: str) -> None:
    m = env[MASK]
    if m is None or m.all():
        return
    st = env[STATE]
    off = np.flatnonzero(~m)
    on = np.flatnonzero(m)
    st.rep.report(RaceError(f"{what} not reached by all threads: {len(on)} of {n} threads execute it, "
                            f"thread {int(off[0])} does not while thread {int(on[0])} does "
                            f"({st.rep.block})", span,
                            hint="barriers must be reached by every thread of the block (move it out "
                                 "of the branch or loop whose condition differs per thread)"),
                  ("barrier", id(span)))


@builtin_rule("sync_threads")
def _sync_threads(e: E.Builtin, ctx: Ctx) -> CExpr:
    n, span = ctx.nthreads, e.span or ctx.span

    def sync(env: list) -> Any:
        st = env[STATE]
        sched = st.scheduler
        if sched is not None and sched.current is not (st.task or sched.root):  # inside a warp-specialized branch
            from tegula.backends.emu.named_barriers import arrive
            arrive(st, 0, n, lanes_of(env[MASK], n), span, True)
            return np.True_
        _divergence(env, n, span, "__syncthreads()")
        st.tracker.barrier()
        return np.True_
    return CExpr(sync, False)


def warp_lanes(env: list, n: int, span: Any, what: str) -> np.ndarray:
    """Lanes of the warps that execute a warp-wide ``.sync.aligned`` operation (whole warps)."""
    m = env[MASK]
    if m is None:
        return np.arange(n)
    nw = -(-n // 32)
    pad = np.zeros(nw * 32, bool)
    pad[:n] = m
    w = pad.reshape(nw, 32)
    full = w.all(1)
    some = w.any(1)
    if (some & ~full).any():
        k = int(np.flatnonzero(some & ~full)[0])
        st = env[STATE]
        st.rep.report(RaceError(f"{what} executed by part of warp {k} only (threads "
                                f"{np.flatnonzero(w[k]) + 32 * k} of it): it needs the whole warp "
                                f"({st.rep.block})", span), ("warp", id(span)))
    lanes = (np.flatnonzero(full)[:, None] * 32 + np.arange(32)).ravel()
    return lanes[lanes < n]


@builtin_rule("sync_warp")
def _sync_warp(e: E.Builtin, ctx: Ctx) -> CExpr:
    n, span = ctx.nthreads, e.span or ctx.span

    def sync(env: list) -> Any:
        warp_lanes(env, n, span, "__syncwarp()")
        return np.True_
    return CExpr(sync, False)


@builtin_rule("device_assert")
def _device_assert(e: E.Builtin, ctx: Ctx) -> CExpr:
    return device_assert(e, ctx)


@builtin_rule("bitcast")
def _bitcast(e: E.Builtin, ctx: Ctx) -> CExpr:
    return bitcast(e, ctx)


@builtin_rule("call_extern")
def _call_extern(e: E.Builtin, ctx: Ctx) -> CExpr:
    raise extern_code_error(e, e.span or ctx.span)


@builtin_rule("shfl_xor")
def _shfl_xor(e: E.Builtin, ctx: Ctx) -> CExpr:
    v = compile_expr(e.args[0], ctx)
    fm = compile_expr(e.args[1], ctx).fn
    fw = compile_expr(e.args[2], ctx).fn if len(e.args) > 2 else (lambda env: 32)
    n, span = ctx.nthreads, e.span or ctx.span
    fv = v.fn
    cache: dict = {}

    def source(mask: int, width: int) -> np.ndarray:
        key = (mask, width)
        src = cache.get(key)
        if src is None:
            lane = np.arange(n) % 32
            base = np.arange(n) - lane
            other = lane ^ mask
            later = (other // width) > (lane // width)
            src = np.where(later | (other >= 32), lane, other) + base
            src = np.minimum(src, n - 1)
            src = cache[key] = src
        return src

    def shfl(env: list) -> Any:
        warp_lanes(env, n, span, "__shfl_xor_sync")
        x = fv(env)
        if not isinstance(x, np.ndarray) or x.ndim == 0:
            return x
        return x[source(int(fm(env)), int(fw(env)))]
    return CExpr(shfl, True)


def _lane_source(kind: str) -> Any:
    """For ``__shfl_sync`` (``idx``), ``__shfl_down_sync`` and ``__shfl_up_sync``: the lane each
    lane reads, from its lane, the argument and the segment width (a lane whose source leaves its
    segment of ``width`` lanes keeps its own value, as CUDA defines)."""
    def src(lane: np.ndarray, arg: int, width: int) -> np.ndarray:
        seg = lane - lane % width
        if kind == "shfl_idx":
            return seg + arg % width
        other = lane + arg if kind == "shfl_down" else lane - arg
        return np.where((other >= seg) & (other < seg + width), other, lane)
    return src


def _shfl_rule(kind: str, cuda_name: str) -> None:
    pick = _lane_source(kind)

    @builtin_rule(kind)
    def _shfl(e: E.Builtin, ctx: Ctx) -> CExpr:
        fv = compile_expr(e.args[0], ctx).fn
        fa = compile_expr(e.args[1], ctx).fn
        fw = compile_expr(e.args[2], ctx).fn
        n, span = ctx.nthreads, e.span or ctx.span

        def shfl(env: list) -> Any:
            warp_lanes(env, n, span, cuda_name)
            x = fv(env)
            if not isinstance(x, np.ndarray) or x.ndim == 0:
                return x
            lane = np.arange(n) % 32
            a = fa(env)
            a = a.astype(np.int64) if isinstance(a, np.ndarray) and a.ndim else int(a)
            src = np.minimum(pick(lane, a, int(fw(env))) + (np.arange(n) - lane), n - 1)
            return x[src]
        return CExpr(shfl, True)


for _kind, _cuda in (("shfl_idx", "__shfl_sync"), ("shfl_down", "__shfl_down_sync"), ("shfl_up", "__shfl_up_sync")):
    _shfl_rule(_kind, _cuda)


# ---------------------------------------------------------------------------------------------
# Copies
# ---------------------------------------------------------------------------------------------

@builtin_rule("tl::copy_vec")
def _copy_vec(e: E.Builtin, ctx: Ctx) -> CExpr:
    nbytes = int(template(e)[0])
    span = e.span or ctx.span
    fd, dinfo = compile_addr(e.args[0], ctx, "tl::copy_vec")
    fs, sinfo = compile_addr(e.args[1], ctx, "tl::copy_vec")
    dsite = ctx.site(dinfo, "copy", span)
    ssite = ctx.site(sinfo, "copy", span)
    n = ctx.nthreads
    d = dinfo.np

    def copy(env: list) -> Any:
        st = env[STATE]
        lanes = lanes_of(env[MASK], n)
        if not len(lanes):
            return np.True_
        src, dst = fs(env), fd(env)
        check_align(st, sinfo, byte_offset(st, src, lanes), lanes, nbytes, span, "vector load")
        check_align(st, dinfo, byte_offset(st, dst, lanes), lanes, nbytes, span, "vector store")
        vals, got = read_elems(env, st, src, lanes, nbytes, d, ssite, span, "vector load")
        write_elems(env, st, dst, got, vals, dsite, span, "vector store")
        return np.True_
    return CExpr(copy, False)


@builtin_rule("tl::cp_async_zfill", "tl::cp_async")
def _cp_async(e: E.Builtin, ctx: Ctx) -> CExpr:
    nbytes = int(template(e)[0])
    span = e.span or ctx.span
    fd, dinfo = compile_addr(e.args[0], ctx, "cp.async")
    fs, sinfo = compile_addr(e.args[1], ctx, "cp.async")
    if dinfo.scope != "shared":
        raise UnsupportedError(f"cp.async must write shared memory, not '{dinfo.name}'", span)
    fp = compile_expr(e.args[2], ctx).fn if len(e.args) > 2 else _true
    dsite = ctx.site(dinfo, "cp.async", span)
    ssite = ctx.site(sinfo, "cp.async", span)
    n = ctx.nthreads

    def issue(env: list) -> Any:
        st = env[STATE]
        m = env[MASK]
        lanes = lanes_of(m, n)
        if not len(lanes):
            return np.True_
        pred = np.broadcast_to(np.asarray(fp(env), dtype=bool), (n,))[lanes]
        dst = fd(env)
        data = np.zeros((len(lanes), nbytes), np.uint8)
        if pred.any():
            on = lanes[pred]
            sub = np.zeros(n, bool)
            sub[on] = True
            env[MASK] = sub
            try:
                src = fs(env)
            finally:
                env[MASK] = m
            check_align(st, sinfo, byte_offset(st, src, on), on, nbytes, span, "cp.async source")
            vals, got = read_elems(env, st, src, on, nbytes, np.dtype(np.uint8), ssite, span, "cp.async read")
            rows = np.flatnonzero(np.isin(lanes, got))
            data[rows] = vals
        f = np.broadcast_to(np.asarray(dst.flat, dtype=np.int64), (n,))[lanes]
        numel = env[dinfo.slot].shape[0]
        count = nbytes // dinfo.itemsize
        bad = (f < 0) | (f + count > numel)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            st.rep.oob(f"thread {int(lanes[j])}: cp.async of {count} element(s) at index {int(f[j])} is "
                       f"out of bounds of shared buffer '{dinfo.name}' with {numel} element(s)", span,
                       (dinfo.index, id(span)))
            lanes, f, data = lanes[~bad], f[~bad], data[~bad]
        pos = dinfo.offset + f * dinfo.itemsize
        check_align(st, dinfo, pos, lanes, nbytes, span, "cp.async destination")
        units = st.tracker.units(pos, nbytes)
        st.tracker.issue(units, lanes, dsite, dinfo)
        st.pending.append(AsyncCopy(lanes, st.committed[lanes].copy(), pos[:, None] + np.arange(nbytes),
                                    data, units, dsite, dinfo))
        return np.True_
    return CExpr(issue, False)


@builtin_rule("tl::cp_async_commit")
def _cp_commit(e: E.Builtin, ctx: Ctx) -> CExpr:
    n = ctx.nthreads

    def commit(env: list) -> Any:
        st = env[STATE]
        st.committed[lanes_of(env[MASK], n)] += 1
        return np.True_
    return CExpr(commit, False)


def land(st: Any, active: np.ndarray, keep_groups: int) -> None:
    """Land the copies of ``active`` threads whose group is older than their newest
    ``keep_groups`` committed groups."""
    left = []
    for rec in st.pending:
        done = active[rec.lanes] & (rec.group < st.committed[rec.lanes] - keep_groups)
        if done.any():
            st.pool[rec.pos[done]] = rec.data[done]
            st.tracker.land(rec.units[done], rec.lanes[done], rec.site, rec.buf)
            if not done.all():
                keep = ~done
                left.append(AsyncCopy(rec.lanes[keep], rec.group[keep], rec.pos[keep], rec.data[keep],
                                      rec.units[keep], rec.site, rec.buf))
        else:
            left.append(rec)
    st.pending = left


@builtin_rule("tl::cp_async_wait")
def _cp_wait(e: E.Builtin, ctx: Ctx) -> CExpr:
    keep = int(template(e)[0]) if template(e) else 0
    n = ctx.nthreads

    def wait(env: list) -> Any:
        st = env[STATE]
        if st.pending:
            m = env[MASK]
            land(st, np.ones(n, bool) if m is None else m, keep)
        return np.True_
    return CExpr(wait, False)


# ---------------------------------------------------------------------------------------------
# Atomics and printf
# ---------------------------------------------------------------------------------------------

_ATOMIC_UFUNCS = {"tl::atomic_add": np.add, "tl::atomic_max": np.maximum, "tl::atomic_min": np.minimum}


@builtin_rule(*_ATOMIC_UFUNCS)
def _atomic(e: E.Builtin, ctx: Ctx) -> CExpr:
    ufunc = _ATOMIC_UFUNCS[e.name]
    span = e.span or ctx.span
    fa, info = compile_addr(e.args[0], ctx, e.name)
    fv = compile_expr(e.args[1], ctx).fn
    n = ctx.nthreads
    site = ctx.site(info, "atomic", span)

    def atomic(env: list) -> Any:
        st = env[STATE]
        lanes = lanes_of(env[MASK], n)
        if not len(lanes):
            return np.zeros(n, info.np)
        addr = fa(env)
        vals = np.broadcast_to(np.asarray(fv(env)), (n,))[lanes].astype(info.np)[:, None]
        old, got = read_elems(env, st, addr, lanes, info.itemsize, info.np, site, span, "atomic")
        if len(got) != len(lanes):
            vals = vals[np.isin(lanes, got)]
        f = np.broadcast_to(np.asarray(addr.flat, dtype=np.int64), (n,))[got]
        arr = env[info.slot]
        if info.scope == "local":
            ufunc.at(arr, (f, got), vals[:, 0])
        else:
            if info.scope == "global" and st.mbarriers:
                check_tma_sources(st, info, arr, f, got, span)
            ufunc.at(arr, f, vals[:, 0])  # one update per thread, in thread order
        out = np.zeros(n, info.np)
        # local arrays are per thread: equal flat indices of two threads are different elements
        out[got] = old[:, 0] if info.scope == "local" else _previous(ufunc, f, old[:, 0], vals[:, 0])
        return out
    return CExpr(atomic, True)


def _previous(ufunc: Any, flat: np.ndarray, old: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """The value each thread's atomic returns: the element before its own update, the updates of
    the threads before it (thread order) to the same element included."""
    if len(np.unique(flat)) == len(flat):
        return old
    out = old.copy()
    seen: dict = {}
    for j, a in enumerate(flat.tolist()):
        cur = seen.get(a, old[j])
        out[j] = cur
        seen[a] = ufunc(cur, vals[j])
    return out


_LENGTH = re.compile(r"%([-+ #0]*\d*(?:\.\d+)?)(?:hh|h|ll|l|z)?([diouxXeEfgGcs%])")


@builtin_rule("printf")
def _printf(e: E.Builtin, ctx: Ctx) -> CExpr:
    fmt = _LENGTH.sub(lambda m: f"%{m.group(1)}{'d' if m.group(2) in 'iu' else m.group(2)}",
                      str(e.attr("fmt", "")))
    args = [compile_expr(a, ctx) for a in e.args]
    used = len([m for m in _LENGTH.finditer(fmt) if m.group(2) != "%"])
    args = args[:used]  # as in C, arguments beyond the format's conversions are ignored
    n = ctx.nthreads

    def printf(env: list) -> Any:
        lanes = lanes_of(env[MASK], n)
        vals = [np.broadcast_to(np.asarray(a.fn(env)), (n,)) for a in args]
        for t in lanes:
            row = tuple(float(v[t]) if v.dtype.kind == "f" or v.dtype.name in ("bfloat16",) else int(v[t])
                        for v in vals)
            print(fmt % row if row else fmt.replace("%%", "%"), end="", flush=True)
        return np.int32(0)
    return CExpr(printf, False)
