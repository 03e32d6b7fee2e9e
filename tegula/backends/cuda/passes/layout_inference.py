"""Layout inference: choose how every fragment of a kernel is spread over its threads.

Works in levels, as DESIGN.md says:

1. **strict**: the accumulator of a ``T.gemm`` that runs on tensor cores gets the ``mma.sync``
   accumulator layout for the warp grid its ``policy`` picks; layouts from ``T.annotate_layout``.
2. **propagation**, to a fixed point: through ``T.Parallel`` loops (fragments indexed by the
   loop variables share the layout of the loop; one-dimensional fragments indexed by the first
   loop variable take the *rows* of it), through reductions along the last dimension (the
   destination holds the rows of the source) and through fragment-to-fragment copies.
3. **free choices** for what is left, in program order: a row layout for 2-d tiles, a flat
   vector layout otherwise, a replicated layout (every thread holds everything) for tiny ones;
   each choice is propagated before the next.

Two strict requirements that disagree are a :class:`~tegula.errors.LayoutError` naming both
buffers and their lines. Accesses that do not line up with the layouts chosen are still correct:
lowering stages such fragments through shared memory.

Shared tiles that tensor-core gemms read get an XOR swizzle (:func:`choose_shared_layouts`);
others are row-major; ``T.annotate_layout`` wins over both.

As the ``InferLayouts`` pass (:func:`infer_layouts_pass`) the plan is written into each kernel's
layout map, the annotation ``T.annotate_layout`` writes, where the trace shows it and a later pass
can change it before ``LowerTileOps`` reads it::

    C_local = T.alloc_fragment((128, 128), "float32")     C_local = T.alloc_fragment(...)
    m = T.alloc_fragment((128,), "float32")               m = T.alloc_fragment(...)
    T.gemm(A_s, B_s, C_local)                              T.annotate_layout({A_s: Swizzled(...),
    T.reduce_max(C_local, m, dim=1)                            C_local: MmaLayout(128, 128, 2, 2),
                                                               m: RowsOf(MmaLayout(...)), ...})
                                                           T.gemm(A_s, B_s, C_local) ...
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.errors import LayoutError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.stmt import Copy, For, Gemm, Kernel, PrimFunc, Reduce, BufferStore, parallel_nest
from tegula.ir.visitor import Mutator, Visitor, post_order_visit
from tegula.layout.fragment import (FlatLayout, Fragment, MmaLayout, Replicated, RowLayout,
                                    RowsOf, mma_warps)
from tegula.layout.shared import RowMajor, Swizzled

MMA_OPERANDS = {"float16": "float32", "bfloat16": "float32", "int8": "int32", "uint8": "int32"}


@dataclass
class LayoutPlan:
    """Layouts of a kernel's fragments and the warp grid of each tensor-core gemm."""

    fragments: dict = field(default_factory=dict)   # Buffer -> Fragment
    gemm_warps: dict = field(default_factory=dict)   # Gemm -> (wm, wn)
    origin: dict = field(default_factory=dict)       # Buffer -> (reason, span) of the layout

    def of(self, buf: Buffer) -> Fragment:
        return self.fragments[buf]


def gemm_on_tensor_cores(g: Gemm) -> bool:
    """True when a gemm's dtypes and operand scopes suit ``mma.sync``."""
    a, b, c = g.A.buffer, g.B.buffer, g.C.buffer
    if a.dtype.name not in MMA_OPERANDS or a.dtype != b.dtype:
        return False
    if MMA_OPERANDS[a.dtype.name] != c.dtype.name or c.scope != "local.fragment":
        return False
    if b.scope not in ("shared", "shared.dyn"):
        return False
    k = g.A.tile_shape()[0 if g.transpose_A else 1]
    kstep = 16 if a.dtype.bits == 16 else 32
    return isinstance(k, int) and k % kstep == 0


def _tile_mn(g: Gemm) -> tuple[int, int]:
    sc = g.C.tile_shape()
    return int(sc[0]), int(sc[1])


class _Collect(Visitor):
    """Gathers the facts inference works from, in program order."""

    def __init__(self) -> None:
        self.gemms: list[Gemm] = []
        self.reduces: list[Reduce] = []
        self.copies: list[Copy] = []
        self.loops: list[tuple[list[Var], list[Any], list[tuple[Buffer, tuple, Any]]]] = []
        self.order: list[Buffer] = []

    def visit_Gemm(self, g: Gemm) -> None:
        self.gemms.append(g)

    def visit_Reduce(self, r: Reduce) -> None:
        self.reduces.append(r)

    def visit_Copy(self, c: Copy) -> None:
        self.copies.append(c)

    def visit_For(self, f: For) -> None:
        if f.kind != "parallel":
            self.generic_visit(f)
            return
        vars_, exts, body = parallel_nest(f)
        self.loops.append((vars_, exts, [(b, idx, span) for b, idx, _, span in fragment_accesses(body)]))


def fragment_accesses(body: Any) -> list[tuple[Buffer, tuple, bool, Any]]:
    """Every element access of a fragment in ``body``: (buffer, indices, is_store, span)."""
    out: list = []

    class V(Visitor):
        def visit_BufferLoad(s, n: BufferLoad) -> None:
            if n.buffer.scope == "local.fragment":
                out.append((n.buffer, n.indices, False, n.span))
            s.generic_visit(n)

        def visit_BufferStore(s, n: BufferStore) -> None:
            if n.buffer.scope == "local.fragment":
                out.append((n.buffer, n.indices, True, n.span))
            s.generic_visit(n)

    V().visit(body)
    return out


def loop_pattern(vars_: list[Var], buf: Buffer, idx: tuple) -> Optional[str]:
    """How a fragment is indexed in a parallel loop: "full" (by all loop vars, in order),
    "rows" (1-d, by the first of two loop vars), or None (anything else)."""
    if len(idx) == len(vars_) and all(i is v for i, v in zip(idx, vars_)):
        return "full"
    if len(vars_) == 2 and len(idx) == 1 and idx[0] is vars_[0]:
        return "rows"
    return None


def infer_layouts(kernel: Kernel) -> LayoutPlan:
    """The layout plan of one kernel (see the module docstring)."""
    plan = LayoutPlan()
    T = kernel.num_threads
    col = _Collect()
    col.visit(kernel.body)
    frags = [b for b in kernel.allocs if b.scope == "local.fragment"]

    def assign(buf: Buffer, lay: Fragment, why: str, span: Any) -> bool:
        old = plan.fragments.get(buf)
        if old is not None:
            return False
        if tuple(lay.shape) != tuple(buf.shape):
            return False
        plan.fragments[buf] = lay
        plan.origin[buf] = (why, span)
        return True

    # level 1: strict
    for buf, lay in (kernel.annotations.get("layout_map") or {}).items():
        if isinstance(lay, Fragment) and buf.scope == "local.fragment":
            assign(buf, lay, "T.annotate_layout", kernel.span)
    warps = T // 32
    for g in col.gemms:
        if not gemm_on_tensor_cores(g) or T % 32:
            continue
        M, N = _tile_mn(g)
        wmn = mma_warps(M, N, warps, g.policy)
        if wmn is None:
            continue
        want = MmaLayout(M, N, *wmn)
        have = plan.fragments.get(g.C.buffer)
        if have is not None and not have.same(want):
            why, span = plan.origin[g.C.buffer]
            raise LayoutError(
                f"layout conflict: '{g.C.buffer.name}' is the accumulator of two gemms that need "
                f"different layouts ({have.describe()} from {why} at {span.short() if span else '?'} "
                f"and {want.describe()} here)", g.span,
                hint="give both gemms the same policy and tile shape, or use separate accumulators")
        plan.gemm_warps[g] = wmn
        assign(g.C.buffer, want, "T.gemm", g.span)

    def propagate() -> None:
        changed = True
        while changed:
            changed = False
            for r in col.reduces:
                src, dst = r.src.buffer, r.dst.buffer
                ls, ld = plan.fragments.get(src), plan.fragments.get(dst)
                last = r.dim == len(r.src.extents) - 1
                if src.scope == dst.scope == "local.fragment" and last and src.ndim == 2:
                    if ls is not None and ld is None and ls.rows() is not None:
                        changed |= assign(dst, ls.rows(), "T.reduce", r.span)
                    elif ld is not None and ls is None and isinstance(ld, RowsOf) \
                            and tuple(ld.parent.shape) == tuple(src.shape):
                        changed |= assign(src, ld.parent, "T.reduce", r.span)
            for c in col.copies:
                s, d = c.src.buffer, c.dst.buffer
                if s.scope == d.scope == "local.fragment" and tuple(s.shape) == tuple(d.shape):
                    if s in plan.fragments:
                        changed |= assign(d, plan.fragments[s], "T.copy", c.span)
                    elif d in plan.fragments:
                        changed |= assign(s, plan.fragments[d], "T.copy", c.span)
            for vars_, exts, acc in col.loops:
                full = [(b, sp) for b, idx, sp in acc if loop_pattern(vars_, b, idx) == "full"
                        and tuple(b.shape) == tuple(exts)]
                rows = [(b, sp) for b, idx, sp in acc if loop_pattern(vars_, b, idx) == "rows"]
                lay = next((plan.fragments[b] for b, _ in full if b in plan.fragments), None)
                if lay is None:
                    parent = next((plan.fragments[b] for b, _ in rows if isinstance(plan.fragments.get(b), RowsOf)), None)
                    if parent is not None and tuple(parent.parent.shape) == tuple(exts):
                        lay = parent.parent
                if lay is None:
                    continue
                for b, sp in full:
                    changed |= assign(b, lay, "T.Parallel", sp)
                if lay.rows() is not None:
                    for b, sp in rows:
                        changed |= assign(b, lay.rows(), "T.Parallel", sp)

    # levels 2 and 3
    propagate()
    for buf in frags:
        if buf in plan.fragments:
            continue
        assign(buf, free_layout(buf, T), "free choice", buf.span)
        propagate()
    return plan


def free_layout(buf: Buffer, T: int) -> Fragment:
    """The layout a fragment gets when nothing constrains it."""
    shape = tuple(int(d) for d in buf.shape)
    n = 1
    for d in shape:
        n *= d
    if len(shape) == 2:
        lay = RowLayout.choose(shape[0], shape[1], T, buf.dtype.itemsize)
        if lay is not None:
            return lay
    flat = FlatLayout.choose(shape, T, buf.dtype.itemsize)
    if flat is not None:
        return flat
    return Replicated(shape, T)



_SHARED = ("shared", "shared.dyn")


def choose_shared_layouts(kernel: Kernel) -> dict:
    """Buffer -> layout of the shared tiles: swizzled for those tensor-core gemms read, the
    layout map's (``T.annotate_layout``) where it names one; row-major is left out."""
    out: dict = {}

    def see(n: Any) -> None:
        if isinstance(n, Gemm) and gemm_on_tensor_cores(n):
            for r in (n.A, n.B):
                b = r.buffer
                shape = tuple(int(d) for d in b.shape)
                if b.scope in _SHARED and Swizzled.suits(shape, b.dtype.itemsize):
                    out[b] = Swizzled(shape, b.dtype.itemsize)

    post_order_visit(kernel.body, see)
    for buf, lay in (kernel.annotations.get("layout_map") or {}).items():  # T.annotate_layout wins
        if buf.scope in _SHARED and isinstance(lay, (RowMajor, Swizzled)):
            out[buf] = lay
    return out


def infer_layouts_pass(func: PrimFunc) -> PrimFunc:
    """Write every kernel's layouts (fragments and shared tiles) into its layout map."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            plan = infer_layouts(k)
            shared = choose_shared_layouts(k)
            chosen = dict(k.annotations.get("layout_map") or {})
            for b in k.allocs:
                if b in plan.fragments:
                    chosen[b] = plan.fragments[b]
                elif b.scope in _SHARED:
                    chosen[b] = shared.get(b) or RowMajor(tuple(int(d) for d in b.shape))
            return dataclasses.replace(k, annotations={**k.annotations, "layout_map": chosen})

    return M().visit(func)
