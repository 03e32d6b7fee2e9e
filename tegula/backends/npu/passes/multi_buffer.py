"""MultiBuffer: a ``T.Pipelined`` loop gets the buffer versions AutoSchedule chose (its
``versions`` annotation, buffer -> count), each buffer used in turn (version ``k % n`` in
iteration ``k``), so the load of iteration k + 1 can run while iteration k computes. A loop
AutoSchedule did not schedule with ``num_stages=S`` (S >= 2) gets S versions of every NPU buffer
a copy from global memory fills inside it. Only buffers used nowhere else are versioned.
InsertSync then orders iteration k's reads of a version
before iteration k + S's load into it with ring flags (one id per version).

Before::

    A_L1 = T.alloc_L1((64, 32), "float16")
    for k in T.Pipelined(4, num_stages=2):
        T.copy(A[bx * 64, k * 32], A_L1)
        T.gemm_v0(A_L1, B_L1, C_L0, init=k == 0)

After::

    A_L1 = T.alloc_L1((2, 64, 32), "float16")
    for k in T.Pipelined(4, num_stages=2):
        T.copy(A[bx * 64, k * 32], A_L1[k % 2, :, :])
        T.gemm_v0(A_L1[k % 2, :, :], B_L1, C_L0, init=k == 0)
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import const
from tegula.ir.npu import NPU_SCOPES, NpuKernel
from tegula.ir.stmt import Copy, For, PrimFunc, Reduce, Stmt
from tegula.ir.visitor import Mutator, post_order_visit

VERSIONS = "versions"  # For annotation: buffer name -> number of versions (read by InsertSync)


def _regions(s: Any) -> list:
    out: list = []
    post_order_visit(s, lambda n: out.append(n) if isinstance(n, BufferRegion) else None)
    return out


class _Version(Mutator):
    """Rewrite every region of the versioned buffers inside one loop body."""

    def __init__(self, new: dict, var: Any):
        super().__init__()
        self.new, self.var = new, var

    def visit_BufferRegion(self, r: BufferRegion) -> BufferRegion:
        nb = self.new.get(r.buffer)
        if nb is None:
            return r
        return BufferRegion(nb, ((self.var % nb.shape[0], 1),) + tuple(r.ranges), span=r.span)

    def visit_Reduce(self, s: Reduce) -> Stmt:
        out = self.generic_visit(s)
        if s.src.buffer in self.new:
            out = dataclasses.replace(out, dim=s.dim + 1)
        return out


class _Kernel(Mutator):
    def __init__(self, k: NpuKernel):
        super().__init__()
        self.k = k
        self.added: dict = {}

    def visit_For(self, s: For) -> Stmt:
        stages = int(s.annotations.get("num_stages", 0) or 0)
        preset = s.annotations.get(VERSIONS)   # AutoSchedule's choice, buffer name -> versions
        body = self.visit(s.body)
        if s.kind != "pipelined" or (preset is None and stages < 2) or preset == {}:
            return s if body is s.body else dataclasses.replace(s, body=body)
        inside = {id(r) for r in _regions(body)}
        outside = {r.buffer for r in _regions(self.k.body) if id(r) not in inside}
        if preset is None:
            filled = []
            post_order_visit(body, lambda n: filled.append(n.dst.buffer) if isinstance(n, Copy)
                             and n.src.buffer.scope == "global" and n.dst.buffer.scope in NPU_SCOPES
                             else None)
            counts = {b: stages for b in dict.fromkeys(filled)}
        else:
            bufs = {r.buffer.name: r.buffer for r in _regions(body)}
            counts = {bufs[n]: v for n, v in preset.items() if n in bufs and v > 1}
        new = {}
        for b, n in counts.items():
            if b in outside or b in self.added:
                continue
            new[b] = Buffer(b.name, (n,) + tuple(b.shape), b.dtype, b.scope, span=b.span)
        if not new:
            return dataclasses.replace(s, body=body)
        self.added.update(new)
        body = _Version(new, s.var).visit(body)
        ann = {**s.annotations, VERSIONS: {nb.name: nb.shape[0] for nb in new.values()}}
        return dataclasses.replace(s, body=body, annotations=ann)


class _Kernels(Mutator):
    def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
        m = _Kernel(k)
        body = m.visit(k.body)
        if not m.added:
            return k
        allocs = tuple(m.added.get(b, b) for b in k.allocs)
        return dataclasses.replace(k, body=body, allocs=allocs)


def multi_buffer(func: PrimFunc) -> PrimFunc:
    """MultiBuffer over every NPU kernel of ``func``."""
    return func.with_body(_Kernels().visit(func.body))


__all__ = ["multi_buffer", "VERSIONS", "const"]
