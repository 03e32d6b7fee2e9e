"""Lowering ``T.gemm``.

On tensor cores (fp16/bf16 with a float32 accumulator, int8 with int32; B in shared memory;
A in shared memory or a fragment in the accumulator layout): per k-step each warp loads its A
and B fragments with ``ldmatrix`` (``.trans`` where the storage order needs it; element loads
where ``ldmatrix`` cannot, e.g. transposed int8) and issues ``mma.sync`` m16n8k16 (m16n8k32 for
int8) for every 16x8 tile of its part of C. An A operand that is a fragment in the accumulator
layout of the same warps is used straight from registers (the m16n8k16 A fragment of a 16x16
block is the accumulator fragment of its two 16x8 halves).

Anything else runs on CUDA cores: each thread accumulates the elements of C its registers
hold, reading A and B from shared memory (fragments through their shared copies).
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import LOCAL, Buffer
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.stmt import BufferStore, Evaluate, For, Gemm, Stmt, seq
from tegula.ir.tile_rules import tile_rule
from tegula.layout.fragment import MmaLayout
from tegula.layout.mma import a_lane_offsets, b_lane_offsets
from tegula.layout.wgmma import WgmmaLayout
from tegula.backends.cuda.passes.lower_tile_ops.lower_wgmma import lower_wgmma
from tegula.backends.cuda.passes.lower_tile_ops.context import (Ctx, addr, call, region_index,
                                                          require_rows, whole)

_MMA = {"float16": "tl::mma_m16n8k16_f16_f32", "bfloat16": "tl::mma_m16n8k16_bf16_f32",
        "int8": "tl::mma_m16n8k32_s8_s32", "uint8": "tl::mma_m16n8k32_u8_s32"}


@tile_rule(Gemm, "cuda")
def lower_gemm(ctx: Ctx, g: Gemm) -> Stmt:
    if not whole(g.C):
        raise UnsupportedError("T.gemm into part of a fragment is not supported on CUDA yet", g.span)
    lay = ctx.layout(g.C.buffer)
    if g in ctx.plan.wgmma and isinstance(lay, WgmmaLayout):
        return lower_wgmma(ctx, g, lay)
    if g in ctx.plan.gemm_warps and type(lay) is MmaLayout:
        return _mma_gemm(ctx, g, lay)
    return _fma_gemm(ctx, g)


def _a_elem(g: Gemm, m: Any, k: Any) -> tuple:
    return region_index(g.A, (k, m) if g.transpose_A else (m, k))


def _b_elem(g: Gemm, k: Any, n: Any) -> tuple:
    return region_index(g.B, (n, k) if g.transpose_B else (k, n))


def _a_from_registers(ctx: Ctx, g: Gemm, lay: MmaLayout) -> bool:
    a = g.A.buffer
    if not a.is_fragment or g.transpose_A or a.dtype.bits != 16 or not whole(g.A):
        return False
    al = ctx.layout(a)
    return type(al) is MmaLayout and al.wm == lay.wm and al.wn == 1 and lay.wn == 1 \
        and al.M == lay.M


def _mma_gemm(ctx: Ctx, g: Gemm, lay: MmaLayout) -> Stmt:
    a_buf, b_buf = g.A.buffer, g.B.buffer
    elt = a_buf.dtype
    kstep = 16 if elt.bits == 16 else 32
    K = int(g.A.tile_shape()[0 if g.transpose_A else 1])
    MI, NI = lay.MI, lay.NI
    WM, WN = lay.M // lay.wm, lay.N // lay.wn
    aper, bper = 16 // elt.itemsize, 8 // elt.itemsize
    t = ctx.tid
    lane, warp = t % 32, t // 32
    wmi, wni = warp // lay.wn, warp % lay.wn
    g_, q = lane // 4, lane % 4
    c_reg = ctx.reg(g.C.buffer)
    a_regs = _a_from_registers(ctx, g, lay)
    for r in (g.A, g.B):
        if r.buffer.is_shared:
            require_rows(ctx, r.buffer, 16, "T.gemm (ldmatrix)", g.span)
    staged = [a_buf] if a_buf.is_fragment and not a_regs else []
    a_frag = Buffer(ctx.fresh("A_frag"), (MI * aper,), elt, LOCAL)
    b_frag = Buffer(ctx.fresh("B_frag"), (NI * bper,), elt, LOCAL)
    ctx.allocs += [b_frag] + ([] if a_regs else [a_frag])
    body: list[Stmt] = []
    if g.clear_accum:
        body.append(ctx.unroll("k", lay.local_size,
                           lambda k: BufferStore(c_reg, (k,), E.cast(c_reg.dtype, 0))))

    def load_a(kk: Any) -> Stmt:
        if a_regs:
            return seq()
        stmts = []
        for mi in range(MI):
            m0 = wmi * WM + mi * 16
            dst = BufferLoad(a_frag, (E.const(mi * aper),))
            if a_buf.is_shared or a_buf.is_fragment:
                staged = a_buf.is_fragment
                if not g.transpose_A or elt.bits == 16:
                    dm, dk = a_lane_offsets(lane, kstep, g.transpose_A)
                    src = ctx.load(a_buf, _a_elem(g, m0 + dm, kk * kstep + dk), staged=staged)
                    trans = "true" if g.transpose_A else "false"
                    stmts.append(Evaluate(call("tl::ldmatrix", addr(dst), addr(src), template=(4, trans))))
                    continue
            for e in range(aper):  # element loads (transposed int8)
                if elt.bits == 16:
                    m, k = m0 + g_ + 8 * ((e // 2) % 2), kk * 16 + 2 * q + (e % 2 + 8 * (e // 4))
                else:
                    m, k = m0 + g_ + 8 * ((e // 4) % 2), kk * 32 + 4 * q + (e % 4 + 16 * (e // 8))
                stmts.append(BufferStore(a_frag, (E.const(mi * aper + e),),
                                         ctx.load(a_buf, _a_elem(g, m, k), staged=a_buf.is_fragment)))
        return seq(*stmts)

    def load_b(kk: Any) -> Stmt:
        stmts = []
        ldm = elt.bits == 16 or g.transpose_B
        ni = 0
        while ni < NI:
            n0 = wni * WN + ni * 8
            pair = ni + 1 < NI
            dst = BufferLoad(b_frag, (E.const(ni * bper),))
            if ldm:
                num = 4 if pair else 2
                dk, dn = b_lane_offsets(lane, kstep, g.transpose_B, pair)
                src = ctx.load(b_buf, _b_elem(g, kk * kstep + dk, n0 + dn))
                trans = "false" if g.transpose_B else "true"
                stmts.append(Evaluate(call("tl::ldmatrix", addr(dst), addr(src), template=(num, trans))))
                ni += 2 if pair else 1
                continue
            for e in range(bper):  # int8 B stored k-major: element loads
                k, n = kk * 32 + 4 * q + (e % 4 + 16 * (e // 4)), n0 + g_
                stmts.append(BufferStore(b_frag, (E.const(ni * bper + e),), ctx.load(b_buf, _b_elem(g, k, n))))
            ni += 1
        return seq(*stmts)

    def mmas(kk: Any) -> Stmt:
        stmts = []
        a_reg = ctx.reg(a_buf) if a_regs else a_frag
        a_lay = ctx.layout(a_buf) if a_regs else None
        for mi in range(MI):
            for ni in range(NI):
                cptr = addr(BufferLoad(c_reg, (E.const(4 * (mi * NI + ni)),)))
                if a_regs:
                    aidx = 4 * (mi * a_lay.NI) + kk * 8
                else:
                    aidx = E.const(mi * aper)
                aptr = addr(BufferLoad(a_reg, (E.as_expr(aidx),)), "unsigned")
                bptr = addr(BufferLoad(b_frag, (E.const(ni * bper),)), "unsigned")
                stmts.append(Evaluate(call(_MMA[elt.name], cptr, aptr, bptr)))
        return seq(*stmts)

    steps = K // kstep
    kk = Var(ctx.fresh("kk"))
    loop = For(kk, E.const(0), steps, seq(load_a(kk), load_b(kk), mmas(kk)), "unroll")
    body.append(loop)
    return ctx.staged(seq(*body), reads=staged)


def _fma_gemm(ctx: Ctx, g: Gemm) -> Stmt:
    """C[i, j] += sum_k A[i, k] * B[k, j] by each thread for the C elements it holds."""
    c = g.C.buffer
    lay = ctx.layout(c)
    acc_t = c.dtype
    calc_t = dt.float32 if acc_t.is_float and acc_t.bits < 32 else acc_t
    staged = [r.buffer for r in (g.A, g.B) if r.buffer.is_fragment]
    K = g.A.tile_shape()[0 if g.transpose_A else 1]
    acc = ctx.registers("acc", 1, calc_t)

    def one(k: Any) -> Stmt:
        i, j = lay.coords(ctx.tid, k)
        kv = Var(ctx.fresh("kr"))
        a = ctx.load(g.A.buffer, _a_elem(g, i, kv), staged=g.A.buffer.is_fragment)
        b = ctx.load(g.B.buffer, _b_elem(g, kv, j), staged=g.B.buffer.is_fragment)
        z = E.const(0)
        init = E.cast(calc_t, 0) if g.clear_accum else E.cast(calc_t, ctx.load(c, (), k))
        return seq(
            BufferStore(acc, (z,), init),
            For(kv, E.const(0), K, BufferStore(acc, (z,), BufferLoad(acc, (z,)) +
                                                E.cast(calc_t, a) * E.cast(calc_t, b)), "serial"),
            ctx.store(c, (), BufferLoad(acc, (z,)), k=k))

    return ctx.staged(ctx.unroll("k", lay.local_size, one), reads=staged)
