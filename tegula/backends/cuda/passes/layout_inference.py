"""Layout inference: choose how every fragment of a kernel is spread over its threads.

Works in levels (docs/architecture.md, "Layouts"):

1. **strict**: layouts from ``T.annotate_layout``; each tile op's ``layout.strict`` rule (the
   accumulator of a ``T.gemm`` that runs on tensor cores gets the ``mma.sync`` accumulator
   layout for the warp grid its ``policy`` picks).
2. **propagation**, to a fixed point: through ``T.Parallel`` loops (fragments indexed by the
   loop variables share the layout of the loop; one-dimensional fragments indexed by the first
   loop variable take the *rows* of it; ``X[i, j // c]`` takes its packed columns) and through each tile op's ``layout`` rule (reductions
   along the last dimension: the destination holds the rows of the source; fragment-to-fragment
   copies: one layout).
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
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.arith.simplify import const_int
from tegula.errors import LayoutError, PerformanceWarning, UnsupportedError, render
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BinOp, BufferLoad, Const, Var
from tegula.ir.stmt import (WARP_SPECIALIZE, AttrStmt, BufferStore, Copy, For, Gemm, Kernel, PrimFunc,
                            Reduce, TileOp,
                            parallel_nest)
from tegula.ir.tile_rules import TILE_RULES, tile_rule
from tegula.ir.visitor import Mutator, Visitor, post_order_visit
from tegula.layout.fragment import (ColsDivided, FlatLayout, Fragment, MmaLayout, Replicated,
                                    RowLayout, RowsOf, mma_warps)
from tegula.layout.shared import RowMajor, Swizzled
from tegula.layout.user import SharedLayout
from tegula.layout.wgmma import WgmmaLayout, WgmmaShared

MMA_OPERANDS = {"float16": "float32", "bfloat16": "float32", "int8": "int32", "uint8": "int32"}


@dataclass
class LayoutPlan:
    """Layouts of a kernel's fragments and the warp grid of each tensor-core gemm."""

    fragments: dict = field(default_factory=dict)   # Buffer -> Fragment
    gemm_warps: dict = field(default_factory=dict)   # Gemm -> (wm, wn)
    origin: dict = field(default_factory=dict)       # Buffer -> (reason, span) of the layout
    threads: int = 0                                 # threads of the kernel's blocks
    wgmma: dict = field(default_factory=dict)        # Gemm -> WgmmaLayout, for gemms on wgmma

    def of(self, buf: Buffer) -> Fragment:
        return self.fragments[buf]

    def assign(self, buf: Buffer, lay: Fragment, why: str, span: Any) -> bool:
        """Give ``buf`` layout ``lay`` (for ``why``, at ``span``) unless it has one or the
        shapes differ; True when it was assigned."""
        if buf in self.fragments or tuple(lay.shape) != tuple(buf.shape):
            return False
        self.fragments[buf] = lay
        self.origin[buf] = (why, span)
        return True


def gemm_on_tensor_cores(g: Gemm) -> bool:
    """True when a gemm's dtypes and operand scopes suit ``mma.sync``."""
    a, b, c = g.A.buffer, g.B.buffer, g.C.buffer
    if a.dtype.name not in MMA_OPERANDS or a.dtype != b.dtype:
        return False
    if MMA_OPERANDS[a.dtype.name] != c.dtype.name or not c.is_fragment:
        return False
    if not b.is_shared:
        return False
    k = g.A.tile_shape()[0 if g.transpose_A else 1]
    kstep = 16 if a.dtype.bits == 16 else 32
    return isinstance(k, int) and k % kstep == 0


def _tile_mn(g: Gemm) -> tuple[int, int]:
    sc = g.C.tile_shape()
    return int(sc[0]), int(sc[1])


class _Collect(Visitor):
    """Gathers the facts inference works from, in program order: the tile ops with layout
    rules and the fragment accesses of each parallel loop."""

    def __init__(self) -> None:
        self.ops: list[TileOp] = []
        self.loops: list[tuple[list[Var], list[Any], list[tuple[Buffer, tuple, Any]]]] = []

    def visit(self, n: Any) -> Any:
        if isinstance(n, TileOp):
            self.ops.append(n)
            return None
        return super().visit(n)

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
            if n.buffer.is_fragment:
                out.append((n.buffer, n.indices, False, n.span))
            s.generic_visit(n)

        def visit_BufferStore(s, n: BufferStore) -> None:
            if n.buffer.is_fragment:
                out.append((n.buffer, n.indices, True, n.span))
            s.generic_visit(n)

    V().visit(body)
    return out


def loop_pattern(vars_: list[Var], buf: Buffer, idx: tuple) -> Optional[str]:
    """How a fragment is indexed in a parallel loop: "full" (by all loop vars, in order),
    "rows" (1-d, by the first of two loop vars), "cols" (``[i, j // c]``, packed columns:
    :func:`packed_cols` gives ``c``), or None (anything else)."""
    if len(idx) == len(vars_) and all(i is v for i, v in zip(idx, vars_)):
        return "full"
    if len(vars_) == 2 and len(idx) == 1 and idx[0] is vars_[0]:
        return "rows"
    if packed_cols(vars_, idx) is not None:
        return "cols"
    return None


def packed_cols(vars_: list[Var], idx: tuple) -> Optional[int]:
    """``c`` when ``idx`` is ``(i, j // c)`` for the loop variables ``i, j`` and a constant
    ``c > 1``, else None."""
    if len(vars_) != 2 or len(idx) != 2 or idx[0] is not vars_[0]:
        return None
    j = idx[1]
    if isinstance(j, BinOp) and j.op == "floordiv" and j.a is vars_[1] and isinstance(j.b, Const) \
            and isinstance(j.b.value, int) and j.b.value > 1:
        return int(j.b.value)
    return None


def _uses_fragment(n: Any) -> bool:
    if isinstance(n, (BufferLoad, BufferStore)):
        return n.buffer.is_fragment
    if isinstance(n, TileOp):
        return any(isinstance(getattr(getattr(n, f.name), "buffer", None), Buffer)
                   and getattr(n, f.name).buffer.is_fragment for f in dataclasses.fields(n))
    return False


def layout_threads(kernel: Kernel) -> int:
    """The threads that fragments are spread over: the block's, or in a warp-specialized kernel
    (``T.ws`` regions) the threads of the regions that compute on fragments, where every fragment
    must then live."""
    sizes: set = set()
    outside: list = []
    regions: list = []

    class V(Visitor):
        def __init__(v, found: list) -> None:
            v.found = found

        def visit(v, n: Any) -> Any:
            if isinstance(n, AttrStmt) and n.key == WARP_SPECIALIZE:
                regions.append(n)
                inner: list = []
                V(inner).visit(n.body)
                if inner:
                    sizes.add(n.value[1])
                return None
            if _uses_fragment(n):
                v.found.append(n)
                if isinstance(n, TileOp):
                    return None
            return super().visit(n)

    V(outside).visit(kernel.body)
    if not regions:
        return kernel.num_threads
    if len(sizes) > 1:
        raise UnsupportedError(f"warp-specialized regions of different sizes ({sorted(sizes)} threads) "
                               "compute on fragments in one kernel; that is not supported", kernel.span,
                               hint="give every T.ws region that uses fragments the same warpgroup count")
    if outside:
        raise UnsupportedError("in a warp-specialized kernel, fragments are used only inside "
                               "T.ws regions (each region's threads hold their own)",
                               getattr(outside[0], "span", None) or kernel.span,
                               hint="move this statement into the T.ws region that computes it")
    return next(iter(sizes)) if sizes else kernel.num_threads


def infer_layouts(kernel: Kernel) -> LayoutPlan:
    """The layout plan of one kernel (see the module docstring)."""
    plan = LayoutPlan(threads=layout_threads(kernel))
    col = _Collect()
    col.visit(kernel.body)
    frags = [b for b in kernel.allocs if b.is_fragment]
    strict = TILE_RULES.each(col.ops, "layout.strict")
    loose = TILE_RULES.each(col.ops, "layout")

    # level 1: strict
    spans = kernel.annotations.get("layout_spans") or {}
    for buf, lay in (kernel.annotations.get("layout_map") or {}).items():
        if isinstance(lay, Fragment) and buf.is_fragment:
            plan.assign(buf, lay, "T.annotate_layout", spans.get(buf) or kernel.span)
    if kernel.annotations.get("wgmma"):  # marked by UseWgmma (sm_90a)
        gemms = [op for op in col.ops if isinstance(op, Gemm)]
        plan.wgmma = wgmma_gemms(gemms, plan.threads, kernel.annotations.get("layout_map") or {})
    for op, rule in strict:
        rule(op, plan)
    for buf in kernel.annotations.get("replicated_fragments") or ():  # read outside T.Parallel
        if buf.is_fragment and buf not in plan.fragments:
            plan.assign(buf, Replicated(tuple(int(d) for d in buf.shape), plan.threads),
                        "read element by element outside T.Parallel", buf.span)

    def propagate() -> None:
        changed = True
        while changed:
            changed = False
            for op, rule in loose:
                changed |= rule(op, plan)
            for vars_, exts, acc in col.loops:
                changed |= _parallel_loop(plan, vars_, exts, acc)

    # levels 2 and 3
    propagate()
    for buf in frags:
        if buf in plan.fragments:
            continue
        plan.assign(buf, free_layout(buf, plan.threads), "free choice", buf.span)
        propagate()
    return plan


def same_placement(a: Fragment, b: Fragment) -> bool:
    """Whether two layouts put every element in the same (thread, register), however they are
    written (a user's ``T.Fragment`` may spell out a layout of tegula's own)."""
    if a.same(b):
        return True
    if tuple(a.shape) != tuple(b.shape) or a.threads != b.threads or a.local_size != b.local_size:
        return False
    from tegula.ir.evaluate import host_lambda

    t = Var("t")
    n = len(a.shape)
    for k in range(a.local_size):
        both = host_lambda(tuple(a.coords(t, k)) + tuple(b.coords(t, k)), lambda v, bind: "v")
        for th in range(a.threads):
            got = both(th)
            if got[:n] != got[n:]:
                return False
    return True


def _parallel_loop(plan: LayoutPlan, vars_: list[Var], exts: list[Any], acc: list) -> bool:
    """A T.Parallel loop: fragments indexed by all its variables share one layout; 1-d ones
    indexed by the first variable of two take its rows."""
    pats = [(b, idx, sp, loop_pattern(vars_, b, idx)) for b, idx, sp in acc]
    full = [(b, sp) for b, _, sp, pat in pats if pat == "full" and tuple(b.shape) == tuple(exts)]
    rows = [(b, sp) for b, _, sp, pat in pats if pat == "rows"]
    packed = [(b, sp, packed_cols(vars_, idx)) for b, idx, sp, pat in pats if pat == "cols"]
    lay = next((plan.fragments[b] for b, _ in full if b in plan.fragments), None)
    if lay is None:
        parent = next((plan.fragments[b] for b, _ in rows if isinstance(plan.fragments.get(b), RowsOf)), None)
        if parent is not None and tuple(parent.parent.shape) == tuple(exts):
            lay = parent.parent
    if lay is None:
        return False
    changed = False
    for b, sp in full:
        changed |= plan.assign(b, lay, "T.Parallel", sp)
    if lay.rows() is not None:
        for b, sp in rows:
            changed |= plan.assign(b, lay.rows(), "T.Parallel", sp)
    for b, sp, c in packed:
        cols = ColsDivided.of(lay, c)
        if cols is not None:
            changed |= plan.assign(b, cols, "T.Parallel", sp)
    return changed


# -- the layout rules of tile ops (tegula.ir.tile_rules aspects "layout.strict" and "layout") ---

@tile_rule(Gemm, "layout.strict")
def _gemm_layout(g: Gemm, plan: LayoutPlan) -> bool:
    """A tensor-core gemm's accumulator takes the mma layout of its policy's warp grid."""
    T = plan.threads
    if g not in plan.wgmma and (not gemm_on_tensor_cores(g) or T % 32):
        return False
    M, N = _tile_mn(g)
    wmn = mma_warps(M, N, T // 32, g.policy) if g not in plan.wgmma else (plan.wgmma[g].wm, plan.wgmma[g].wn)
    if wmn is None:
        return False
    want = plan.wgmma.get(g) or MmaLayout(M, N, *wmn)
    have = plan.fragments.get(g.C.buffer)
    if have is not None and not same_placement(have, want):
        why, span = plan.origin[g.C.buffer]
        where = span.short() if span else "?"
        if why == "T.annotate_layout":
            raise LayoutError(
                f"layout conflict: '{g.C.buffer.name}' has the layout T.annotate_layout gives it at "
                f"{where} ({have.describe()}), and this T.gemm needs its accumulator in "
                f"{want.describe()}", g.span,
                hint="drop the annotation of the accumulator, or give it the gemm's layout")
        raise LayoutError(
            f"layout conflict: '{g.C.buffer.name}' is the accumulator of two gemms that need "
            f"different layouts ({have.describe()} from {why} at {where} "
            f"and {want.describe()} here)", g.span,
            hint="give both gemms the same policy and tile shape, or use separate accumulators")
    plan.gemm_warps[g] = wmn
    if have is not None and not have.same(want):  # the same placement, spelled otherwise
        plan.fragments[g.C.buffer] = want
        return False
    return plan.assign(g.C.buffer, want, "T.gemm", g.span)


def gemm_a_register_layout(g: Gemm, c_lay: Fragment) -> Optional[Fragment]:
    """The layout in which a fragment A operand of ``g`` is used straight from its registers by
    a gemm whose accumulator has layout ``c_lay`` (None: no such layout): the m16n8k16 A
    fragment of 16 columns is the accumulator layout of two 8-column slices, so A takes the
    accumulator's warp grid over its own ``M x K`` shape. Only for a single column of warps
    (warpgroups), where every warp holds whole rows of A."""
    a = g.A.buffer
    if g.transpose_A or a.dtype.bits != 16 or a.ndim != 2 or not isinstance(c_lay, MmaLayout):
        return None
    M, K = (int(x) for x in a.shape)
    if c_lay.wn != 1 or M != c_lay.M or K % 16:
        return None
    return type(c_lay)(M, K, c_lay.wm, 1)


@tile_rule(Gemm, "layout")
def _gemm_operand_layout(g: Gemm, plan: LayoutPlan) -> bool:
    """A fragment A operand with no layout yet takes the one its gemm reads from registers (a
    free choice would make the gemm stage it through shared memory: dequantized weights)."""
    a = g.A.buffer
    c_lay = plan.fragments.get(g.C.buffer)
    if not a.is_fragment or a in plan.fragments or c_lay is None or g not in plan.gemm_warps:
        return False
    if tuple(g.A.extents) != tuple(a.shape) or any(const_int(s) != 0 for s in g.A.starts):
        return False  # part of a fragment
    lay = gemm_a_register_layout(g, c_lay)
    return lay is not None and plan.assign(a, lay, "T.gemm", g.span)


@tile_rule(Reduce, "layout")
def _reduce_layout(r: Reduce, plan: LayoutPlan) -> bool:
    """Along the last dimension of a 2-d fragment: the destination holds the source's rows."""
    src, dst = r.src.buffer, r.dst.buffer
    if not (src.is_fragment and dst.is_fragment and r.dim == len(r.src.extents) - 1
            and src.ndim == 2):
        return False
    ls, ld = plan.fragments.get(src), plan.fragments.get(dst)
    if ls is not None and ld is None and ls.rows() is not None:
        return plan.assign(dst, ls.rows(), "T.reduce", r.span)
    if ld is not None and ls is None and isinstance(ld, RowsOf) \
            and tuple(ld.parent.shape) == tuple(src.shape):
        return plan.assign(src, ld.parent, "T.reduce", r.span)
    return False


@tile_rule(Copy, "layout")
def _copy_layout(c: Copy, plan: LayoutPlan) -> bool:
    """Fragment to fragment of one shape: both sides share a layout."""
    s, d = c.src.buffer, c.dst.buffer
    if not (s.is_fragment and d.is_fragment and tuple(s.shape) == tuple(d.shape)):
        return False
    if s in plan.fragments:
        return plan.assign(d, plan.fragments[s], "T.copy", c.span)
    if d in plan.fragments:
        return plan.assign(s, plan.fragments[d], "T.copy", c.span)
    return False


def choose_shared_layouts(kernel: Kernel, threads: Optional[int] = None) -> dict:
    """Layouts of shared tiles: those of ``T.annotate_layout``, else an XOR swizzle for tiles
    that tensor-core gemms read; row-major for the rest (not in the result). ``threads``: the
    kernel's :func:`layout_threads` when the caller has it (its layout plan's)."""
    out: dict = {}

    def see(n: Any) -> None:
        if isinstance(n, Gemm) and gemm_on_tensor_cores(n):
            for r in (n.A, n.B):
                b = r.buffer
                shape = tuple(int(d) for d in b.shape)
                if b.is_shared and Swizzled.suits(shape, b.dtype.itemsize):
                    out[b] = Swizzled(shape, b.dtype.itemsize)

    post_order_visit(kernel.body, see)
    out.update(_tma_store_tiles(kernel, out))
    if kernel.annotations.get("wgmma"):  # marked by UseWgmma (sm_90a)
        from tegula.backends.cuda.passes.lower_tile_ops.lower_wgmma import wgmma_shared_layouts

        gemms: list = []
        post_order_visit(kernel.body, lambda n: gemms.append(n) if isinstance(n, Gemm) else None)
        layout_map = kernel.annotations.get("layout_map") or {}
        T = threads if threads is not None else layout_threads(kernel)
        out.update(wgmma_shared_layouts(wgmma_gemms(gemms, T, layout_map)))
    for buf, lay in (kernel.annotations.get("layout_map") or {}).items():  # T.annotate_layout wins
        if buf.is_shared and isinstance(lay, (RowMajor, Swizzled, WgmmaShared, SharedLayout)):
            out[buf] = lay
    return out


def _tma_store_tiles(kernel: Kernel, chosen: dict) -> dict:
    """Shared tiles that a TMA store reads (``TmaStores``) and nothing else lays out: the copy
    engine's swizzled blocks (a box per block; fragments write their rows without bank conflicts)."""
    out: dict = {}

    def see(n: Any) -> None:
        if isinstance(n, Copy) and n.annotations.get("tma_store"):
            b = n.src.buffer
            shape = tuple(int(d) for d in b.shape)
            if b not in chosen and WgmmaShared.suits(shape, b.dtype.itemsize):
                out[b] = WgmmaShared(shape, b.dtype.itemsize)

    post_order_visit(kernel.body, see)
    return out


def wgmma_gemms(gemms: list, T: int, layout_map: dict) -> dict:
    """The gemms that run on wgmma, with their accumulator layouts: those ``wgmma_layout`` gives
    a layout, unless their accumulator is shared with a gemm it does not."""
    from tegula.backends.cuda.passes.lower_tile_ops.lower_wgmma import wgmma_layout

    # shared tiles whose layout is fixed otherwise (T.annotate_layout), accumulators likewise
    pinned = frozenset(b for b, lay in layout_map.items() if b.is_shared and not isinstance(lay, WgmmaShared))
    lays = {g: wgmma_layout(g, T, pinned) for g in gemms}
    ok = {g: lays[g] is not None and (g.C.buffer not in layout_map
                                      or isinstance(layout_map[g.C.buffer], WgmmaLayout))
          for g in gemms}
    for g in gemms:
        if not ok[g]:
            for h in gemms:
                if h.C.buffer is g.C.buffer:
                    ok[h] = False
    return {g: lays[g] for g in gemms if ok[g]}


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



def warn_replicated(plan: LayoutPlan) -> None:
    """A fragment every thread holds whole (no layout spreads it over the threads) costs each
    thread all of its elements in registers (or local memory) and the work on all of them: a
    located :class:`~tegula.errors.PerformanceWarning` past ``config.replicated_fragment_limit``
    elements, a LayoutError under ``TEGULA_STRICT_PERF=1``."""
    from tegula import config

    limit = config.get().replicated_fragment_limit
    for buf, lay in plan.fragments.items():
        if not isinstance(lay, Replicated) or lay.threads <= 1 or lay.local_size <= limit:
            continue
        n, T = lay.local_size, lay.threads
        fits = [t for t in (1 << b for b in range(T.bit_length())) if t < T and n % t == 0]
        shape = tuple(int(d) for d in buf.shape)
        cols = shape[-1]
        rows = n // cols
        step = T // math.gcd(T, rows)   # columns a multiple of this spread rows * cols over T threads
        padded = -(-cols // step) * step
        msg = (f"fragment '{buf.name}' {shape} is replicated over all {T} threads: every thread "
               f"holds all {n} elements (no layout spreads {n} elements over {T} threads)")
        hint = (f"pad the last dimension to {padded} (a multiple of {step}; mask the extra "
                f"columns) so each thread holds {rows * padded // T}"
                + (f", or launch with threads={max(fits)}" if fits else "")
                + "; TEGULA_REPLICATED_LIMIT raises the limit of this warning")
        span = buf.span or plan.origin.get(buf, (None, None))[1]
        if config.get().strict_performance:
            raise LayoutError(msg + " (TEGULA_STRICT_PERF=1)", span, hint)
        text = render(msg, span, hint)
        if span is not None:   # reported at the user's line, not at tegula's
            warnings.warn_explicit(text, PerformanceWarning, span.file, span.line)
        else:
            warnings.warn(text, PerformanceWarning, stacklevel=2)


def infer_layouts_pass(func: PrimFunc) -> PrimFunc:
    """Write every kernel's layouts (fragments and shared tiles) into its layout map; warn of
    fragments replicated over every thread past a small size (:func:`warn_replicated`)."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            plan = infer_layouts(k)
            warn_replicated(plan)
            shared = choose_shared_layouts(k, plan.threads)
            chosen = dict(k.annotations.get("layout_map") or {})
            for b in k.allocs:
                if b in plan.fragments:
                    chosen[b] = plan.fragments[b]
                elif b.is_shared:
                    chosen[b] = shared.get(b) or RowMajor(tuple(int(d) for d in b.shape))
            return dataclasses.replace(k, annotations={**k.annotations, "layout_map": chosen})

    return M().visit(func)
