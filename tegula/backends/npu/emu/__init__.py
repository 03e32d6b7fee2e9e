"""The ``ascend-emu`` target: the lowered NPU program run on the CPU, pipe by pipe.

``execute(lowered, args, machine, seed)`` runs every block in turn: for each of its three cores
(AIC, AIV0, AIV1) the scalar unit issues the core's instruction stream (:mod:`.trace`) into
byte-addressed memories of the machine's real capacities (L1, L0A, L0B, L0C on the AIC, UB on
each AIV; fresh memory reads as NaN), buffers at the offsets and in the fractal layouts the
pipeline chose; then :mod:`.sim` advances the pipes in a seeded adversarial order and checks the
synchronisation. Findings raise one :class:`~tegula.errors.RaceError` listing them all (or warn,
with ``tegula.emu_races_as_warnings``); a deadlock raises :class:`~tegula.errors.SyncError`.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from tegula.errors import ArgumentError, RaceError, ResourceError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.npu import NpuKernel
from tegula.ir.stmt import PrimFunc
from tegula.ir.visitor import post_order_visit
from tegula.backends.closure import np_scalar
from tegula.backends.interp.context import Ctx
from tegula.backends.npu.emu.sim import Block, Report
from tegula.backends.npu.emu.trace import Issuer, Memory
from tegula.backends.npu.passes.plan_memory import buffer_bytes


_SLOTS = 1 << 14  # env slots (variables and buffers of one kernel)


def _memories(k: NpuKernel, m: Any, kind: str) -> dict:
    """Fresh memories of one core, after checking each buffer's place against the machine."""
    offsets, layouts = k.annotations["offsets"], k.annotations.get("layouts", {})
    mems = {}
    for scope, bk in m.buffers.items():
        if bk.core == kind:
            mems[scope] = np.full(bk.capacity, 0xFF, np.uint8)
    for b in k.allocs:
        if b.scope not in m.buffers:
            continue
        bk, off, n = m.buffer(b.scope), offsets[b], buffer_bytes(b, layouts)
        if off % bk.align:
            raise ResourceError(f"buffer '{b.name}' is at {bk.name}+{off}, not {bk.align}-byte aligned",
                                b.span)
        if off + n > bk.capacity:
            raise ResourceError(f"buffer '{b.name}' ({n} bytes at {bk.name}+{off}) ends past the "
                                f"{bk.capacity} bytes of {bk.name}", b.span)
    return mems


def execute(func: PrimFunc, args: Sequence[Any], machine: Any, seed: int = 0,
            as_warnings: bool = False, strict: bool = False) -> None:
    """Run lowered ``func`` on numpy ``args`` (written in place); see the module docstring.
    ``strict``: also report two cores writing identical values to the same GM bytes."""
    if len(args) != len(func.params):
        raise ArgumentError(f"{func.name} takes {len(func.params)} argument(s), got {len(args)}")
    ctx = Ctx()
    env: list = [None] * _SLOTS
    globals_: dict = {}
    for p, a in zip(func.params, args):
        if isinstance(p, Buffer):
            if not isinstance(a, np.ndarray) or a.dtype != p.dtype.np or a.ndim != len(p.shape) or \
                    any(isinstance(d, int) and d != n for d, n in zip(p.shape, a.shape)):
                raise ArgumentError(f"{func.name}: parameter '{p.name}' expects a {p.dtype.name} array "
                                    f"of shape {tuple(p.shape)}")
            globals_[p] = a
            env[ctx.slot(p)] = a
            for d, n in zip(p.shape, a.shape):  # dynamic dimensions bind from the argument
                if isinstance(d, Var):
                    env[ctx.slot(d)] = np_scalar(d.dtype, n)
        else:
            env[ctx.slot(p)] = np_scalar(p.dtype, a)
    kernels: list = []
    post_order_visit(func.body, lambda n: kernels.append(n) if isinstance(n, NpuKernel) else None)
    report = Report()
    gm = {p.name: a.reshape(-1).view(np.uint8) for p, a in globals_.items() if a.flags.c_contiguous}
    for k in kernels:
        issuer = Issuer(k, ctx, machine)
        cslot, vslot = ctx.slot(k.block_vars[0]), ctx.slot(k.sub_var)
        vars_ = [b for b in k.allocs if b.scope == "local.var"]
        grid = int(issuer.val(k.grid[0], env))
        for c in range(grid):
            streams = []
            for core in range(3):
                cenv = list(env)
                cenv[cslot] = np.int32(c)
                cenv[vslot] = np.int32(max(core - 1, 0))
                for b in vars_:
                    init = k.alloc_inits.get(b)
                    cenv[ctx.slot(b)] = np.array([issuer.val(init, cenv) if init is not None else 0],
                                                 b.dtype.np)
                mem = Memory(_memories(k, machine, "C" if core == 0 else "V"), globals_,
                             k.annotations["offsets"], k.annotations.get("layouts", {}))
                streams.append(issuer.issue(cenv, core, mem))
            if ctx.slots.size > _SLOTS:
                raise AssertionError("the emulator's env is too small for this kernel")
            with np.errstate(all="ignore"):
                Block(streams, machine, report, seed, c, gm, strict).run()
    if report.items:
        msg = f"the Ascend emulator found {len(report.items)} problem(s):\n  " + "\n  ".join(report.items)
        if as_warnings:
            warnings.warn(msg, stacklevel=2)
        else:
            raise RaceError(msg)
