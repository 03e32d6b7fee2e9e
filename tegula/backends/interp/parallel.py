"""Loads and stores inside ``T.Parallel`` bodies, executed over all lanes at once.

Each parallel loop variable of a nest holds an index array that varies along its own lane axis
(shape ``(M, 1)`` and ``(1, N)`` for ``T.Parallel(M, N)``). A load whose indices are lane
variables (plus a scalar offset) or scalars is a strided view of the buffer, rearranged to the
lane axes; any other load is numpy fancy indexing. Stores mirror this, honouring the lane mask
that ``if`` statements on lane-varying conditions set in ``env[MASK]``.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from tegula.ir.expr import BinOp, Var
from tegula.backends.closure import MASK, CExpr, compile_expr
from tegula.backends.interp.batch import recorded_write
from tegula.backends.interp.context import Ctx, ParVar, out_of_bounds
from tegula.backends.memo import outside, value_range


def _lane_index(node: Any, ce: CExpr, ctx: Ctx) -> Optional[tuple[ParVar, Any]]:
    """``(parallel var, scalar offset fn or None)`` when ``node`` is ``v``, ``v + s``, ``s + v``
    or ``v - s`` for a unit-step parallel var ``v`` of constant range and a scalar ``s``."""
    def pv(x: Any) -> Optional[ParVar]:
        if isinstance(x, Var):
            p = ctx.par_vars.get(id(x))
            if p is not None and p.step == 1 and p.start is not None and p.extent is not None:
                return p
        return None

    p = pv(node)
    if p is not None:
        return p, None
    if isinstance(node, BinOp) and node.op in ("add", "sub"):
        pa, pb = pv(node.a), pv(node.b)
        if pa is not None:
            other = compile_expr(node.b, ctx)
            if not other.vec:
                f = other.fn
                return (pa, f) if node.op == "add" else (pa, lambda env: -f(env))
        if pb is not None and node.op == "add":
            other = compile_expr(node.a, ctx)
            if not other.vec:
                return pb, other.fn
    return None


def _view_plan(node: Any, idx: list[CExpr], ctx: Ctx) -> Optional[Callable[[list], Any]]:
    """A function giving the lane-arranged view of the buffer (or None when out of bounds),
    or None when the indices do not allow a view."""
    plan = []  # per buffer dim: ("s", fn) or ("v", axis, start, extent, offset fn)
    axes = []
    for i, ce in zip(node.indices, idx):
        if not ce.vec:
            plan.append(("s", ce.fn))
            continue
        lane = _lane_index(i, ce, ctx)
        if lane is None:
            return None
        p, off = lane
        if p.axis in axes:
            return None
        axes.append(p.axis)
        plan.append(("v", p.start, p.extent, off))
    D = ctx.ndim
    in_order = axes == sorted(axes)
    # output-dim order of the view: None for missing lane axes, placed so that dims follow axes
    expand: Optional[tuple] = None
    perm: Optional[tuple] = None
    if not in_order:
        perm = tuple(int(k) for k in np.argsort(axes))
        present = sorted(axes)
        expand = tuple(slice(None) if ax in present else None for ax in range(D))
    bs = ctx.slot(node.buffer)
    static = all(p[0] == "v" and p[3] is None for p in plan)

    # Nones to insert before each lane dim (and after the last) so view dims follow lane axes
    pads: list[int] = []
    trail = 0
    if perm is None:
        prev = -1
        for ax in axes:
            pads.append(ax - prev - 1)
            prev = ax
        trail = D - prev - 1
    else:
        pads = [0] * len(axes)

    def key_of(env: list, shape: tuple) -> Optional[list]:
        key: list = []
        lane = 0
        for (kind, *rest), n in zip(plan, shape):
            if kind == "s":
                v = int(rest[0](env))
                if not 0 <= v < n:
                    return None
                key.append(v)
                continue
            start, ext, off = rest
            s0 = start if off is None else start + int(off(env))
            if s0 < 0 or s0 + ext > n:
                return None
            key.extend([None] * pads[lane])
            lane += 1
            key.append(slice(s0, s0 + ext))
        key.extend([None] * trail)
        return key

    if static and perm is None:
        cache: dict = {}

        def view_static(env: list) -> Any:
            a = env[bs]
            k = cache.get(a.shape)
            if k is None:
                k = key_of(env, a.shape)
                k = cache[a.shape] = (tuple(k) if k is not None else False)
            if k is False:
                return None
            return a[k]
        return view_static

    def view(env: list) -> Any:
        a = env[bs]
        k = key_of(env, a.shape)
        if k is None:
            return None
        v = a[tuple(k)]
        if perm is not None:
            v = v.transpose(perm)[expand]
        return v
    return view


def _check_lanes(node: Any, ix: list, shape: tuple, mask: Any) -> list:
    """Raise on an out-of-bounds index of an active lane; clip inactive lanes into bounds."""
    out = list(ix)
    for k, (v, n) in enumerate(zip(ix, shape)):
        if isinstance(v, np.ndarray):
            if v.size == 0:
                continue
            lo, hi = value_range(v)
            if lo >= 0 and hi < n:
                continue
            bad, clipped = outside(v, n)
            if mask is not None:
                bad = bad & mask
            if bad.any():  # name the first bad lane: all indices broadcast to the nest's shape
                lanes = np.broadcast_shapes(bad.shape, *(np.shape(x) for x in ix))
                where = tuple(np.argwhere(np.broadcast_to(bad, lanes))[0])
                full = [np.broadcast_to(x, lanes)[where] for x in ix]
                raise out_of_bounds(node, node.buffer, full, shape)
            out[k] = clipped
        elif not 0 <= v < n:
            if mask is None or np.any(mask):  # the same index on every lane: name the first lane's
                first = [np.ravel(x)[0] if isinstance(x, np.ndarray) else x for x in ix]
                raise out_of_bounds(node, node.buffer, first, shape)
            out[k] = 0
    return out


def gather(a: np.ndarray, ix: list) -> Any:
    """``a[tuple(ix)]`` for in-bounds index arrays; of a C-contiguous array of two or more
    dimensions, as one flat ``take`` (faster than numpy's indexing by several arrays)."""
    if len(ix) < 2 or not a.flags.c_contiguous:
        return a[tuple(ix)]
    flat = np.asarray(ix[0]).astype(np.intp)
    for x, n in zip(ix[1:], a.shape[1:]):
        flat = flat * n + x
    return a.reshape(-1).take(flat)


def vector_load(node: Any, ctx: Ctx, idx: list[CExpr]) -> Callable[[list], Any]:
    """Closure loading ``node`` (a BufferLoad with lane-varying indices) for all lanes."""
    bs = ctx.slot(node.buffer)
    fns = [c.fn for c in idx]

    def fancy(env: list) -> Any:
        a = env[bs]
        ix = _check_lanes(node, [f(env) for f in fns], a.shape, env[MASK])
        return gather(a, ix)

    view = _view_plan(node, idx, ctx)
    if view is None:
        return fancy

    def load(env: list) -> Any:
        v = view(env)
        return fancy(env) if v is None else v
    return load


def vector_store(node: Any, ctx: Ctx, idx: list[CExpr], value: CExpr) -> Callable[[list], None]:
    """Closure storing ``node.value`` at ``node.indices`` for all active lanes."""
    bs = ctx.slot(node.buffer)
    fns = [c.fn for c in idx]
    fv = value.fn
    n = len(fns)
    if ctx.batch is not None and node.buffer.is_global:
        return _recorded_store(node, ctx, bs, fns, fv)

    def fancy(env: list, v: Any) -> None:
        a = env[bs]
        mask = env[MASK]
        parts = [f(env) for f in fns] + [v] + ([mask] if mask is not None else [])
        arrs = np.broadcast_arrays(*parts)
        ix, val = arrs[:n], arrs[n]
        if mask is not None:
            m = arrs[n + 1]
            ix = [x[m] for x in ix]
            val = val[m]
        ix = _check_lanes(node, ix, a.shape, None)
        a[tuple(ix)] = val

    view = _view_plan(node, idx, ctx) if any(c.vec for c in idx) else None
    if view is None:
        def store_fancy(env: list) -> None:
            fancy(env, fv(env))
        return store_fancy

    def store(env: list) -> None:
        v = fv(env)
        t = view(env)
        if t is not None:
            mask = env[MASK]
            try:
                if mask is None:
                    t[...] = v
                else:
                    np.copyto(t, v, casting="unsafe", where=mask)
                return
            except ValueError:
                pass  # lanes collide on one element (a race): fall back, last lane wins
        fancy(env, v)
    return store


def _recorded_store(node: Any, ctx: Ctx, bs: int, fns: list, fv: Any) -> Callable[[list], None]:
    """A store into global memory while blocks run side by side (:mod:`.batch`): all active
    lanes at once, recording which block wrote which element."""
    n = len(fns)
    size = ctx.batch.size
    wslot = ctx.batch.writes
    block = np.arange(size).reshape((size,) + (1,) * (ctx.ndim - 1))

    def store(env: list) -> None:
        a = env[bs]
        mask = env[MASK]
        parts = [f(env) for f in fns] + [fv(env), block] + ([mask] if mask is not None else [])
        arrs = np.broadcast_arrays(*parts)
        ix, val, blk = arrs[:n], arrs[n], arrs[n + 1]
        if mask is not None:
            m = arrs[n + 2]
            ix = [x[m] for x in ix]
            val, blk = val[m], blk[m]
        flat, old = recorded_write(a, tuple(_check_lanes(node, ix, a.shape, None)), val)
        env[wslot].append((bs, flat, blk, old))
    return store
