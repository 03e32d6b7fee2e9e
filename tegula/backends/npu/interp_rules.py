"""What NPU kernels mean on ``target="cpu"``: the interpreter's rules for the nodes of
:mod:`tegula.ir.npu`.

- **NpuKernel**: for each block ``cid``, three cores run the body: the cube core (AIC) and two
  vector cores (AIV ``vid`` = 0, 1). Each core has its own copy of every allocated buffer and runs
  the statements of its ``T.Scope`` (scopes the kernel leaves out are inferred first, see
  ``passes/infer_core_scope.py``); scalar code runs on all three. The cores run one at a time, in
  program order each, switching only when one waits on a cross-core flag whose count is 0
  (AIC first, then AIV0, AIV1). All cores waiting is a :class:`~tegula.errors.SyncError`
  (deadlock) naming every wait. A kernel that writes no cross-core flag hands GM over between
  its scopes in program order: a later scope of the other core kind waits for an earlier one
  whose GM bytes it touches (the flags of ``passes/cross_core_sync.py``, which InsertSync puts
  into the NPU targets' code too).
- **Cross-core flags** count: ``set_cross_flag`` adds one to the partner cores' flag (mode 2 from
  the AIC: both AIVs; from an AIV: the AIC, which waits for both AIVs; mode 1: the other AIV),
  ``wait_cross_flag`` waits while it is 0 and takes one. More than 16 pending sets, or sets never
  waited for at the end, are SyncErrors.
- **Intra-core flags and barriers** order the pipes of one core; in program order they change
  nothing, so here they are only checked (pipes, HardEvent, id 0-7).
- **Mma**, **VecOp**: :mod:`tegula.backends.npu.semantics` (their ``cpu`` rules of the tile-op
  registry, as the core tile ops have). Copy, Reduce and Fill are the
  interpreter's own rules; copies must follow a legal path of the machine (a2a3 by default).
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Optional

import numpy as np

from tegula.errors import KernelTypeError, SyncError, TegulaError
from tegula.ir.buffer import BufferRegion
from tegula.ir.tile_rules import tile_rule
from tegula.ir.npu import (FLAG_IDS, BarrierAll, CoreScope, Mma, NpuKernel, PipeBarrier,
                           SetCrossFlag, SetFlag, VecOp, WaitCrossFlag, WaitFlag)
from tegula.backends.closure import MASK, StmtFn, compile_expr, compile_stmt, np_scalar, poison
from tegula.backends.interp.context import Ctx, dim_value, stmt_rule
from tegula.backends.interp.tileops import Region
from tegula.backends.npu import semantics
from tegula.backends.npu.machine import A2A3, machine
from tegula.backends.npu.passes.assign_npu_scopes import remap_a5_kernel
from tegula.backends.npu.passes.check_paths import check_kernel
from tegula.backends.npu.passes.cross_core_sync import cross_core_flags
from tegula.backends.npu.passes.infer_core_scope import buffer_core, infer_kernel

CORE = object()   # env slot key: the core running (0 = AIC, 1 = AIV0, 2 = AIV1)
SCHED = object()  # env slot key: the block's CoreScheduler
CORE_NAMES = ("AIC", "AIV0", "AIV1")


class _Abort(BaseException):
    """Raised in a waiting core when another core failed or the block deadlocked."""


class CoreScheduler:
    """Runs the three cores of one block one at a time, switching at blocked cross-flag waits."""

    def __init__(self, n: int, m: Any):
        self.n = n
        self.machine = m
        self.max_pending = m.cross_flag_max_pending
        self.counts: dict = {}                    # (core, flag, from) -> pending sets
        self.waiting: list = [None] * n           # (condition, description) of blocked cores
        self.done = [False] * n
        self.go = [threading.Event() for _ in range(n)]
        self.error: Optional[BaseException] = None
        self.abort = False

    # -- flags -----------------------------------------------------------------------------
    def set(self, core: int, flag: int, mode: int, node: Any) -> None:
        if core == 0:
            targets = [(1, flag, 0), (2, flag, 0)] if mode == 2 else []
        else:
            targets = [(0, flag, core - 1)] if mode == 2 else [(3 - core, flag, 0)]
        if not targets:
            raise SyncError("T.set_cross_flag: mode 1 connects the two vector cores; the cube core "
                            "uses mode 2", node.span)
        for t in targets:
            self.counts[t] = self.counts.get(t, 0) + 1
            if self.counts[t] > self.max_pending:
                raise SyncError(f"cross-core flag {flag} has more than {self.max_pending} sets "
                                f"pending on {CORE_NAMES[t[0]]}", node.span,
                                hint="every set_cross_flag needs a wait_cross_flag on the partner")

    def wait(self, core: int, flag: int, node: Any) -> None:
        keys = [(0, flag, 0), (0, flag, 1)] if core == 0 else [(core, flag, 0)]
        ready: Callable[[], bool] = lambda: all(self.counts.get(k, 0) > 0 for k in keys)  # noqa: E731
        while not ready():
            self.waiting[core] = (ready, f"{CORE_NAMES[core]} waits on cross-core flag {flag} at "
                                         f"{node.span.file}:{node.span.line}" if node.span else "")
            self._switch(core)
            self.go[core].wait()
            self.go[core].clear()
            if self.abort:
                raise _Abort()
        self.waiting[core] = None
        for k in keys:
            self.counts[k] -= 1

    # -- running -----------------------------------------------------------------------------
    def _switch(self, core: int) -> None:
        for d in range(1, self.n + 1):
            j = (core + d) % self.n
            if not self.done[j] and (self.waiting[j] is None or self.waiting[j][0]()):
                self.go[j].set()
                return
        if not all(self.done):
            waits = [w[1] for w in self.waiting if w is not None]
            self.error = self.error or SyncError("deadlock: every core waits and none can set the "
                                                 "flag it waits for: " + "; ".join(waits))
            self._stop()

    def _stop(self) -> None:
        self.abort = True
        for e in self.go:
            e.set()

    def _main(self, core: int, fn: Callable[[], None]) -> None:
        self.go[core].wait()
        self.go[core].clear()
        try:
            if not self.abort:
                with np.errstate(all="ignore"):
                    fn()
        except _Abort:
            return
        except BaseException as e:  # a kernel error on this core: stop the block, re-raise below
            self.error = self.error or e
            self._stop()
            return
        self.done[core] = True
        self.waiting[core] = None
        if all(self.done):
            return
        self._switch(core)

    def run(self, fns: list) -> None:
        threads = [threading.Thread(target=self._main, args=(i, f), daemon=True)
                   for i, f in enumerate(fns)]
        for t in threads:
            t.start()
        self.go[0].set()
        for t in threads:
            t.join()
        if self.error is not None:
            raise self.error
        left = {k: v for k, v in self.counts.items() if v}
        if left:
            (core, flag, _), n = next(iter(left.items()))
            raise SyncError(f"cross-core flag {flag} still has {n} set(s) pending on "
                            f"{CORE_NAMES[core]} when the kernel ends",
                            hint="every set_cross_flag needs a matching wait_cross_flag")


def _machine_of(k: NpuKernel) -> Any:
    return machine(k.annotations.get("machine")) if k.annotations.get("machine") else A2A3


@stmt_rule(NpuKernel)
def _npu_kernel(k: NpuKernel, ctx: Ctx) -> StmtFn:
    if k.annotations.get("dialect") == "a5":
        k = remap_a5_kernel(k)
    k = infer_kernel(k)
    m = _machine_of(k)
    check_kernel(k, m)
    k = dataclasses.replace(k, body=cross_core_flags(k, m))
    grid = dim_value(k.grid[0], ctx)
    cslot, vslot = ctx.slot(k.block_vars[0]), ctx.slot(k.sub_var)
    core_slot, sched_slot = ctx.slot(CORE), ctx.slot(SCHED)
    allocs = []
    for b in k.allocs:
        shape = [dim_value(d, ctx) for d in b.shape]
        init = k.alloc_inits.get(b)
        if b.scope == "local.var":
            fill: Any = compile_expr(init, ctx).fn if init is not None and hasattr(init, "span") \
                else (lambda v: lambda env: v)(np_scalar(b.dtype, init or 0))
        else:
            fill = (lambda v: lambda env: v)(poison(b.dtype))
        allocs.append((ctx.slot(b), buffer_core(b.scope), shape, b.dtype.np, fill))
    inner = ctx.child(in_parallel=False, loop_ok=False, masked=False, flags={})
    body = compile_stmt(k.body, inner)
    ctype = k.block_vars[0].dtype.np.type

    def core_fn(env: list, core: int) -> Callable[[], None]:
        kind = "C" if core == 0 else "V"
        cenv = list(env)
        cenv[core_slot] = core
        cenv[vslot] = ctype(max(core - 1, 0))
        for slot, owner, shape, npd, fill in allocs:
            if owner is None or owner == kind:
                a = np.empty([f(cenv) for f in shape], npd)
                a.fill(fill(cenv))
                cenv[slot] = a
        return lambda: body(cenv)

    def launch(env: list) -> None:
        env[MASK] = None
        for c in range(grid(env)):
            env[cslot] = ctype(c)
            sched = CoreScheduler(3, m)
            env[sched_slot] = sched
            sched.run([core_fn(env, i) for i in range(3)])
    return launch


@stmt_rule(CoreScope)
def _core_scope(s: CoreScope, ctx: Ctx) -> StmtFn:
    core_slot = ctx.slot(CORE)
    body = compile_stmt(s.body, ctx)
    want = (0,) if s.kind == "C" else (1, 2)

    def scope(env: list) -> None:
        if env[core_slot] in want:
            body(env)
    return scope


def _flag_fn(e: Any, ctx: Ctx, what: str, node: Any, cross: bool) -> Callable[[list], int]:
    f = compile_expr(e, ctx).fn
    sched_slot = ctx.slot(SCHED)

    def value(env: list) -> int:
        v = int(f(env))
        limit = env[sched_slot].machine.cross_flag_ids if cross else FLAG_IDS
        if not 0 <= v < limit:
            raise KernelTypeError(f"{what}: flag id {v} is out of range 0..{limit - 1}", node.span)
        return v
    return value


def _checked_flag(s: Any, ctx: Ctx) -> StmtFn:
    what = "T.set_flag" if isinstance(s, SetFlag) else "T.wait_flag"
    idf = _flag_fn(s.id, ctx, what, s, cross=False)
    return lambda env: (idf(env), None)[1]


stmt_rule(SetFlag)(_checked_flag)
stmt_rule(WaitFlag)(_checked_flag)
stmt_rule(PipeBarrier)(lambda s, ctx: (lambda env: None))
stmt_rule(BarrierAll)(lambda s, ctx: (lambda env: None))


@stmt_rule(SetCrossFlag)
def _set_cross(s: SetCrossFlag, ctx: Ctx) -> StmtFn:
    idf = _flag_fn(s.flag, ctx, "T.set_cross_flag", s, cross=True)
    core_slot, sched_slot = ctx.slot(CORE), ctx.slot(SCHED)
    return lambda env: env[sched_slot].set(env[core_slot], idf(env), s.mode, s)


@stmt_rule(WaitCrossFlag)
def _wait_cross(s: WaitCrossFlag, ctx: Ctx) -> StmtFn:
    idf = _flag_fn(s.flag, ctx, "T.wait_cross_flag", s, cross=True)
    core_slot, sched_slot = ctx.slot(CORE), ctx.slot(SCHED)
    return lambda env: env[sched_slot].wait(env[core_slot], idf(env), s)


@tile_rule(Mma, "cpu")
def _mma(s: Mma, ctx: Ctx) -> StmtFn:
    ra, rb, rc = Region(s.A, ctx, s), Region(s.B, ctx, s), Region(s.C, ctx, s)
    init = s.init if isinstance(s.init, bool) else compile_expr(s.init, ctx).fn

    def mma(env: list) -> None:
        c = rc.view(env)
        first = init if isinstance(init, bool) else bool(init(env))
        c[...] = semantics.mma(ra.read(env), rb.read(env), c, s.transpose_A, s.transpose_B, first)
    return mma


@tile_rule(VecOp, "cpu")
def _vec(s: VecOp, ctx: Ctx) -> StmtFn:
    dst = Region(s.dst, ctx, s)
    ops = [Region(x, ctx, s) if isinstance(x, BufferRegion) else compile_expr(x, ctx).fn for x in s.srcs]

    def vec(env: list) -> None:
        d = dst.view(env)
        vals = [o.read(env) if isinstance(o, Region) else o(env) for o in ops]
        d[...] = semantics.vec(s.op, d, vals, s.attrs, s.span)
    return vec


__all__ = ["CoreScheduler", "CORE", "SCHED", "TegulaError"]
