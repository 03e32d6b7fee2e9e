"""The emulator's timing model: a discrete-event simulation of one block's pipes and flags with
the cost model (:mod:`tegula.backends.npu.cost`). Every number it gives is *modelled* (labelled
with ``cost.MODEL_VERSION``), not measured.

The scalar unit of each core (AIC, AIV0, AIV1) issues its instruction stream (:mod:`.trace`, no
data needed) in order, ``SCALAR_ISSUE`` cycles an instruction; ``wait_cross_flag`` and
``barrier_all`` stop it. Each pipe runs its queue in order: an operation starts once it is issued,
its pipe is free (the previous operation started ``ii`` cycles ago) and any barrier or flag ahead
of it is satisfied, and finishes ``latency`` cycles after it starts; ``set_flag`` does not hold
its pipe and fires when the pipe's earlier work has finished; ``wait_flag`` holds its pipe until the flag fired;
``pipe_barrier`` holds its pipe until the pipe's earlier work has finished; a cross-core flag
arrives ``CROSS_FLAG_LATENCY`` cycles after the earlier work of its pipe finished.

The kernel's time: the blocks are identical unless their control flow depends on the block index,
so block 0 is simulated and the grid runs in ``ceil(grid / AI cores)`` waves of it.
:meth:`Timing.chrome_trace` writes the block's timeline as a Chrome trace (``chrome://tracing`` or
https://ui.perfetto.dev, offline).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.errors import ArgumentError, SyncError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.npu import BARRIER_PIPES, PIPES, Mma, NpuKernel
from tegula.ir.stmt import PrimFunc
from tegula.ir.visitor import post_order_visit
from tegula.backends.closure import np_scalar
from tegula.backends.interp.context import Ctx
from tegula.backends.npu import cost
from tegula.backends.npu.emu.sim import CORE_NAMES, cross_keys, cross_targets
from tegula.backends.npu.emu.trace import Issuer, Memory

_SLOTS = 1 << 14


@dataclass
class Timing:
    """The modelled time of one kernel (cycles of ``model``)."""

    kernel: str
    machine: str
    model: str
    block_cycles: int
    waves: int
    grid: int
    clock_ghz: float
    busy: dict                 # (core name, pipe) -> cycles the pipe is occupied in one block
    events: list = field(default_factory=list)   # (core name, pipe, label, start, cycles)
    mma_cycles: int = 0        # cube cycles doing multiply-accumulate (without state overhead)
    flops: float = 0.0         # multiply-adds x 2 of the whole kernel

    @property
    def cycles(self) -> int:
        return self.block_cycles * self.waves

    @property
    def time_us(self) -> float:
        return self.cycles / (self.clock_ghz * 1e3)

    def utilisation(self) -> dict:
        """(core, pipe) -> fraction of the block's time the pipe is occupied."""
        return {k: v / self.block_cycles for k, v in sorted(self.busy.items()) if self.block_cycles}

    def tflops(self) -> float:
        return self.flops / (self.time_us * 1e-6) / 1e12 if self.time_us else 0.0

    def cube_peak_fraction(self, m: Any) -> float:
        """The kernel's FLOP rate over the cube peak of all AI cores (8192 FLOP/cycle each)."""
        peak = 16 * 16 * 16 * 2 * m.cores_aic * m.clock_ghz * 1e9
        return self.flops / (self.time_us * 1e-6) / peak if self.time_us else 0.0

    def summary(self) -> str:
        lines = [f"{self.kernel} on {self.machine}, modelled with {self.model} (not measured):",
                 f"  {self.cycles} cycles = {self.block_cycles} per block x {self.waves} wave(s) of "
                 f"{self.grid} block(s); {self.time_us:.2f} us at {self.clock_ghz} GHz"]
        if self.flops:
            lines.append(f"  {self.tflops():.1f} TFLOP/s modelled")
        for (core, pipe), u in self.utilisation().items():
            if u > 0:
                lines.append(f"  {core:5s} {pipe:5s} busy {u * 100:5.1f}%")
        return "\n".join(lines)

    def chrome_trace(self, path: str) -> None:
        """Write the block's timeline as Chrome-trace JSON (times in microseconds, modelled)."""
        us = 1.0 / (self.clock_ghz * 1e3)
        ev = [{"name": label, "ph": "X", "pid": core, "tid": pipe, "ts": start * us,
               "dur": max(n, 1) * us, "args": {"cycles": n, "start_cycle": start}}
              for core, pipe, label, start, n in self.events]
        ev += [{"name": "process_name", "ph": "M", "pid": c, "args": {"name": f"{c} (modelled)"}}
               for c in dict.fromkeys(e[0] for e in self.events)]
        doc = {"traceEvents": ev, "displayTimeUnit": "ns",
               "otherData": {"model": self.model, "note": "modelled by tegula's timing model, not "
                             "measured", "kernel": self.kernel, "machine": self.machine,
                             "block_cycles": self.block_cycles}}
        with open(path, "w") as f:
            json.dump(doc, f)


class _Block:
    """The discrete-event simulation of one block (see the module docstring)."""

    def __init__(self, streams: list, m: Any):
        self.streams, self.m = streams, m
        n = len(streams)
        self.ptr = [0] * n
        self.t_issue = [0] * n
        self.queues = [{p: [] for p in PIPES} for _ in range(n)]
        self.free = {(c, p): 0 for c in range(n) for p in PIPES}
        self.done = {(c, p): 0 for c in range(n) for p in PIPES}   # latest finish so far
        self.flags: dict = {}     # (core, src, dst, id) -> [fire times]
        self.cross: dict = {}     # (core, flag, from) -> [arrival times]
        self.busy: dict = {}
        self.events: list = []
        self.mma = 0

    def cost(self, ins: Any) -> cost.Cost:
        c = getattr(ins, "_cost", None)
        if c is None:
            c = ins._cost = cost.op_cost(ins.node, self.m, ins.pipe)
        return c

    def candidates(self) -> list:
        out = []
        for c, s in enumerate(self.streams):
            if self.ptr[c] < len(s):
                ins = s[self.ptr[c]]
                t = self.t_issue[c]
                if ins.kind == "all":
                    if not any(self.queues[c].values()):
                        out.append((max(t, max(self.done[(c, p)] for p in PIPES)), 0, c, None))
                elif ins.kind == "xwait":
                    keys = self._xkeys(c, ins.flag)
                    if all(self.cross.get(k) for k in keys):
                        out.append((max([t] + [self.cross[k][0] for k in keys]), 0, c, None))
                else:
                    out.append((t, 0, c, None))
            for p, q in self.queues[c].items():
                if not q:
                    continue
                ins, t_in = q[0]
                start = max(t_in, self.free[(c, p)])
                if ins.kind == "wait":
                    key = (c,) + ins.event + (ins.flag,)
                    if not self.flags.get(key):
                        continue
                    start = max(start, self.flags[key][0])
                elif ins.kind == "barrier":
                    start = max(start, self.done[(c, p)])
                out.append((start, 1, c, p))
        return out

    def run(self) -> int:
        while True:
            cands = self.candidates()
            if not cands:
                break
            t, kind, c, p = min(cands, key=lambda x: (x[0], x[1], x[2], x[3] or ""))
            if kind == 0:
                self.dispatch(c, t)
            else:
                self.execute(c, p, t)
        if any(self.ptr[c] < len(s) or any(self.queues[c].values()) for c, s in enumerate(self.streams)):
            raise SyncError("the timing model found no instruction able to run (a deadlock; the "
                            "emulator's run of the same kernel names the waits)")
        return max(list(self.done.values()) + self.t_issue)

    def dispatch(self, c: int, t: int) -> None:
        ins = self.streams[c][self.ptr[c]]
        self.ptr[c] += 1
        if ins.kind == "xwait":
            for k in self._xkeys(c, ins.flag):
                self.cross[k].pop(0)
            self.t_issue[c] = t + cost.SCALAR_ISSUE
            return
        if ins.kind == "all":
            self.t_issue[c] = t + cost.SCALAR_ISSUE
            return
        self.queues[c][ins.pipe].append((ins, t))
        self.t_issue[c] = t + cost.SCALAR_ISSUE

    def execute(self, c: int, p: str, t: int) -> None:
        ins, _ = self.queues[c][p].pop(0)
        key = (c, p)
        if ins.kind == "op":
            k = self.cost(ins)
            self.free[key] = t + k.ii
            self.done[key] = max(self.done[key], t + k.latency)
            name = (CORE_NAMES[c], p)
            self.busy[name] = self.busy.get(name, 0) + k.ii
            self.events.append((CORE_NAMES[c], p, ins.what(), t, k.latency))
            if isinstance(ins.node, Mma) and c == 0:
                self.mma += k.ii - (cost.MMAD_STATE if self.m.name != "a5" else 0)
        elif ins.kind == "set":   # does not hold its pipe; fires once the pipe's earlier work is done
            fire = max(t, self.done[key]) + cost.FLAG_LATENCY
            self.flags.setdefault((c,) + ins.event + (ins.flag,), []).append(fire)
        elif ins.kind == "wait":
            self.flags[(c,) + ins.event + (ins.flag,)].pop(0)
            self.free[key] = t + 1
        elif ins.kind == "barrier":
            self.free[key] = t + 1
        elif ins.kind == "xset":
            fire = max(t, self.done[key]) + cost.CROSS_FLAG_LATENCY
            for tgt in self._xtargets(c, ins):
                self.cross.setdefault(tgt, []).append(fire)

    def _xtargets(self, c: int, ins: Any) -> list:
        return cross_targets(c, ins)

    def _xkeys(self, c: int, flag: int) -> list:
        return cross_keys(c, flag)


def _flops(streams: list) -> float:
    out = 0.0
    for ins in streams[0]:
        if ins.kind == "op" and isinstance(ins.node, Mma):
            a, cc = ins.node.A, ins.node.C
            ext = [int(getattr(e, "value", e)) for e in cc.extents if int(getattr(e, "value", e)) != 1]
            aext = [int(getattr(e, "value", e)) for e in a.extents if int(getattr(e, "value", e)) != 1]
            m, n = (ext + [1, 1])[:2] if len(ext) >= 2 else (ext[0] if ext else 1, 1)
            k = aext[0] if ins.node.transpose_A else aext[-1]
            out += 2.0 * m * n * k
    return out


def model(func: Any, machine: Any = None, scalars: Optional[dict] = None) -> Timing:
    """The modelled time of a lowered NPU kernel (a compiled ``ascend-emu`` kernel, its artifact,
    or the lowered PrimFunc with ``machine``). ``scalars``: values of scalar parameters by name."""
    art = getattr(func, "artifact", func)
    if machine is None:
        machine = getattr(art, "machine", None)
    func = getattr(art, "lowered", art)
    if not isinstance(func, PrimFunc) or machine is None:
        raise ArgumentError("timing.model takes a kernel compiled for ascend-emu (or a lowered "
                            "PrimFunc and its machine)")
    scalars = scalars or {}
    ctx = Ctx()
    env: list = [None] * _SLOTS
    for p in func.params:
        if isinstance(p, Buffer):
            for d in p.shape:
                if isinstance(d, Var):
                    if d.name not in scalars:
                        raise ArgumentError(f"timing.model: give the dynamic dimension '{d.name}' "
                                            f"of '{p.name}' in scalars=")
                    env[ctx.slot(d)] = np_scalar(d.dtype, scalars[d.name])
        else:
            if p.name not in scalars:
                raise ArgumentError(f"timing.model: give the scalar parameter '{p.name}' in scalars=")
            env[ctx.slot(p)] = np_scalar(p.dtype, scalars[p.name])
    kernels: list = []
    post_order_visit(func.body, lambda n: kernels.append(n) if isinstance(n, NpuKernel) else None)
    total, busy, events, mma, flops, waves_all, grid_all = 0, {}, [], 0, 0.0, 0, 0
    for k in kernels:
        issuer = Issuer(k, ctx, machine)
        cslot, vslot = ctx.slot(k.block_vars[0]), ctx.slot(k.sub_var)
        grid = int(issuer.val(k.grid[0], env))
        streams = []
        for core in range(3):
            cenv = list(env)
            cenv[cslot] = np_scalar(k.block_vars[0].dtype, 0)
            cenv[vslot] = np_scalar(k.sub_var.dtype, max(core - 1, 0))
            for b in k.allocs:
                if b.scope == "local.var":
                    import numpy as np
                    init = k.alloc_inits.get(b)
                    cenv[ctx.slot(b)] = np.array([issuer.val(init, cenv) if init is not None else 0],
                                                 b.dtype.np)
            mem = Memory({}, {}, k.annotations["offsets"], k.annotations.get("layouts", {}))
            streams.append(issuer.issue(cenv, core, mem))
        blk = _Block(streams, machine)
        cycles = blk.run()
        waves = math.ceil(grid / machine.cores_aic)
        total += cycles * waves
        for key, v in blk.busy.items():
            busy[key] = busy.get(key, 0) + v
        events += blk.events
        mma += blk.mma
        flops += _flops(streams) * grid
        waves_all, grid_all = waves_all + waves, grid_all + grid
    if not kernels:
        raise ArgumentError(f"{func.name} has no NPU kernel to model")
    block_cycles = total // max(waves_all, 1) if len(kernels) == 1 else total
    return Timing(func.name, machine.name, cost.MODEL_VERSION, int(block_cycles),
                  waves_all if len(kernels) == 1 else 1, grid_all, machine.clock_ghz, busy,
                  events, mma, flops)


__all__ = ["Timing", "model", "BARRIER_PIPES"]
