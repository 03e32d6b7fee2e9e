"""Warp-wide matrix builtins: ``ldmatrix`` and ``mma.sync``, with the PTX ISA fragment layouts.

For lane ``l`` of a warp, ``g = l // 4`` (group) and ``t = l % 4`` (thread in group).

- ``ldmatrix.x{1,2,4}[.trans]`` (b16): lanes ``8j .. 8j+7`` give the shared addresses of rows
  0..7 of matrix ``j`` (16 bytes each). Lane ``l`` receives one 32-bit register per matrix:
  row ``g``, columns ``2t, 2t+1`` (``.trans``: column ``g``, rows ``2t, 2t+1``), the lower
  column (row) in the low half.
- ``mma.m16n8k16`` (f16 / bf16 inputs, f32 accumulator): A element ``i`` (of 8) is at row
  ``g + 8 * (i >> 1 & 1)``, column ``2t + (i & 1) + 8 * (i >> 2)``; B element ``i`` (of 4) at
  ``k = 2t + (i & 1) + 8 * (i >> 1)``, ``n = g``; C element ``i`` (of 4) at row
  ``g + 8 * (i >> 1)``, column ``2t + (i & 1)``.
- ``mma.m16n8k32`` (s8 / u8 inputs, s32 accumulator): A element ``i`` (of 16) at row
  ``g + 8 * (i >> 2 & 1)``, column ``4t + (i & 3) + 16 * (i >> 3)``; B element ``i`` (of 8) at
  ``k = 4t + (i & 3) + 16 * (i >> 2)``, ``n = g``; C as for m16n8k16.

Floating-point products are exact and summed in float64, then added to C and rounded to float32
once per mma (the hardware's internal order is unspecified; this is within its rounding).
Integer mma is exact and wraps to int32.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import ml_dtypes

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.backends.emu.builtins import compile_addr, template, warp_lanes
from tegula.backends.closure import CExpr, checks_unwritten, unwritten_read
from tegula.backends.emu.context import STATE, Ctx, builtin_rule
from tegula.backends.emu.memory import byte_offset, check_align, read_elems, write_elems

_LANE = np.arange(32)
_G, _T = _LANE // 4, _LANE % 4


def _perm(nelem: int, rows: int, cols: int, pos: Any) -> np.ndarray:
    """Gather index: matrix element (r, c) (flat r * cols + c) <- lane fragment (l * nelem + i)."""
    out = np.full(rows * cols, -1, np.int64)
    for i in range(nelem):
        r, c = pos(i)
        out[r * cols + c] = _LANE * nelem + i
    assert (out >= 0).all()
    return out


# (m, n, k) shape, element counts of A / B / C per lane, and where each element sits
_A16 = _perm(8, 16, 16, lambda i: (_G + 8 * ((i >> 1) & 1), 2 * _T + (i & 1) + 8 * (i >> 2)))
_B16 = _perm(4, 16, 8, lambda i: (2 * _T + (i & 1) + 8 * (i >> 1), _G))
_A32 = _perm(16, 16, 32, lambda i: (_G + 8 * ((i >> 2) & 1), 4 * _T + (i & 3) + 16 * (i >> 3)))
_B32 = _perm(8, 32, 8, lambda i: (4 * _T + (i & 3) + 16 * (i >> 2), _G))
_C_ROW = (_G[:, None] + 8 * (np.arange(4) >> 1)[None, :])      # (32, 4)
_C_COL = (2 * _T[:, None] + (np.arange(4) & 1)[None, :])
_C_OUT = (_C_ROW * 8 + _C_COL).ravel()                            # lane-major -> flat 16x8

_MMA = {
    # name: (k, A/B dtype, accumulator dtype, A perm, B perm)
    "tl::mma_m16n8k16_f16_f32": (16, np.dtype(np.float16), np.dtype(np.float32), _A16, _B16),
    "tl::mma_m16n8k16_bf16_f32": (16, np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32), _A16, _B16),
    "tl::mma_m16n8k32_s8_s32": (32, np.dtype(np.int8), np.dtype(np.int32), _A32, _B32),
    "tl::mma_m16n8k32_u8_s32": (32, np.dtype(np.uint8), np.dtype(np.int32), _A32, _B32),
}


@builtin_rule(*_MMA)
def _mma(e: E.Builtin, ctx: Ctx) -> CExpr:
    k, din, dacc, pa, pb = _MMA[e.name]
    span = e.span or ctx.span
    fc, _ = compile_addr(e.args[0], ctx, e.name)
    fa, _ = compile_addr(e.args[1], ctx, e.name)
    fb, _ = compile_addr(e.args[2], ctx, e.name)
    n = ctx.nthreads
    na = 16 * k // 32          # A elements per lane
    nb = 8 * k // 32           # B elements per lane
    isz = din.itemsize
    is_int = dacc.kind == "i"
    site = ctx.site(None, "mma", span)

    def mma(env: list) -> Any:
        st = env[STATE]
        lanes = warp_lanes(env, n, span, "mma.sync")
        if not len(lanes):
            return np.True_
        w = len(lanes) // 32
        a, _ = read_elems(env, st, fa(env), lanes, na * isz, din, site, span, "mma A fragment")
        b, _ = read_elems(env, st, fb(env), lanes, nb * isz, din, site, span, "mma B fragment")
        caddr = fc(env)
        c, _ = read_elems(env, st, caddr, lanes, 16, dacc, site, span, "mma accumulator")
        A = a.reshape(w, 32 * na)[:, pa].reshape(w, 16, k)
        B = b.reshape(w, 32 * nb)[:, pb].reshape(w, k, 8)
        C = np.empty((w, 128), dacc)
        C[:, _C_OUT] = c.reshape(w, 128)
        C = C.reshape(w, 16, 8)
        if is_int:
            D = (np.matmul(A.astype(np.int64), B.astype(np.int64)) + C).astype(np.int32)
        else:
            D = (np.matmul(A.astype(np.float64), B.astype(np.float64)) + C).astype(np.float32)
        out = D.reshape(w, 128)[:, _C_OUT].reshape(w * 32, 4)
        write_elems(env, st, caddr, lanes, out, site, span, "mma accumulator")
        return np.True_
    return CExpr(mma, False)


_LD_ROW = (_LANE // 4)[:, None]                       # (32, 1)
_LD_COL = 2 * (_LANE % 4)[:, None] + np.arange(2)     # (32, 2)


@builtin_rule("tl::ldmatrix")
def _ldmatrix(e: E.Builtin, ctx: Ctx) -> CExpr:
    t = template(e)
    num = int(t[0])
    trans = str(t[1]).lower() in ("true", "1") if len(t) > 1 else False
    if num not in (1, 2, 4):
        raise UnsupportedError(f"ldmatrix loads 1, 2 or 4 matrices, not {num}", e.span or ctx.span)
    span = e.span or ctx.span
    fd, _ = compile_addr(e.args[0], ctx, "ldmatrix")
    fs, sinfo = compile_addr(e.args[1], ctx, "ldmatrix")
    if sinfo.scope != "shared":
        raise UnsupportedError(f"ldmatrix reads shared memory, not '{sinfo.name}'", span)
    site = ctx.site(sinfo, "ldmatrix", span)
    dsite = ctx.site(None, "ldmatrix", span)
    n = ctx.nthreads
    u16 = np.dtype(np.uint16)

    def ldmatrix(env: list) -> Any:
        st = env[STATE]
        lanes = warp_lanes(env, n, span, "ldmatrix")
        if not len(lanes):
            return np.True_
        w = len(lanes) // 32
        src_lanes = lanes[(lanes % 32) < 8 * num]
        src = fs(env)
        check_align(st, sinfo, byte_offset(st, src, src_lanes), src_lanes, 16, span, "ldmatrix row")
        rows, _ = read_elems(env, st, src, src_lanes, 16, u16, site, span, "ldmatrix row")
        M = rows.reshape(w, num, 8, 8)
        regs = M[:, :, _LD_COL, _LD_ROW] if trans else M[:, :, _LD_ROW, _LD_COL]   # (w, num, 32, 2)
        out = np.ascontiguousarray(regs.transpose(0, 2, 1, 3)).reshape(w * 32, num * 2)
        write_elems(env, st, fd(env), lanes, out, dsite, span, "ldmatrix destination")
        return np.True_
    return CExpr(ldmatrix, False)


def compile_mma_run(stmts: tuple, ctx: Ctx) -> Any:
    """A run of mma.sync on constant registers (:func:`tegula.backends.emu.batch.mma_runs`) as
    one batched product: every fragment is read, the batch multiplied, every accumulator written."""
    from tegula.backends.emu.batch import static_mma
    from tegula.backends.emu.builtins import warp_lanes

    regs = [static_mma(s, ctx, _MMA) for s in stmts]
    name = regs[0][0]
    k, din, dacc, pa, pb = _MMA[name]
    na, nb = 16 * k // 32, 8 * k // 32
    (cinfo, _), (ainfo, _), (binfo, _) = regs[0][1:]
    ic = np.array([c0 for _, (_, c0), _, _ in regs])[:, None] + np.arange(4)     # (r, 4)
    ia = np.array([a0 for _, _, (_, a0), _ in regs])[:, None] + np.arange(na)    # (r, na)
    ib = np.array([b0 for _, _, _, (_, b0) in regs])[:, None] + np.arange(nb)    # (r, nb)
    r = len(stmts)
    span = stmts[0].value.span or ctx.span
    n = ctx.nthreads
    is_int = dacc.kind == "i"
    wide = np.int64 if is_int else np.float64
    sa, sb, sc = ainfo.slot, binfo.slot, cinfo.slot
    checked = [(info, x, what) for info, x, what in
               ((ainfo, lambda A, B, C: A, "mma A fragment"), (binfo, lambda A, B, C: B, "mma B fragment"),
                (cinfo, lambda A, B, C: C, "mma accumulator")) if checks_unwritten(info.buffer)]

    def mma_run(env: list) -> None:
        lanes = warp_lanes(env, n, span, "mma.sync")
        if not len(lanes):
            return
        w = len(lanes) // 32
        full = len(lanes) == n
        A = env[sa][ia] if full else env[sa][ia][..., lanes]      # (r, na, L)
        B = env[sb][ib] if full else env[sb][ib][..., lanes]
        C = env[sc][ic] if full else env[sc][ic][..., lanes]
        for info, x, what in checked:   # registers never written (a missing T.clear)
            unwritten_read(info.buffer, x(A, B, C), span, what + ": a read", tile=False)
        A = A.transpose(0, 2, 1).reshape(r, w, 32 * na)[..., pa].reshape(r, w, 16, k)
        B = B.transpose(0, 2, 1).reshape(r, w, 32 * nb)[..., pb].reshape(r, w, k, 8)
        Cm = np.empty((r, w, 128), dacc)
        Cm[..., _C_OUT] = C.transpose(0, 2, 1).reshape(r, w, 128)
        D = (np.matmul(A.astype(wide), B.astype(wide)) + Cm.reshape(r, w, 16, 8)).astype(dacc)
        out = D.reshape(r, w, 128)[..., _C_OUT].reshape(r, w * 32, 4).transpose(0, 2, 1)  # (r, 4, L)
        if full:
            env[sc][ic] = out
        else:
            env[sc][ic[:, :, None], lanes] = out
    return mma_run


def compile_ldmatrix_run(stmts: tuple, ctx: Ctx) -> Any:
    """A run of ldmatrix of one source line into distinct constant registers
    (:func:`tegula.backends.emu.batch.mma_runs`) as one gather: the shared rows of every
    statement are checked (alignment, bounds), recorded as one read and dealt to the registers.
    A misaligned or out-of-bounds row runs the statements one at a time, which report it."""
    from tegula.backends.emu.batch import static_ldmatrix
    from tegula.backends.emu.builtins import warp_lanes

    info = [static_ldmatrix(s, ctx) for s in stmts]
    num, trans, span, sinfo, (dinfo, _) = info[0]
    span = span or ctx.span
    singles = [ctx.rules.compile_stmt(s, ctx) for s in stmts]   # the fallback, in order
    srcs = [compile_addr(s.value.args[1], ctx, "ldmatrix")[0] for s in stmts]
    site = ctx.site(sinfo, "ldmatrix", span)
    per = 4 * num // dinfo.itemsize                                               # registers per lane
    idst = np.array([d0 for *_, (_, d0) in info])[:, None] + np.arange(per)      # (r, per)
    r, n = len(stmts), ctx.nthreads
    isz, total, off = sinfo.itemsize, sinfo.numel, sinfo.offset
    per_row = 16 // isz

    def sequential(env: list) -> None:
        for f in singles:
            f(env)

    def ldmatrix_run(env: list) -> None:
        lanes = warp_lanes(env, n, span, "ldmatrix")
        if not len(lanes):
            return
        w = len(lanes) // 32
        src_lanes = lanes[(lanes % 32) < 8 * num]
        F = np.stack([np.broadcast_to(np.asarray(f(env).flat, dtype=np.int64), (n,))[src_lanes]
                      for f in srcs])                                              # (r, k)
        if ((F * isz + off) % 16).any() or (F < 0).any() or (F + per_row > total).any():
            sequential(env)
            return
        st = env[STATE]
        st.tracker.read(st.tracker.units((off + F * isz).ravel(), 16), np.tile(src_lanes, r), site, sinfo)
        rows = env[sinfo.slot][F[..., None] + np.arange(per_row)]                   # (r, k, 8)
        M = np.ascontiguousarray(rows).view(np.uint16).reshape(r, w, num, 8, 8)
        regs = M[..., _LD_COL, _LD_ROW] if trans else M[..., _LD_ROW, _LD_COL]      # (r, w, num, 32, 2)
        out = regs.transpose(0, 1, 3, 2, 4).reshape(r, w * 32, 2 * num)             # (r, L, 2 num)
        out = np.ascontiguousarray(out).view(dinfo.np).transpose(0, 2, 1)          # (r, per, L)
        arr = env[dinfo.slot]
        if len(lanes) == n:
            arr[idst] = out
        else:
            arr[idst[:, :, None], lanes] = out
    return ldmatrix_run
