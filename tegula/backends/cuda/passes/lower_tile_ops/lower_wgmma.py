"""Lowering ``T.gemm`` to Hopper's warpgroup MMA (``wgmma.mma_async``, sm_90a).

Taken for fp16/bf16 gemms (and fp8 e4m3/e5m2 ones with A and B K-major, ``k32``) into a float32
fragment when the kernel was marked for wgmma (the
``UseWgmma`` pass, sm_90a only) and :func:`wgmma_layout` gives it a layout: whole warpgroups, 64 rows of C per
instruction, B (and A, unless A is a fragment) a whole shared tile. The accumulator gets
:class:`~tegula.layout.wgmma.WgmmaLayout` and the shared operands
:class:`~tegula.layout.wgmma.WgmmaShared`, whose blocks the descriptors walk:

- K-major operand (A, or B given as ``[N, K]`` with ``transpose_B``): the start address steps
  16 elements along K inside a swizzle block, the stride byte offset is 8 rows of the block;
- MN-major operand (B as ``[K, N]``, A as ``[K, M]`` with ``transpose_A``): the start steps 16
  rows, the leading byte offset is the distance between blocks of the contiguous dimension.

Per gemm, in every thread of the block (each warpgroup computes its own rows)::

    T.gemm(A_s, B_s, C)        tl::fence_proxy_async();     // cp.async / stores -> async proxy (none
                                                             // for tiles only TMA writes)
                               tl::wgmma_fence();
                               tl::wgmma_ss<N, half_t, tA, tB>(&C[0], desc(A_s, kk=0), desc(B_s, 0));
                               ...                           // MI x N-chunks x K/16 instructions
                               tl::wgmma_commit_group(); tl::wgmma_wait_group<0>();
                               tl::wgmma_fence_operands<R>(C);

An A operand that is a fragment is used from registers (``wgmma_rs``): straight from its own
registers when it is in the accumulator layout of the same warpgroups (the m16n8k16 A fragment of
16 columns is the accumulator of two 8-column slices), else gathered from its shared copy.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import BufferLoad
from tegula.ir.stmt import BufferStore, Copy, Evaluate, Gemm, Stmt, seq
from tegula.ir.visitor import Visitor
from tegula.layout.wgmma import SWIZZLE_MODE, WgmmaLayout, WgmmaShared
from tegula.backends.cuda.passes.lower_tile_ops.context import Ctx, addr, call, region_index, sync, whole

WGMMA_INPUTS = ("float16", "bfloat16")
WGMMA_FP8 = ("float8_e4m3", "float8_e5m2")  # k32, A and B both K-major in shared memory
# the N of one instruction, as wgmma.h instantiates them
WGMMA_N = (256, 192, 128, 96, 64, 48, 32, 24, 16, 8)
# shared operand tiles of swizzled layouts start at the swizzle's repeat (1024 B covers all modes)
WGMMA_SMEM_ALIGN = 1024


def _whole_tile(r: BufferRegion) -> bool:
    """The region is one whole 2-d tile of its buffer (leading dims, e.g. stages, indexed)."""
    from tegula.arith.simplify import const_int

    *lead, rr, cr = r.ranges
    if any(not (isinstance(e, int) and e == 1) for _, e in lead):
        return False
    return all(const_int(s) == 0 and e == d for (s, e), d in zip((rr, cr), r.buffer.shape[-2:]))


def _static_shape(b: Buffer) -> Optional[tuple[int, ...]]:
    if not all(isinstance(d, int) for d in b.shape):
        return None
    return tuple(int(d) for d in b.shape)


def _n_chunk(N: int, b_shared: WgmmaShared, mn_major: bool) -> Optional[int]:
    for n in WGMMA_N:
        if N % n == 0 and (not mn_major or n % b_shared.W == 0):
            return n
    return None


def wgmma_layout(g: Gemm, threads: int, pinned: frozenset = frozenset()) -> Optional[WgmmaLayout]:
    """The accumulator layout ``g`` gets on wgmma in a block of ``threads`` threads, or None when
    wgmma cannot do it (``pinned``: shared buffers whose layout the user fixed, which a
    descriptor cannot follow)."""
    a, b, c = g.A.buffer, g.B.buffer, g.C.buffer
    fp8 = a.dtype.name in WGMMA_FP8 and b.dtype.name in WGMMA_FP8
    if not fp8 and (a.dtype.name not in WGMMA_INPUTS or b.dtype != a.dtype) or c.dtype != dt.float32:
        return None
    if fp8 and (g.transpose_A or not g.transpose_B or not a.is_shared):
        return None
    if c.scope != "local.fragment" or not whole(g.C) or len(g.C.tile_shape()) != 2:
        return None
    M, N = (int(x) for x in g.C.tile_shape())
    K = g.A.tile_shape()[0 if g.transpose_A else 1]
    if not isinstance(K, int) or K % (32 if fp8 else 16):
        return None
    for r in (g.A, g.B):
        buf = r.buffer
        if buf.scope == "local.fragment" and r is g.A and not g.transpose_A and whole(r):
            continue
        shape = _static_shape(buf)
        if not buf.is_shared or shape is None or buf in pinned or not _whole_tile(r):
            return None
        if not WgmmaShared.suits(shape, buf.dtype.itemsize):
            return None
    bs = WgmmaShared(_static_shape(b), b.dtype.itemsize)  # type: ignore[arg-type]
    return WgmmaLayout.choose(M, N, threads, lambda n: _n_chunk(n, bs, not g.transpose_B) is not None)


def wgmma_shared_layouts(gemms: Any) -> dict:
    """The shared layout of every shared operand of the wgmma gemms ``gemms``."""
    out: dict = {}
    for g in gemms:
        for r in (g.A, g.B):
            if r.buffer.is_shared:
                out[r.buffer] = WgmmaShared(_static_shape(r.buffer), r.buffer.dtype.itemsize)  # type: ignore[arg-type]
    return out


def tma_only_tiles(body: Stmt) -> frozenset:
    """The shared tiles of ``body`` that only copies marked for TMA write and nothing but gemms
    reads: wgmma reads them in the async proxy that wrote them, with the mbarrier ordering the
    two, so no ``fence.proxy.async`` is needed before it (the PTX ISA asks for one only after
    generic-proxy writes)."""
    tma: set = set()
    other: set = set()

    class V(Visitor):
        def visit_Copy(v, c: Copy) -> None:
            if "tma_bar" in c.annotations and c.dst.buffer.is_shared:
                tma.add(c.dst.buffer)
                v.visit(c.src)
                v._walk(c.dst.ranges)
                v._walk(c.annotations)
                return
            v.generic_visit(c)

        def visit_Gemm(v, g: Gemm) -> None:
            for r in (g.A, g.B):
                if r.buffer.is_shared:
                    v._walk(r.ranges)
                else:
                    v.visit(r)
            v.visit(g.C)

        def visit_Buffer(v, b: Buffer) -> None:
            other.add(b)
            Visitor.visit_Buffer(v, b)

    V().visit(body)
    return frozenset(tma - other)


def _desc(ctx: Ctx, r: BufferRegion, tile_idx: tuple, mn_major: bool) -> E.Expr:
    """The matrix descriptor of the operand tile starting at ``tile_idx`` of region ``r``."""
    flat, lay = ctx.shared(r.buffer)
    assert isinstance(lay, WgmmaShared), lay
    start = addr(BufferLoad(flat, (lay.offset(region_index(r, tile_idx)),)))
    sbo = 8 * lay.swizzle_bytes
    lbo = lay.block_bytes() if mn_major else 16
    return call("tl::wgmma_desc", start, lbo, sbo, ret=dt.uint64,
                template=(SWIZZLE_MODE[lay.swizzle_bytes],))


def lower_wgmma(ctx: Ctx, g: Gemm, lay: WgmmaLayout) -> Stmt:
    a_buf, b_buf = g.A.buffer, g.B.buffer
    elt = a_buf.dtype
    fp8 = elt.bits == 8
    ks = 32 if fp8 else 16  # K of one instruction
    K = int(g.A.tile_shape()[0 if g.transpose_A else 1])
    N = lay.N // lay.wgn  # the columns of one warpgroup
    t = ctx.tid
    row0, col0 = lay.warpgroup_origin(t)  # where this thread's warpgroup's part of C starts
    c_reg = ctx.reg(g.C.buffer)
    b_mn = not g.transpose_B
    b_lay = ctx.shared(b_buf)[1]
    nc = _n_chunk(N, b_lay, b_mn)
    assert nc is not None
    pre: list[Stmt] = []
    body: list[Stmt] = []
    a_regs = a_buf.scope == "local.fragment"
    al = ctx.layout(a_buf) if a_regs else None
    own = (isinstance(al, WgmmaLayout) and al.M == lay.M and al.wm == lay.wm and al.wn == 1
           and al.N == K and a_buf.dtype.bits == 16)
    gathered: Optional[Buffer] = None
    if a_regs and not own:
        # gather A's m16n8k16 fragments from its shared copy, one set per instruction
        pre += [ctx.stage_out(a_buf), sync()]
        gathered = Buffer(ctx.fresh("A_frag"), (lay.MI * (K // 16) * 8,), elt, "local")
        ctx.allocs.append(gathered)
        lane, w4 = t % 32, (t // 32) % 4
        g_, q = lane // 4, lane % 4
        for mi in range(lay.MI):
            for kk in range(K // 16):
                for e in range(8):
                    m = row0 + mi * 64 + w4 * 16 + g_ + 8 * ((e // 2) % 2)
                    k = kk * 16 + 2 * q + e % 2 + 8 * (e // 4)
                    pre.append(BufferStore(gathered, (E.const((mi * (K // 16) + kk) * 8 + e),),
                                           ctx.load(a_buf, region_index(g.A, (m, k)), staged=True)))
    shared_ops = [r.buffer for r in (g.A, g.B) if r.buffer.is_shared]
    # generic writes -> async proxy (not for tiles only TMA writes, nor where an earlier fence covers it)
    if (not all(b in ctx.tma_only for b in shared_ops) or a_regs) and "no_proxy_fence" not in ctx.wgmma_opts:
        body.append(Evaluate(call("tl::fence_proxy_async")))
    if g.clear_accum:
        body.append(ctx.unroll("k", lay.local_size,
                               lambda k: BufferStore(c_reg, (k,), E.cast(c_reg.dtype, 0))))
    if g.clear_accum or "no_register_fence" not in ctx.wgmma_opts:
        body.append(Evaluate(call("tl::wgmma_fence")))
    for mi in range(lay.MI):
        for n0 in range(0, N, nc):
            cptr = addr(BufferLoad(c_reg, (E.const(mi * lay.NI * 4 + n0 // 2),)))
            for kk in range(K // ks):
                b_idx = (col0 + n0, kk * ks) if g.transpose_B else (kk * ks, col0 + n0)
                db = _desc(ctx, g.B, b_idx, b_mn)
                if not a_regs:
                    a_idx = (kk * ks, row0 + mi * 64) if g.transpose_A else (row0 + mi * 64, kk * ks)
                    da = _desc(ctx, g.A, a_idx, g.transpose_A)
                    if fp8:
                        body.append(Evaluate(call("tl::wgmma_ss_fp8", cptr, da, db,
                                                  template=(nc, elt, b_buf.dtype))))
                    else:
                        body.append(Evaluate(call("tl::wgmma_ss", cptr, da, db,
                                                  template=(nc, elt, g.transpose_A, b_mn))))
                    continue
                if own:
                    src = BufferLoad(ctx.reg(a_buf), (E.const(mi * al.NI * 4 + kk * 8),))  # type: ignore[union-attr]
                else:
                    src = BufferLoad(gathered, (E.const((mi * (K // 16) + kk) * 8),))  # type: ignore[arg-type]
                body.append(Evaluate(call("tl::wgmma_rs", cptr, addr(src, "unsigned"), db,
                                          template=(nc, elt, b_mn))))
    body.append(Evaluate(call("tl::wgmma_commit_group")))
    if "no_wait" in ctx.wgmma_opts:  # committed only: a later wgmma_wait retires it
        return seq(*pre, *body)
    body.append(Evaluate(call("tl::wgmma_wait_group", template=(max(0, g.wg_wait),))))
    body += _pin(ctx, (g.C.buffer,) + ((a_buf,) if own else ()))
    return seq(*pre, *body)


def _pin(ctx: Ctx, bufs: tuple) -> list[Stmt]:
    """``wgmma_fence_operands`` on the registers of the wgmma-layout fragments ``bufs``: float
    accumulators, and 16-bit A operands read from registers (as 32-bit words), which the
    compiler must not reuse before the wgmma reading them is retired."""
    out: list[Stmt] = []
    for b in bufs:
        lay = ctx.layout(b)
        if not isinstance(lay, WgmmaLayout):
            continue
        if b.dtype == dt.float32:
            out.append(Evaluate(call("tl::wgmma_fence_operands", addr(BufferLoad(ctx.reg(b), (E.const(0),))),
                                     template=(lay.local_size,))))
        elif b.dtype.bits == 16:
            out.append(Evaluate(call("tl::wgmma_fence_operands", addr(BufferLoad(ctx.reg(b), (E.const(0),)),
                                                                     "unsigned"),
                                     template=(lay.local_size // 2,))))
    return out


def lower_wgmma_drain(ctx: Ctx, accumulators: tuple, keep: int = 0, after: tuple = ()) -> Stmt:
    """Wait until at most ``keep`` wgmma groups are in flight, then pin the registers of the
    fragments ``accumulators`` (``wgmma_drain`` after a loop that left groups in flight, placed
    by ``TmaPipeline`` and ``WarpSpecialize``; ``wgmma_wait`` inside the loops of :mod:`softmax_overlap`). Nothing
    when none of them is in a wgmma layout (the gemms stayed on mma.sync).

    ``after``: fragments whose code must run before the wait. ptxas otherwise hoists the wait
    above independent arithmetic (it did above a whole softmax, leaving nothing to overlap with
    the wgmma); ``tl::wgmma_order_after`` stores a sum of their registers (all of a 1-d row
    fragment, the first of others) to shared memory, which the wait cannot pass."""
    if not any(isinstance(ctx.layout(c), WgmmaLayout) for c in accumulators):
        return seq()
    out: list[Stmt] = []
    vals: list[E.Expr] = []
    for b in after:
        reg = ctx.reg(b)
        n = int(reg.shape[0]) if len(b.shape) == 1 else 1
        vals += [E.cast(dt.float32, BufferLoad(reg, (E.const(i),))) for i in range(n)]
    if vals:
        total = vals[0]
        for v in vals[1:]:
            total = E.binary("add", total, v)
        out.append(Evaluate(call("tl::wgmma_order_after", total)))
    out.append(Evaluate(call("tl::wgmma_wait_group", template=(keep,))))
    return seq(*out, *_pin(ctx, accumulators))
