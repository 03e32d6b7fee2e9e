"""TmaStores (sm_90a): copies of whole tiles to global memory go through the copy engine
(``cp.async.bulk.tensor`` from shared memory) where a tensor map can describe the box.

Two forms are taken, where they stand in a kernel's top-level statements, a warp-specialized
region's or the body of a serial loop among them (code that every thread of the block, or of the
region, runs):

- ``T.copy(S, C[...])`` with ``S`` a whole 2-d shared tile: marked ``tma_store``, which
  ``lower_tma.lower_tma_store`` lowers (a proxy fence by every thread, then one thread's stores,
  their commit and the wait until they have read the tile);
- ``T.copy(F, C[...])`` with ``F`` a whole fragment: staged through a shared tile of C's dtype
  made here (``F_tma``), which layout inference lays out in the copy engine's swizzled blocks,
  then stored as above; only where the kernel's shared memory, the new tile included, fits the
  arch without sharing bytes.

``force`` (``tegula.tma_store``) True takes both forms wherever they apply, False neither. By
default the first form is taken (TileLang does the same), the second for a GEMM's accumulator
(a fragment gemms accumulate into that no other op writes inside their loop: an epilogue after
the loop may; attention's accumulator, rescaled in the loop, is left; :data:`STAGE_ACCUMULATORS`). ``tl.disable_tma_lower`` removes the pass.

Before/after (the second form)::

    T.copy(C_local, C[by * 128, bx * 256])     C_local_tma = T.alloc_shared((128, 256), "float16")
                                               T.copy(C_local, C_local_tma)
                                               T.copy(C_local_tma, C[by * 128, bx * 256])  # tma_store

The box may run past the tensor's edge: the copy engine writes only the elements inside it, as
``T.copy`` drops out-of-bounds writes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tegula.ir import expr as E
from tegula.ir.buffer import SHARED_DYN, Buffer, BufferRegion
from tegula.ir.stmt import (WARP_SPECIALIZE, Atomic, AttrStmt, BufferStore, Copy, CumSum, For, Gemm, IfThenElse, Kernel,
                            PrimFunc, Reduce, SeqStmt, Stmt, seq)
from tegula.ir.visitor import Mutator, post_order_visit, uses_var
from tegula.backends.cuda.machine import align, smem_limit
from tegula.backends.cuda.passes.lower_tile_ops.context import whole
from tegula.backends.cuda.analysis.tma import tma_box_ok, tma_store_ok

# Whether, by default, a gemm accumulator stored from registers (``T.copy(C_local, C[...])``) is
# staged through shared memory for a TMA store. Measured on an H200 (BENCHMARKS.md): +5-7% at
# 4096^3 (fp16, bf16; 128x256x64 tiles), +2-3% at M = 64.
STAGE_ACCUMULATORS = True
# bytes a swizzled tile may lose to its 1024-byte alignment
_SWIZZLE_SLACK = 1024


def _shared_bytes(k: Kernel) -> int:
    return sum(align(int(b.numel()) * b.dtype.itemsize) + _SWIZZLE_SLACK for b in k.allocs
               if b.is_shared and all(isinstance(d, int) for d in b.shape))


class _Stores:
    def __init__(self, k: Kernel, limit: int, force: Optional[bool]):
        self.force = force
        self.budget = limit - _shared_bytes(k)
        self.new: list[Buffer] = []
        self.accumulators = _plain_accumulators(k)
        self.thread_var = k.thread_var

    def varies(self, *es: Any) -> bool:
        """Whether any of ``es`` depends on the thread index (thread-level code)."""
        return self.thread_var is not None and any(uses_var(e, [self.thread_var]) for e in es
                                                   if isinstance(e, E.Expr))

    def copy(self, c: Copy) -> Stmt:
        s, d = c.src, c.dst
        if s.buffer.is_shared:
            if self.force is False or not tma_store_ok(c):
                return c
            return dataclasses.replace(c, annotations={**c.annotations, "tma_store": True})
        if not (s.buffer.is_fragment and d.buffer.is_global and whole(s) and s.buffer.ndim == 2):
            return c
        if not (self.force or (self.force is None and STAGE_ACCUMULATORS and s.buffer in self.accumulators)):
            return c
        shape = tuple(s.buffer.shape)
        if not all(isinstance(x, int) for x in shape):
            return c
        tile = Buffer(f"{s.buffer.name}_tma", shape, d.buffer.dtype, SHARED_DYN, span=c.span)
        full = BufferRegion(tile, tuple((E.const(0), int(x)) for x in shape), span=c.span)
        store = Copy(full, d, {**c.annotations, "tma_store": True}, span=c.span)
        nbytes = align(tile.numel() * tile.dtype.itemsize) + _SWIZZLE_SLACK
        if not tma_box_ok(store, d, full) or nbytes > self.budget:
            return c
        self.budget -= nbytes
        self.new.append(tile)
        return seq(Copy(s, full, dict(c.annotations), span=c.span), store)

    def stmts(self, s: Stmt) -> Stmt:
        """``s`` with the copies of its uniform statements taken."""
        if isinstance(s, Copy):
            return self.copy(s)
        if isinstance(s, SeqStmt):
            out = [self.stmts(x) for x in s.stmts]
            return s if all(a is b for a, b in zip(out, s.stmts)) else dataclasses.replace(s, stmts=tuple(out))
        if isinstance(s, For) and s.kind == "serial" and not self.varies(s.start, s.extent):
            body = self.stmts(s.body)  # each store waits for its reads: the next iteration may rewrite
            return s if body is s.body else dataclasses.replace(s, body=body)
        if isinstance(s, AttrStmt) and s.key == WARP_SPECIALIZE:
            body = self.stmts(s.body)
            return s if body is s.body else dataclasses.replace(s, body=body)
        if isinstance(s, IfThenElse) and _region_sides(s):
            then, else_ = self.stmts(s.then), self.stmts(s.else_)
            return s if (then is s.then and else_ is s.else_) else dataclasses.replace(s, then=then, else_=else_)
        return s


def _plain_accumulators(k: Kernel) -> set:
    """Fragments gemms accumulate into that nothing else writes inside a loop holding a gemm: a
    GEMM's accumulator, also with an epilogue after its loop (bias, activation, scaling), but not
    attention's, which the softmax rescales between the gemms of each iteration."""
    accs: set = set()
    rescaled: set = set()

    def writes(s: Any) -> set:
        out: set = set()

        def see(n: Any) -> None:
            if isinstance(n, (Copy, Reduce, CumSum, Atomic)):
                out.add(n.dst.buffer)
            elif isinstance(n, BufferStore):
                out.add(n.buffer)
        post_order_visit(s, see)
        return out

    def see(n: Any) -> None:
        if isinstance(n, Gemm):
            accs.add(n.C.buffer)
        elif isinstance(n, For) and n.kind != "parallel":
            gemms: list = []
            post_order_visit(n.body, lambda g: gemms.append(g) if isinstance(g, Gemm) else None)
            if gemms:
                rescaled.update(writes(n.body))

    post_order_visit(k.body, see)
    return accs - rescaled


def _region_sides(s: IfThenElse) -> bool:
    """Both sides of ``s`` are warp-specialized regions (WarpSpecialize's producer / consumers)."""
    def region(b: Any) -> bool:
        while isinstance(b, SeqStmt) and len(b.stmts) == 1:
            b = b.stmts[0]
        return isinstance(b, AttrStmt) and b.key == WARP_SPECIALIZE
    return s.else_ is not None and region(s.then) and region(s.else_)


def tma_stores(func: PrimFunc, arch: str = "sm_90a", force: Optional[bool] = None) -> PrimFunc:
    """Store whole tiles to global memory by TMA in every kernel of ``func`` (``force``:
    ``tegula.tma_store``, both forms on or off; unset, see the module docstring; ``arch``: whose
    shared-memory limit bounds the staged tiles)."""
    limit = smem_limit(arch)

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            st = _Stores(k, limit, force)
            body = st.stmts(k.body)
            if body is k.body:
                return k
            return dataclasses.replace(k, body=body, allocs=tuple(k.allocs) + tuple(st.new))

    return M().visit(func)
