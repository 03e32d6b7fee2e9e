"""Statements the emulator runs together, with the meaning they have one after another.

Hand-written tensor-core kernels (``TensorCoreIntrinEmitter``, ``T.get_thread_binding``) reach
the emulator as long unrolled sequences: 32 ``mma.sync`` in a row for one k-step of a 128x128
tile, and element loops ``for k in T.unroll(32): A_shared[...] = A[...]`` for each tile copy. Run
one statement at a time, the per-statement cost (closure calls, bounds checks, race bookkeeping)
dominates. Two shapes are run as one vector operation instead:

- **a run of mma.sync** (consecutive ``Evaluate`` of the same ``tl::mma_*`` builtin) whose
  operands are registers at constant indices (``address_of(A_local[c])``), with the same A, B and
  C buffers, C different from A and B and no two accumulators overlapping: no mma of the run
  reads what another writes, so reading every fragment first, multiplying the whole batch and
  writing every accumulator back is what running them in order gives, bit for bit.
- **an element loop** (``serial`` / ``unroll`` with constant bounds) whose body is one store
  ``buf[...] = value`` where the value reads only buffers of other scopes than ``buf`` (so no
  iteration reads what another writes) and uses no builtin: the loop variable becomes one more
  lane axis, and the store is one vector store of ``extent x threads`` elements. Shared stores and
  loads go through the race tracker as one statement of those elements, each recorded for the
  thread that makes it (a thread never races with itself; two threads writing one element in
  different iterations is still the same race). Any out-of-bounds index runs the loop one
  iteration at a time instead, so the error is the one that loop reports.
- **a vector-copy loop** (the same loops) whose body is one ``tl::copy_vec`` between a global and
  a shared buffer, at pure indices: every iteration reads one scope and writes the other, so
  reading every vector first and then writing every vector is what running them in order gives.
  The race tracker sees one read and one write of all the vectors, each for its thread; an
  index out of bounds, a vector leaving its buffer or a misaligned one runs the loop one
  iteration at a time, which reports it.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tegula.ir import expr as E
from tegula.ir.stmt import BufferStore, Evaluate, For
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.closure import MASK, StmtFn, compile_expr
from tegula.backends.emu.builtins import template
from tegula.backends.emu.context import STATE, Ctx
from tegula.backends.emu.memory import check_tma_sources

# -- runs of mma.sync ----------------------------------------------------------------------------


def _const_reg(arg: Any, ctx: Ctx) -> Optional[tuple]:
    """``(BufInfo, index)`` for ``address_of(local_buf[c])`` with a constant ``c``, else None."""
    if not (isinstance(arg, E.Builtin) and arg.name == "address_of" and arg.args
            and isinstance(arg.args[0], E.BufferLoad)):
        return None
    load = arg.args[0]
    info = ctx.bufs.get(id(load.buffer))
    if info is None or info.scope != "local" or len(load.indices) != 1 \
            or id(load.buffer) in ctx.info.get("wgmma_regs", ()):
        return None
    i = load.indices[0]
    if isinstance(i, int):
        return info, i
    if isinstance(i, E.Const) and isinstance(i.value, int):
        return info, int(i.value)
    return None


def static_mma(s: Any, ctx: Ctx, table: dict) -> Optional[tuple]:
    """``(name, (C, c0), (A, a0), (B, b0))`` when ``s`` is an mma.sync on registers at constant
    indices of buffers of the mma's dtypes, in bounds; else None."""
    if not (isinstance(s, Evaluate) and isinstance(s.value, E.Builtin) and s.value.name in table):
        return None
    e = s.value
    k, din, dacc = table[e.name][:3]
    regs = [_const_reg(a, ctx) for a in e.args[:3]]
    if len(e.args) != 3 or any(r is None for r in regs):
        return None
    counts = (4, 16 * k // 32, 8 * k // 32)  # C, A, B elements per lane
    for (info, i), want, cnt in zip(regs, (dacc, din, din), counts):
        if info.np != want or i < 0 or info.numel is None or i + cnt > info.numel:
            return None
    return (e.name, *regs)


def static_ldmatrix(s: Any, ctx: Ctx) -> Optional[tuple]:
    """``(num, trans, span, source buffer, (destination BufInfo, index))`` when ``s`` is an
    ``ldmatrix`` of 1, 2 or 4 matrices from a shared buffer into registers at a constant index,
    in bounds (``4 * num`` bytes per lane); else None."""
    if not (isinstance(s, Evaluate) and isinstance(s.value, E.Builtin) and s.value.name == "tl::ldmatrix"):
        return None
    e = s.value
    t = template(e)
    if len(e.args) != 2 or not t or int(t[0]) not in (1, 2, 4):
        return None
    num, trans = int(t[0]), (str(t[1]).lower() in ("true", "1") if len(t) > 1 else False)
    dst = _const_reg(e.args[0], ctx)
    src = e.args[1]
    if dst is None or 4 % dst[0].itemsize or dst[1] + 4 * num // dst[0].itemsize > (dst[0].numel or 0):
        return None
    if not (isinstance(src, E.Builtin) and src.name == "address_of" and src.args
            and isinstance(src.args[0], E.BufferLoad)):
        return None
    sinfo = ctx.bufs.get(id(src.args[0].buffer))
    if sinfo is None or sinfo.scope != "shared" or 16 % sinfo.itemsize:
        return None
    return num, trans, e.span, sinfo, dst


def mma_runs(stmts: tuple, ctx: Ctx, table: dict) -> list:
    """Split ``stmts`` into single statements and runs that can run together: a list of
    ``(start, stop)`` index ranges, runs being those of length 2 or more: mma.sync on constant
    registers (see the module docstring), or ldmatrix of one source line (same span, shape and
    source buffer) into distinct constant registers of one buffer."""
    out = []
    i = 0
    while i < len(stmts):
        first = static_mma(stmts[i], ctx, table)
        j = i + 1
        ld = static_ldmatrix(stmts[i], ctx) if first is None else None
        if ld is not None:
            num, trans, span, sinfo, (dinfo, d0) = ld
            per = 4 * num // dinfo.itemsize
            used = set(range(d0, d0 + per))
            while j < len(stmts):
                nxt = static_ldmatrix(stmts[j], ctx)
                if nxt is None or (nxt[0], nxt[1]) != (num, trans) or nxt[2] != span \
                        or nxt[3] is not sinfo or nxt[4][0] is not dinfo:
                    break
                ds = set(range(nxt[4][1], nxt[4][1] + per))
                if ds & used:
                    break
                used |= ds
                j += 1
        if first is not None:
            name, (cb, c0), (ab, _), (bb, _) = first
            if cb.index not in (ab.index, bb.index):
                used = set(range(c0, c0 + 4))
                while j < len(stmts):
                    nxt = static_mma(stmts[j], ctx, table)
                    if nxt is None or nxt[0] != name or nxt[1][0] is not cb or nxt[2][0] is not ab \
                            or nxt[3][0] is not bb:
                        break
                    cs = set(range(nxt[1][1], nxt[1][1] + 4))
                    if cs & used:
                        break
                    used |= cs
                    j += 1
        out.append((i, j))
        i = j
    return out


# -- element loops as one vector store -------------------------------------------------------------

_PURE = (E.Var, E.Const, E.BinOp, E.Compare, E.UnaryOp, E.Cast, E.Call, E.BufferLoad)


def _const_loop(s: For) -> bool:
    """A serial or unrolled loop of constant start and of constant extent 2 or more."""
    if s.kind not in ("serial", "unroll") or not isinstance(s.start, (int, E.Const)) \
            or not isinstance(s.extent, (int, E.Const)):
        return False
    ext = s.extent if isinstance(s.extent, int) else s.extent.value
    return isinstance(ext, int) and ext >= 2


def batchable_loop(s: For, ctx: Ctx) -> bool:
    """Whether loop ``s`` can run as one vector store (module docstring)."""
    body = s.body
    if not _const_loop(s) or not isinstance(body, BufferStore):
        return False
    dst = ctx.bufs.get(id(body.buffer))
    if dst is None or dst.scope not in ("global", "shared", "local") \
            or id(body.buffer) in ctx.info.get("wgmma_regs", ()):
        return False
    if dst.scope == "local" and len(body.buffer.shape) != 1:
        return False
    ok = [True]

    def no_loads(n: Any) -> None:
        if isinstance(n, E.BufferLoad):
            ok[0] = False

    def visit(n: Any) -> None:
        if isinstance(n, E.Expr) and not isinstance(n, _PURE):
            ok[0] = False
        elif isinstance(n, E.BufferLoad):
            info = ctx.bufs.get(id(n.buffer))
            if info is None or info.scope == dst.scope or info.scope not in ("global", "shared", "local") \
                    or id(n.buffer) in ctx.info.get("wgmma_regs", ()) \
                    or (info.scope == "local" and len(n.buffer.shape) != 1):
                ok[0] = False
            for i in n.indices:
                if isinstance(i, E.Expr):
                    post_order_visit(i, no_loads)
    if isinstance(body.value, E.Expr):
        post_order_visit(body.value, visit)
    for i in body.indices:
        if isinstance(i, E.Expr):
            post_order_visit(i, visit)
            post_order_visit(i, no_loads)
    return ok[0]


class _OutOfBounds(Exception):
    """An index of the batched loop leaves its buffer: run the loop one iteration at a time."""


def _flat(info: Any, idx: list, ctx: Ctx) -> Any:
    """``fn(env, active) -> flat element index`` (any shape broadcasting to ``extent x threads``)
    of ``info``'s buffer at ``idx``; raises _OutOfBounds when an active lane leaves a dimension
    (inactive lanes index element 0)."""
    from tegula.backends.emu.exprs import dims_of

    fns = [compile_expr(E.as_expr(i), ctx).fn for i in idx]
    dims = dims_of(info, ctx)

    def flat(env: list, active: Any) -> Any:
        f: Any = 0
        stride = 1
        for fn, d in zip(reversed(fns), reversed(dims)):
            i = np.asarray(fn(env), dtype=np.int64)
            n = d(env)
            bad = (i < 0) | (i >= n)
            if bad.any():
                if active is None or np.broadcast_to(bad, active.shape)[active].any():
                    raise _OutOfBounds
                i = np.where(bad, 0, i)
            f = f + i * stride
            stride *= n
        return f
    return flat


class _LoadsToVars(Mutator):
    """Each element load becomes a fresh variable (``found``: (var, load) in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list = []

    def visit_BufferLoad(self, e: E.BufferLoad) -> E.Expr:
        v = E.Var(f"{e.buffer.name}_elem", e.dtype)
        self.found.append((v, e))
        return v


def _loop_lanes(s: For, ctx: Ctx) -> tuple:
    """For a constant loop run as one more lane axis: its var's slot, the var's values
    ``(extent, 1)``, the ``(extent, threads)`` shape, each element's thread and those flat."""
    start = int(s.start if isinstance(s.start, int) else s.start.value)
    ext = int(s.extent if isinstance(s.extent, int) else s.extent.value)
    values = (start + np.arange(ext, dtype=np.int64) * int(s.step)).astype(s.var.dtype.np)[:, None]
    shape = (ext, ctx.nthreads)
    tids = np.broadcast_to(np.arange(ctx.nthreads), shape)
    return ctx.slot(s.var), values, shape, tids, tids.ravel()


def compile_batched_loop(s: For, ctx: Ctx, sequential: StmtFn) -> StmtFn:
    """Loop ``s`` (see :func:`batchable_loop`) as one vector store over ``extent x threads``;
    ``sequential`` (the loop run one iteration at a time) takes over on an out-of-bounds index."""
    n = ctx.nthreads
    slot, values, shape, tids, all_lanes = _loop_lanes(s, ctx)
    ar = np.arange(n)
    body = s.body
    ctx.vec_vars.add(id(s.var))
    try:
        sub = _LoadsToVars()
        value = sub.visit(E.as_expr(body.value, like=body.buffer.dtype))
        loads = []   # (var slot, BufInfo, flat fn, race site or -1)
        for v, e in sub.found:
            info = ctx.buf(e.buffer, e)
            site = ctx.site(info, "load", e.span or ctx.span) if info.scope == "shared" else -1
            vs = ctx.slot(v)
            ctx.vec_vars.add(id(v))
            loads.append((vs, info, _flat(info, list(e.indices), ctx), site))
        fv = compile_expr(value, ctx).fn
        dst = ctx.buf(body.buffer, body)
        fdst = _flat(dst, list(body.indices), ctx)
    finally:
        ctx.vec_vars.discard(id(s.var))
    span = body.span or ctx.span
    site = ctx.site(dst, "store", span) if dst.scope == "shared" else -1
    npd = dst.np

    def run(env: list) -> None:
        mask = env[MASK]
        active = None if mask is None else np.broadcast_to(mask, shape)
        env[slot] = values
        try:
            flats = [f(env, active) for _, _, f, _ in loads]
            where = fdst(env, active)
        except _OutOfBounds:
            sequential(env)
            return
        if active is None:
            lanes = all_lanes

            def pick(x: Any) -> np.ndarray:
                return np.broadcast_to(x, shape).ravel()
        else:
            lanes = tids[active]

            def pick(x: Any) -> np.ndarray:
                return np.broadcast_to(x, shape)[active]
        st = env[STATE]
        for (vs, info, _, lsite), fl in zip(loads, flats):
            arr = env[info.slot]
            if info.scope == "local":
                env[vs] = arr[np.broadcast_to(fl, shape), ar]
            else:
                env[vs] = arr[fl]
                if lsite >= 0:
                    st.tracker.read(st.tracker.units(info.offset + pick(fl) * info.itemsize,
                                                     info.itemsize), lanes, lsite, info)
        val = pick(np.asarray(fv(env)).astype(npd, copy=False))
        fw = pick(where)
        arr = env[dst.slot]
        if site >= 0:
            st.tracker.write(st.tracker.units(dst.offset + fw * dst.itemsize, dst.itemsize),
                             lanes, site, dst)
        elif dst.scope == "global" and st.mbarriers:
            check_tma_sources(st, dst, arr, fw, lanes, span)
        if dst.scope == "local":
            arr[fw, lanes] = val
        else:
            arr[fw] = val
    return run


# -- vector-copy loops as one gather and one scatter ---------------------------------------------

def _pure(e: Any) -> bool:
    ok = [True]

    def visit(n: Any) -> None:
        if isinstance(n, E.Expr) and (not isinstance(n, _PURE) or isinstance(n, E.BufferLoad)):
            ok[0] = False
    if isinstance(e, E.Expr):
        post_order_visit(e, visit)
    return ok[0]


def _copy_operands(s: For, ctx: Ctx) -> Optional[tuple]:
    """``(destination load, source load, bytes)`` when loop ``s`` can run as one vector copy
    (module docstring), else None."""
    body = s.body
    if not (_const_loop(s) and isinstance(body, Evaluate) and isinstance(body.value, E.Builtin)
            and body.value.name == "tl::copy_vec" and len(body.value.args) == 2):
        return None
    t = template(body.value)
    if not t:
        return None
    loads = []
    for a in body.value.args:
        if not (isinstance(a, E.Builtin) and a.name == "address_of" and a.args
                and isinstance(a.args[0], E.BufferLoad)):
            return None
        load = a.args[0]
        info = ctx.bufs.get(id(load.buffer))
        if info is None or info.scope not in ("global", "shared") or not all(_pure(i) for i in load.indices):
            return None
        loads.append((load, info))
    (dst, dinfo), (src, sinfo) = loads
    nbytes = int(t[0])
    if dinfo.scope == sinfo.scope or nbytes % dinfo.itemsize or nbytes % sinfo.itemsize:
        return None
    return dst, src, nbytes


def batchable_copy(s: For, ctx: Ctx) -> bool:
    """Whether loop ``s`` can run as one vector copy (module docstring)."""
    return _copy_operands(s, ctx) is not None


def compile_batched_copy(s: For, ctx: Ctx, sequential: StmtFn) -> StmtFn:
    """Loop ``s`` (see :func:`batchable_copy`) as one gather of ``extent x threads`` vectors and
    one scatter; ``sequential`` takes over on an index out of bounds, a vector leaving its buffer
    or a misaligned vector (it reports them)."""
    dload, sload, nbytes = _copy_operands(s, ctx)
    slot, values, shape, tids, all_lanes = _loop_lanes(s, ctx)
    dinfo, sinfo = ctx.buf(dload.buffer, dload), ctx.buf(sload.buffer, sload)
    ctx.vec_vars.add(id(s.var))
    try:
        fdst = _flat(dinfo, list(dload.indices), ctx)
        fsrc = _flat(sinfo, list(sload.indices), ctx)
    finally:
        ctx.vec_vars.discard(id(s.var))
    span = s.body.value.span or ctx.span
    sides = []
    for info in (sinfo, dinfo):
        site = ctx.site(info, "copy", span) if info.scope == "shared" else -1
        off = info.offset if info.scope == "shared" else 0
        sides.append((info, site, off, np.arange(nbytes // info.itemsize)))
    (_, ssite, soff, s_ar), (_, dsite, doff, d_ar) = sides
    sisz, disz = sinfo.itemsize, dinfo.itemsize

    def run(env: list) -> None:
        mask = env[MASK]
        active = None if mask is None else np.broadcast_to(mask, shape)
        env[slot] = values
        try:
            fs, fd = fsrc(env, active), fdst(env, active)
        except _OutOfBounds:
            sequential(env)
            return
        if active is None:
            lanes = all_lanes
            F, D = np.broadcast_to(fs, shape).ravel(), np.broadcast_to(fd, shape).ravel()
        else:
            lanes = tids[active]
            F, D = np.broadcast_to(fs, shape)[active], np.broadcast_to(fd, shape)[active]
        if not len(lanes):
            return
        src, dst = env[sinfo.slot], env[dinfo.slot]
        sb, db = soff + F * sisz, doff + D * disz
        if (sb % nbytes).any() or (db % nbytes).any() or (F + len(s_ar) > src.shape[0]).any() \
                or (D + len(d_ar) > dst.shape[0]).any():
            sequential(env)
            return
        st = env[STATE]
        vals = src[F[:, None] + s_ar]
        if ssite >= 0:
            st.tracker.read(st.tracker.units(sb, nbytes), lanes, ssite, sinfo)
        if vals.dtype != dst.dtype:
            vals = np.ascontiguousarray(vals).view(np.uint8).view(dst.dtype)
        if dsite >= 0:
            st.tracker.write(st.tracker.units(db, nbytes), lanes, dsite, dinfo)
        elif dinfo.scope == "global" and st.mbarriers:
            check_tma_sources(st, dinfo, dst, D[:, None] + d_ar, lanes, span)
        dst[D[:, None] + d_ar] = vals
    return run
