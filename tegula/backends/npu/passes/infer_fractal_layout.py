"""InferFractalLayout: every NPU buffer gets the fractal layout its memory requires, padded to
whole fractals (``tegula/backends/npu/layout.py`` defines them). L1 holds NZ (the copy from GM
converts ND -> NZ on MTE2), L0A ZZ and L0B ZN (MTE1 converts on the way), L0C NZ with 16 x 16
fractals (FixPipe converts NZ -> ND on the way out); UB is ND. The result is the kernel
annotation ``layouts``.

Before::

    with T.Kernel(1, is_npu=True) as (cid, vid):
        A_l1 = T.alloc_L1((30, 64), "float16")
        C_l0c = T.alloc_L0C((30, 32), "float32")

After::

    with T.Kernel(1, is_npu=True) as (cid, vid):
        A_l1 = T.alloc_L1((30, 64), "float16")      # NZ(16x16), padded to (32, 64)
        C_l0c = T.alloc_L0C((30, 32), "float32")    # NZ(16x16), padded to (32, 32)
"""
from __future__ import annotations

import dataclasses

from tegula.ir.npu import NpuKernel
from tegula.ir.stmt import PrimFunc, Stmt
from tegula.ir.visitor import Mutator
from tegula.backends.npu.layout import ND, Fractal
from tegula.backends.npu.machine import FRACTAL_ROWS, c0


def layout_for(scope: str, itemsize: int) -> Fractal:
    """The fractal layout a buffer of ``scope`` gets."""
    if scope == "l0c":
        return Fractal("NZ", FRACTAL_ROWS, FRACTAL_ROWS)
    kind = {"l1": "NZ", "l0a": "ZZ", "l0b": "ZN"}.get(scope)
    return Fractal(kind, FRACTAL_ROWS, c0(itemsize)) if kind else ND


class _Kernels(Mutator):
    def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
        layouts = {b: layout_for(b.scope, b.dtype.itemsize) for b in k.allocs
                   if b.scope in ("l1", "l0a", "l0b", "l0c", "ub")}
        return dataclasses.replace(k, annotations={**k.annotations, "layouts": layouts})


def infer_fractal_layout(func: PrimFunc) -> PrimFunc:
    """InferFractalLayout over every NPU kernel of ``func``."""
    return func.with_body(_Kernels().visit(func.body))
