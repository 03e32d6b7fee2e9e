"""Write a pass and hook it into the pipeline (``docs/passes.md`` walks through this file).

Two passes on a tiled GEMM:

- ``count_global_accesses``, an analysis: inserted after layout inference, it counts the elements
  the kernel loads from and stores to each global buffer (loop trip counts and grid included),
  prints the report and returns the kernel unchanged.
- ``row_major_shared``, a rewrite: it gives every shared tile the plain row-major layout instead of
  the XOR swizzle layout inference chose for the tiles tensor cores read. The trace diff shows the
  layout map change, then the addressing in the lowered code; the result does not change.

Both go in through ``pipeline_for(target).insert_after(...)``: after ``InferLayouts`` on the CUDA
targets (``cuda-emu`` runs here; ``cuda:sm_90a`` compiles here without a GPU), after ``input`` on
``cpu``, whose pipeline is empty (user passes run on the tile-level IR the interpreter runs; there
are no layouts there, so only the count applies).

Run it:  python examples/write_a_pass.py [--target cpu|cuda-emu|cuda:sm_90a]
"""
import argparse
import os
import sys
from collections import Counter
from typing import Optional

import numpy as np

import tegula as tilelang
from tegula.ir.stmt import Copy, Kernel, PrimFunc
from tegula.ir.visitor import Mutator, Visitor
from tegula.layout import RowMajor, Swizzled
from tegula.target import kind_of, parse_target
from tegula.tools import trace
from tegula.transform import Pass, Pipeline, pipeline_for

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm  # noqa: E402  (examples/gemm.py)


def matmul(M: int, N: int, K: int) -> PrimFunc:
    """The GEMM of ``examples/gemm.py`` with 64 x 64 tiles, two stages, fp16 in and out."""
    return gemm.matmul.get_tir(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2)


# -- an analysis pass ----------------------------------------------------------------------------

class _GlobalAccesses(Visitor):
    """Elements loaded from / stored to each global buffer, times the trip counts of the loops
    around them and the blocks of the grid. Both branches of an ``if`` count; a loop of dynamic
    extent counts once."""

    def __init__(self) -> None:
        self.loads: Counter = Counter()
        self.stores: Counter = Counter()
        self.times = 1

    def _scaled(self, n: int, body) -> None:
        saved, self.times = self.times, self.times * n
        self.visit(body)
        self.times = saved

    def visit_Kernel(self, k: Kernel) -> None:
        blocks = 1
        for g in k.grid:
            blocks *= g if isinstance(g, int) else 1
        self._scaled(blocks, k.body)

    def visit_For(self, f) -> None:
        self.visit(f.start)
        self._scaled(f.extent if isinstance(f.extent, int) else 1, f.body)

    def visit_Copy(self, c: Copy) -> None:
        n = 1
        for e in c.src.extents:
            n *= e if isinstance(e, int) else 1
        if c.src.buffer.scope == "global":
            self.loads[c.src.buffer.name] += n * self.times
        if c.dst.buffer.scope == "global":
            self.stores[c.dst.buffer.name] += n * self.times
        self.generic_visit(c)

    def visit_BufferLoad(self, e) -> None:
        if e.buffer.scope == "global":
            self.loads[e.buffer.name] += self.times
        self.generic_visit(e)

    def visit_BufferStore(self, s) -> None:
        if s.buffer.scope == "global":
            self.stores[s.buffer.name] += self.times
        self.generic_visit(s)


def global_accesses(func: PrimFunc) -> dict:
    """``{buffer name: (elements loaded, elements stored)}`` for each global parameter."""
    v = _GlobalAccesses()
    v.visit(func.body)
    return {b.name: (v.loads[b.name], v.stores[b.name]) for b in func.buffer_params()}


def count_global_accesses(func: PrimFunc) -> PrimFunc:
    """Prints the elements each global buffer loads and stores; changes nothing."""
    rows = global_accesses(func)
    print(f"global memory accesses of '{func.name}' (elements):")
    print(f"  {'buffer':<8}{'loads':>12}{'stores':>12}")
    for name, (loads, stores) in rows.items():
        print(f"  {name:<8}{loads:>12}{stores:>12}")
    return func


# -- a rewriting pass ----------------------------------------------------------------------------

class _RowMajor(Mutator):
    def visit_Kernel(self, k: Kernel) -> Kernel:
        layouts = k.annotations.get("layout_map") or {}
        new = {b: RowMajor(lay.shape) if isinstance(lay, Swizzled) else lay for b, lay in layouts.items()}
        return Kernel(k.grid, k.threads, k.block_vars, k.allocs, k.body, k.alloc_inits,
                      {**k.annotations, "layout_map": new}, k.thread_var, span=k.span)


def row_major_shared(func: PrimFunc) -> PrimFunc:
    """Row-major shared tiles instead of the swizzle layout inference chose."""
    return _RowMajor().visit(func)


# -- hooking them in -----------------------------------------------------------------------------

def with_passes(target: str) -> Pipeline:
    """The target's pipeline with the count (and, where there are layouts, the rewrite) in it."""
    p = pipeline_for(target)
    if "InferLayouts" not in p:  # cpu: the tile-level IR, before the interpreter runs it
        return p.insert_after("input", Pass("CountGlobalAccesses", count_global_accesses))
    p = p.insert_after("InferLayouts", Pass("RowMajorShared", row_major_shared))
    return p.insert_after("InferLayouts", Pass("CountGlobalAccesses", count_global_accesses))


def main(M: int = 128, N: int = 128, K: int = 128, target: str = "cpu",
         seed: Optional[int] = None) -> float:
    """Build with both passes, show what the rewrite did, run where the target runs here; returns
    the largest relative error against float64 (0.0 when the target only compiles here)."""
    func = matmul(M, N, K)
    p = with_passes(target)
    print(p)
    kernel = tilelang.compile(func, out_idx=[-1], target=target, pipeline=p)
    if "RowMajorShared" in p:
        tr = trace(func, target=target, pipeline=p)
        print(tr.diff("CountGlobalAccesses", "RowMajorShared"))
    if not kind_of(parse_target(target)).runs_on_host:
        return 0.0
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    c = kernel(a, b)
    err = float(np.max(np.abs(c - ref)) / np.max(np.abs(ref)))
    print(f"max relative error vs float64: {err:.2e}")
    assert err < 1e-2  # C is float16
    return err


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--M", type=int, default=128)
    ap.add_argument("--N", type=int, default=128)
    ap.add_argument("--K", type=int, default=128)
    ap.add_argument("--target", default="cpu")
    args = ap.parse_args()
    main(args.M, args.N, args.K, target=args.target)
