"""LowerGemmV0: ``T.gemm_v0`` on L1 operands becomes explicit MTE1 moves into L0A / L0B and a
``T.mma`` on the cube, so later passes see each pipe's work.

Before::

    T.gemm_v0(A_l1, B_l1, C_l0c, init=True)

After::

    A_l1_l0a = T.alloc_L0A((128, 64), "float16")
    B_l1_l0b = T.alloc_L0B((64, 128), "float16")
    T.copy(A_l1, A_l1_l0a)
    T.copy(B_l1, B_l1_l0b)
    T.mma(A_l1_l0a, B_l1_l0b, C_l0c, init=True)

One pair of L0 buffers per distinct operand shape and dtype is shared by all gemm_v0 of a kernel.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tegula.ir.buffer import Buffer
from tegula.ir.npu import Mma, NpuKernel
from tegula.ir.stmt import Copy, PrimFunc, Stmt, seq
from tegula.ir.visitor import Mutator


class _Lower(Mutator):
    def __init__(self) -> None:
        super().__init__()
        self.new: dict = {}

    def _l0(self, region: Any, scope: str) -> Buffer:
        shape = tuple(e for e in region.extents if e != 1) or (1,)
        key = (scope, shape, region.dtype.name)
        if key not in self.new:
            self.new[key] = Buffer(f"{region.buffer.name}_{scope}", shape, region.dtype, scope,
                                   span=region.buffer.span)
        return self.new[key]

    def visit_Mma(self, s: Mma) -> Stmt:
        if s.A.buffer.scope != "l1":
            return s
        a0, b0 = self._l0(s.A, "l0a"), self._l0(s.B, "l0b")
        # "transpose": the mma reads this operand transposed (the emitters load it that way)
        return seq(Copy(s.A, a0.region(), {"transpose": True} if s.transpose_A else {}, span=s.span),
                   Copy(s.B, b0.region(), {"transpose": True} if s.transpose_B else {}, span=s.span),
                   Mma(a0.region(), b0.region(), s.C, s.transpose_A, s.transpose_B, s.init,
                       span=s.span))


class _Kernels(Mutator):
    def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
        low = _Lower()
        body = low.visit(k.body)
        if not low.new:
            return k
        return dataclasses.replace(k, body=body, allocs=k.allocs + tuple(low.new.values()))


def lower_gemm_v0(func: PrimFunc) -> PrimFunc:
    """LowerGemmV0 over every NPU kernel of ``func``."""
    return func.with_body(_Kernels().visit(func.body))
