"""PlanNpuMemory: byte offsets of every NPU buffer in its memory, aligned as the machine requires,
and the capacity check: a kernel whose buffers do not fit is a ResourceError naming every buffer
of the memory and its bytes. Buffers are placed one after another in allocation order (a buffer
with ``versions`` takes that many padded copies; one given a ``T.annotate_address`` sits there,
checked for alignment and capacity at that line). The result is the kernel annotation
``offsets`` (buffer -> byte offset). A kernel with row reductions on UB also gets a scratch area
after its UB buffers, as large as the largest reduced tile (``scratch``: (offset, bytes)); the
emitted row-reduction instructions use it as their work space, never the source tile.

Before::

    a_ub = T.alloc_ub((64, 128), "float16")
    b_ub = T.alloc_ub((1, 8), "float32")
    c_ub = T.alloc_ub((64, 128), "float16")

After (UB, 32-byte alignment)::

    a_ub at UB+0 (16384 bytes), b_ub at UB+16384 (32 bytes), c_ub at UB+16416 (16384 bytes)
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tegula.errors import ResourceError
from tegula.ir.npu import NpuKernel
from tegula.ir.stmt import PrimFunc, Reduce, Stmt
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.npu.layout import ND


def buffer_bytes(b: Any, layouts: dict) -> int:
    """Bytes ``b`` occupies in its memory (padded to whole fractals)."""
    return layouts.get(b, ND).numel(tuple(b.shape)) * b.dtype.itemsize


def plan_kernel(k: NpuKernel, m: Any) -> NpuKernel:
    layouts = k.annotations.get("layouts", {})
    offsets: dict = {}
    used: dict = {}
    fixed = k.annotations.get("addresses", {})
    for b in k.allocs:
        if b.scope not in m.buffers:
            continue
        kind = m.buffer(b.scope)
        if b.name in fixed:  # T.annotate_address
            at, span = fixed[b.name]
            end = at + buffer_bytes(b, layouts)
            if at % kind.align:
                raise ResourceError(f"T.annotate_address puts '{b.name}' at {kind.name}+{at}, not "
                                    f"{kind.align}-byte aligned", span,
                                    hint=f"use a multiple of {kind.align}")
            if end > kind.capacity:
                raise ResourceError(f"T.annotate_address puts '{b.name}' at {kind.name}+{at}: its "
                                    f"{buffer_bytes(b, layouts)} bytes end at {end} > {kind.capacity}, "
                                    f"the {kind.name} of {m.name}", span)
            offsets[b] = at
            used[b.scope] = max(used.get(b.scope, 0), end)
            continue
        at = -(-used.get(b.scope, 0) // kind.align) * kind.align
        offsets[b] = at
        used[b.scope] = at + buffer_bytes(b, layouts)
    ann: dict = {}
    red: list = []
    post_order_visit(k.body, lambda n: red.append(buffer_bytes(n.src.buffer, layouts) //
                                                  max(1, int(n.src.buffer.shape[0]) if len(n.src.buffer.shape) > 2 else 1))
                     if isinstance(n, Reduce) and n.src.buffer.scope == "ub" else None)
    if red:
        ub = m.buffer("ub")
        at = -(-used.get("ub", 0) // ub.align) * ub.align
        ann["scratch"] = (at, max(red))
        used["ub"] = at + max(red)
    for scope, n in used.items():
        kind = m.buffer(scope)
        if n > kind.capacity:
            parts = [f"{b.name} {buffer_bytes(b, layouts)} bytes at +{offsets[b]}"
                     for b in k.allocs if b.scope == scope]
            if scope == "ub" and "scratch" in ann:
                parts.append(f"row-reduction scratch {ann['scratch'][1]} bytes at +{ann['scratch'][0]}")
            raise ResourceError(f"{kind.name} overflows on {m.name}: the kernel's {kind.name} buffers "
                                f"need {n} bytes > {kind.capacity} ({', '.join(parts)})", k.span,
                                hint="use smaller tiles or fewer pipeline stages")
    return dataclasses.replace(k, annotations={**k.annotations, "offsets": offsets,
                                               "machine": m.name, **ann})


def plan_npu_memory(func: PrimFunc, m: Any) -> PrimFunc:
    """PlanNpuMemory over every NPU kernel of ``func`` for machine ``m``."""
    class _Kernels(Mutator):
        def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
            return plan_kernel(k, m)
    return func.with_body(_Kernels().visit(func.body))
