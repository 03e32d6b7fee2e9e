"""UseWgmma: mark the kernels of a function for Hopper's warpgroup MMA (sm_90a targets only).

The mark (``Kernel.annotations["wgmma"] = True``, on kernels with a ``T.gemm``) tells layout inference that ``T.gemm`` may run
on ``wgmma.mma_async``: gemms that :func:`~tegula.backends.cuda.passes.lower_tile_ops.lower_wgmma.wgmma_layout`
gives a layout get the wgmma accumulator layout and their shared operands the wgmma swizzled layout; the
others keep ``mma.sync``. The pipeline runs this pass on sm_90a unless the pass config
``tegula.disable_wgmma`` is set. Nothing else in the IR changes::

    with T.Kernel(...):                       with T.Kernel(...):   # annotations: wgmma=True
        T.gemm(A_s, B_s, C)                       T.gemm(A_s, B_s, C)
"""
from __future__ import annotations

from tegula.ir.stmt import Gemm, Kernel, PrimFunc
from tegula.ir.visitor import Mutator, post_order_visit


def use_wgmma(func: PrimFunc) -> PrimFunc:
    """Mark every kernel of ``func`` that has a ``T.gemm`` for wgmma."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            gemms: list = []
            post_order_visit(k.body, lambda n: gemms.append(n) if isinstance(n, Gemm) else None)
            if not gemms:
                return k
            ann = dict(k.annotations)
            ann["wgmma"] = True
            return Kernel(k.grid, k.threads, k.block_vars, k.allocs, k.body, dict(k.alloc_inits), ann,
                          thread_var=k.thread_var, span=k.span)

    return M().visit(func)
