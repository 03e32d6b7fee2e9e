"""The thread-level GPU emulator (``target="cuda-emu"``): lowered kernels run on the CPU, checked.

``execute(func, args, as_warnings=False)`` runs the *thread-level* IR that the CUDA pipeline
hands to codegen (see :mod:`tegula.backends.cuda.codegen` for its contract) on numpy arrays,
and reports shared-memory races and memory errors. The IR is compiled once per kernel into
closures (one rule per node class and builtin, in the registries of :mod:`.context`; the rules
shared with the interpreter are in :mod:`tegula.backends.closure`).

Execution model
---------------
- Blocks run one after another in the order of their linear id (``blockIdx.x`` fastest; with
  ``annotations["swizzle"]`` the block index is rasterized exactly as the generated code does),
  so atomics are exact. A kernel launched in clusters (``annotations["cluster"]``) runs each
  cluster's blocks together, as tasks taking turns at their waits (:mod:`.cluster`). All threads of a block run together as vector lanes: every value is a
  numpy scalar (the same for all threads) or an array with one entry per thread, and each
  statement runs for every active thread before the next one starts.
- Control flow that differs per thread is masked (:mod:`.stmts`). Warp builtins work on groups
  of 32 lanes and need the whole warp active (:mod:`.builtins`, :mod:`.warp`).
- Memory (:mod:`.memory`): global buffers are the arrays passed in; shared memory is a byte pool
  per block laid out by ``annotations["smem_offsets"]``; ``local`` buffers are per-thread arrays.
- Arithmetic is the interpreter's (narrow floats compute in float32 and round after each
  operation), so results match it bit for bit where the operations are the same; ``mma`` sums
  in a different order than the interpreter's gemm and matches within rounding.

Checks (:mod:`.races`), reported as :class:`~tegula.errors.RaceError` (out-of-bounds accesses as
:class:`~tegula.errors.OutOfBoundsError`), or as :class:`~tegula.backends.emu.races.RaceWarning`
warnings when ``as_warnings`` (pass config ``tegula.emu_races_as_warnings``):

- shared-memory data races between threads of a block with no barrier in between: read after
  write, write after read, write after write (element granularity; cp.async writes count when
  they land, and touching their bytes while in flight is reported too);
- reads of shared memory never written (or last written through another buffer sharing its bytes);
- uses of registers (``local`` buffers: lowered fragments) never written, by element loads in
  expressions, ``mma.sync`` and ``wgmma`` operands and accumulators (a missing ``T.clear``),
  atomics: :class:`~tegula.errors.UninitializedReadError` (moves carry the poison along);
- out-of-bounds element accesses of every buffer, vector accesses leaving the buffer, misaligned
  vector accesses;
- ``__syncthreads()`` not reached by every thread, warp builtins run by part of a warp.

Each report names the buffer, the element, the two threads and the two kernel source lines.

Hopper (``cuda-emu:sm_90a``)
----------------------------
The sm_90a lowering runs as it is: TMA loads and stores through their tensor maps (zero fill,
swizzle), mbarriers with arrival and transaction counts and phases (:mod:`.mbarrier`), wgmma
reading shared memory through its descriptors with results visible at ``wait_group``, the async
proxy and its fences and ``setmaxnreg`` (:mod:`.hopper`), named barriers with ``bar.sync`` and
``bar.arrive`` (:mod:`.named_barriers`). Ordering is tracked with vector clocks (:mod:`.races`),
so an mbarrier orders exactly what it covers. The two sides of a warp-specialized branch
(producer and consumer warpgroups) run as tasks that take turns at their waits (:mod:`.tasks`;
one task per warpgroup where warpgroups wait for each other). Further checks, as :class:`~tegula.errors.RaceError` or
:class:`~tegula.errors.SyncError`: reads of a TMA destination before its phase completes; generic
writes read by TMA or wgmma without ``fence.proxy.async``; stage buffers refilled before their
consumer released them; deadlocked waits (with what every waiting warpgroup waits for); arrival
and transaction counts that never balance; mbarriers used before their initialization is fenced
and published; accumulator registers used before ``wait_group`` (or before
``wgmma_fence_operands``) and wgmma issued without ``wgmma.fence``.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tegula.errors import ArgumentError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.evaluate import array_fn
from tegula.ir.raster import block_coords, strips
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.stmt import Kernel, PrimFunc, SeqStmt
from tegula.backends import blas
from tegula.backends.closure import MASK, StmtFn, compile_expr, compile_stmt, poison
from tegula.backends.emu import (builtins, cluster, exprs, hopper, mbarrier,  # noqa: F401 (rules)
                                 named_barriers, stmts, warp)
from tegula.backends.emu.hopper import check_done
from tegula.backends.emu.mbarrier import check_balanced
from tegula.backends.emu.named_barriers import check_named
from tegula.backends.emu.context import STATE, BufInfo, Ctx
from tegula.backends.emu.memory import BlockState
from tegula.backends.emu.races import RaceWarning, Reporter, Tracker
from tegula.backends.emu.tasks import Scheduler, side_by_side
from tegula.backends.emu.cluster import Cluster, check_exit, cluster_clock
from tegula.backends.memo import new_memo
from tegula.backends.cuda.passes.plan_shared_memory import smem_layout  # the pool as on the GPU

__all__ = ["execute", "compile_func", "RaceWarning"]



@dataclass
class CompiledKernel:
    kernel: Kernel
    body: StmtFn
    nthreads: int
    grid: list            # fns of env -> int
    block_slots: list
    thread_slot: int
    thread_np: Any
    shared: list          # BufInfo
    locals_: list         # (BufInfo, poison value)
    vars_: list           # (BufInfo, init value)
    pool_bytes: int
    unit: int
    sites: list
    agents: int


@dataclass
class Program:
    func: PrimFunc
    kernels: list
    nslots: int
    params: list          # (param, slot)
    dyn: list             # (param position, dim, var slot, dtype)


_CACHE: "weakref.WeakKeyDictionary[PrimFunc, Program]" = weakref.WeakKeyDictionary()


def _compile_kernel(k: Kernel, base: Ctx) -> CompiledKernel:
    nthreads = 1
    for t in k.threads:
        nthreads *= int(t)
    ctx = Ctx(nthreads, base.slots, dict(base.bufs), set(), [], k.span)
    grid = [(lambda env, g=g: g) if isinstance(g, int) else
            (lambda env, f=compile_expr(E.as_expr(g), ctx).fn: int(f(env))) for g in k.grid]
    block_slots = [ctx.slot(v) for v in k.block_vars]
    thread_var = k.thread_var
    thread_slot = ctx.slot(thread_var) if thread_var is not None else -1
    if thread_var is not None:
        ctx.vec_vars.add(id(thread_var))
    ctx.memo = new_memo(lambda v, c, t=thread_var: "tid" if v is t else None)  # one array per launch
    offsets, pool_bytes = smem_layout(k)
    shared, locals_, vars_ = [], [], []
    for b in k.allocs:
        scope = "shared" if b.is_shared else b.scope
        if scope not in ("shared", "local", "local.var"):
            raise UnsupportedError(f"buffer '{b.name}' of scope '{b.scope}' reached the emulator: "
                                   "fragments must be lowered to per-thread 'local' buffers first", b.span)
        if not b.is_static:
            raise UnsupportedError(f"{b.scope} buffer '{b.name}' has a dynamic shape {b.shape}", b.span)
        info = BufInfo(b, ctx.slot(b), scope, len(ctx.bufs), offsets.get(id(b), 0), int(b.numel()))
        ctx.bufs[id(b)] = info
        if scope == "shared":
            shared.append(info)
        elif scope == "local":
            locals_.append((info, poison(b.dtype)))
        else:
            init = k.alloc_inits.get(b, 0)
            if isinstance(init, E.Const):
                init = init.value
            vars_.append((info, init))
    unit = min([s.itemsize for s in shared], default=1)
    agents = _hopper_facts(k, ctx, shared)
    body = compile_stmt(side_by_side(k.body), ctx)
    return CompiledKernel(k, body, nthreads, grid, block_slots, thread_slot,
                          thread_var.dtype.np if thread_var is not None else None,
                          shared, locals_, vars_, pool_bytes, unit, ctx.sites, agents)


_WGMMA_REGS = {"tl::wgmma_ss": (0,), "tl::wgmma_ss_fp8": (0,), "tl::wgmma_rs": (0, 1),
               "tl::wgmma_fence_operands": (0,)}


def _hopper_facts(k: Kernel, ctx: Ctx, shared: list) -> int:
    """Tensor maps and wgmma registers into ``ctx.info``; returns how many asynchronous agents
    (copy engines of mbarriers, wgmma of warpgroups, TMA stores) the race tracker needs."""
    from tegula.ir.visitor import post_order_visit

    ctx.info["tma_maps"] = {id(m.var): m for m in k.annotations.get("tma_maps", ())}
    regs: set = set()
    stores = []

    def visit(n: Any) -> None:
        if isinstance(n, E.Builtin):
            for i in _WGMMA_REGS.get(n.name, ()):
                a = n.args[i]
                if isinstance(a, E.Builtin) and a.args and isinstance(a.args[0], E.BufferLoad):
                    regs.add(id(a.args[0].buffer))
            if n.name == "tl::tma_store":
                stores.append(n)
    post_order_visit(k.body, visit)
    ctx.info["wgmma_regs"] = regs
    bars = sum(info.numel for info in shared if info.buffer.dtype.bits == 64)
    return bars + -(-ctx.nthreads // 128) + (ctx.nthreads if stores else 0)


def compile_func(func: PrimFunc) -> Program:
    """Compile thread-level ``func`` into closures (cached per PrimFunc object)."""
    prog = _CACHE.get(func)
    if prog is not None:
        return prog
    base = Ctx(1)
    params, dyn = [], []
    for pos, p in enumerate(func.params):
        slot = base.slot(p)
        params.append((p, slot))
        if isinstance(p, Buffer):
            base.bufs[id(p)] = BufInfo(p, slot, "global", len(base.bufs))
            for d, n in enumerate(p.shape):
                if isinstance(n, Var) and n not in base.slots:
                    dyn.append((pos, d, base.slot(n), n.dtype))
    body = func.body
    stmts_ = body.stmts if isinstance(body, SeqStmt) else (body,)
    kernels = []
    for s in stmts_:
        if not isinstance(s, Kernel):
            raise UnsupportedError(f"the emulator expects only Kernel launches at the top level of "
                                   f"'{func.name}', found {type(s).__name__}", s.span)
        kernels.append(_compile_kernel(s, base))
    prog = Program(func, kernels, base.slots.size, params, dyn)
    _CACHE[func] = prog
    return prog


def _bind(prog: Program, args: Sequence[Any]) -> tuple[list, list]:
    func = prog.func
    if len(args) != len(prog.params):
        raise ArgumentError(f"{func.name} takes {len(prog.params)} argument(s), got {len(args)}")
    env: list = [None] * prog.nslots
    copies = []
    for (p, slot), a in zip(prog.params, args):
        if isinstance(p, Buffer):
            if not isinstance(a, np.ndarray) or a.ndim != len(p.shape) or a.dtype != p.dtype.np:
                raise ArgumentError(f"{func.name}: parameter '{p.name}' expects a {len(p.shape)}-d "
                                    f"numpy array of {p.dtype.name}, got {getattr(a, 'dtype', type(a))} "
                                    f"{getattr(a, 'shape', '')}")
            for n, m in zip(p.shape, a.shape):
                if isinstance(n, int) and n != m:
                    raise ArgumentError(f"{func.name}: parameter '{p.name}' expects shape "
                                        f"{tuple(p.shape)}, got {a.shape}")
            flat = a.reshape(-1)
            if not np.shares_memory(flat, a) and a.size:
                copies.append((a, flat))
            env[slot] = flat
        else:
            env[slot] = np.array(a).astype(p.dtype.np)[()]
    for pos, d, slot, dtype in prog.dyn:
        env[slot] = np.array(args[pos].shape[d]).astype(dtype.np)[()]
    return env, copies


def _logical(ck: CompiledKernel, gx: int, gy: int) -> tuple[list, list]:
    """The block indices the kernel sees at each hardware block ``x + y * gx``: rasterized by
    ``annotations["swizzle"]`` with the formula the generated code prints
    (:func:`tegula.ir.raster.block_coords`), else the same."""
    raster = strips(ck.kernel.annotations) if len(ck.block_slots) >= 2 else None
    lid = Var("lid", dt.int64)
    env = {lid: np.arange(gx * gy, dtype=np.int64)}
    bx, by = (array_fn(e, lambda v: lambda env: env[v], wide=True)(env)
              for e in block_coords(lid, gx, gy, raster))
    return np.broadcast_to(bx, env[lid].shape).tolist(), np.broadcast_to(by, env[lid].shape).tolist()


def _clusters(ck: CompiledKernel, grid: list) -> Any:
    """The blocks in launch order, in clusters of ``annotations["cluster"]`` (``(cx, cy)``; one
    block each without): lists of (hardware (x, y, z), the indices the kernel sees), by rank."""
    gx, gy, gz = (grid + [1, 1, 1])[:3]
    cx, cy = (tuple(ck.kernel.annotations.get("cluster") or (1, 1)) + (1, 1))[:2]
    if gx % cx or gy % cy:
        raise ArgumentError(f"a grid of {gx} x {gy} blocks cannot be cut into clusters of {cx} x {cy}")
    lx, ly = _logical(ck, gx, gy)
    for z in range(gz):
        for y0 in range(0, gy, cy):
            for x0 in range(0, gx, cx):
                yield [((x, y, z), (lx[x + y * gx], ly[x + y * gx], z))
                       for y in range(y0, y0 + cy) for x in range(x0, x0 + cx)]


def _block_state(ck: CompiledKernel, reporter: Reporter, ids: tuple, clock: Any = None, base: int = 0) -> Any:
    n = ck.nthreads
    pool_len = -(-max(ck.pool_bytes, 1) // 16) * 16
    pool = np.full(pool_len, 0xFF, np.uint8)
    rep = Reporter(reporter.as_warnings)
    rep.seen = reporter.seen
    rep.block = "block (" + ", ".join(str(i) for i in ids[:max(1, len(ck.block_slots))]) + ")"
    st = BlockState(n, pool, Tracker(ck.pool_bytes, ck.unit, ck.sites, rep, n, ck.agents, clock, base),
                    rep, np.arange(n), np.zeros(n, np.int64))
    st.shared_infos = ck.shared
    st.local_slots = {info.index: info.slot for info, _ in ck.locals_}
    return st


def _enter_block(ck: CompiledKernel, env: list, st: Any, ids: tuple, tids: Any) -> None:
    n = ck.nthreads
    env[MASK] = None
    env[STATE] = st
    for slot, v, var in zip(ck.block_slots, ids, ck.kernel.block_vars):
        env[slot] = var.dtype.np.type(v)
    if tids is not None:
        env[ck.thread_slot] = tids
    for info in ck.shared:
        env[info.slot] = st.pool[info.offset:info.offset + info.numel * info.itemsize].view(info.np)
    for info, p in ck.locals_:
        env[info.slot] = np.full((info.numel, n), p, info.np)
    for info, init in ck.vars_:
        env[info.slot] = np.full(n, init).astype(info.np)


def _run_kernel(ck: CompiledKernel, env: list, reporter: Reporter) -> None:
    grid = [f(env) for f in ck.grid]
    tids = np.arange(ck.nthreads).astype(ck.thread_np) if ck.thread_slot >= 0 else None
    for blocks in _clusters(ck, grid):
        if len(blocks) == 1:
            ids = blocks[0][1]
            st = _block_state(ck, reporter, ids)
            reporter.block = st.rep.block
            _enter_block(ck, env, st, ids, tids)
            ck.body(env)
            check_balanced(st)
            check_named(st)
            check_done(st)
        else:
            _run_cluster(ck, env, reporter, blocks, tids)


def _run_cluster(ck: CompiledKernel, env: list, reporter: Reporter, blocks: list, tids: Any) -> None:
    """The blocks of one cluster side by side: tasks of one scheduler, one clock (:mod:`.cluster`)."""
    size = ck.nthreads + ck.agents
    clock = cluster_clock(len(blocks), size)
    sched = Scheduler()
    cl = Cluster(tuple(ck.kernel.annotations["cluster"]), [], clock)
    sides = []
    for r, (_, ids) in enumerate(blocks):
        st = _block_state(ck, reporter, ids, clock, r * size)
        st.scheduler = sched
        cl.add(st)
        cl.names.append(st.rep.block)
        e2 = list(env)
        _enter_block(ck, e2, st, ids, tids)

        def run(e: list, st: Any = st) -> None:
            st.task = sched.current
            ck.body(e)
            check_exit(st, ck.kernel.span)  # first: a peer's arrive still to come leaves a phase half done
            check_balanced(st)
            check_named(st)
            check_done(st)
        sides.append((st.rep.block, run, e2))
    sched.fork(sides)


def execute(func: PrimFunc, args: Sequence[Any], as_warnings: bool = False) -> None:
    """Run thread-level ``func`` on ``args`` (numpy arrays for buffers, Python scalars for vars),
    writing the arrays in place.

    Raises :class:`~tegula.errors.RaceError` for races, uninitialized shared reads, barrier
    divergence and misaligned vector accesses, :class:`~tegula.errors.OutOfBoundsError` for
    out-of-bounds accesses (or warns :class:`RaceWarning` for each distinct finding when
    ``as_warnings``), and :class:`~tegula.errors.ArgumentError` for arguments that do not fit.
    """
    prog = compile_func(func)
    env, copies = _bind(prog, args)
    reporter = Reporter(as_warnings)
    try:
        with np.errstate(all="ignore"), blas.kernel_threads():
            for ck in prog.kernels:
                _run_kernel(ck, env, reporter)
    finally:
        for a, flat in copies:
            a[...] = flat.reshape(a.shape)
