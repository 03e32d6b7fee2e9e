"""Hopper (sm_90a) builtins on the emulator: TMA, wgmma, the async proxy, setmaxnreg.

What the PTX ISA defines, as the sm_90a lowering uses it:

- **TMA loads** (``tl::tma_load(dst, map, bar, c0, c1, ...)``, coordinates innermost first): the
  copy engine reads the box of the tensor map (``Kernel.annotations["tma_maps"]``: global buffer,
  box, swizzle mode) at the coordinates, elements outside the tensor read as zero, and writes it
  densely (innermost dimension contiguous) at ``dst``, each 16-byte chunk moved by the swizzle:
  bits 4.. of the shared address XOR bits 7.. (128/64/32-byte modes: 3/2/1 bits). The whole box
  counts as transaction bytes on ``bar`` when the copy lands (:mod:`.mbarrier`); until then its
  bytes are in flight.
- **TMA stores** (``tl::tma_store(map, src, c...)``): read shared memory through the async proxy
  when issued (so generic writes before need ``fence.proxy.async``), write the box's in-bounds
  elements to global memory; the shared bytes stay in use until ``tl::tma_store_wait<N>``, which
  must retire every store before the block ends.
- **wgmma** (``tl::wgmma_ss / wgmma_rs / wgmma_ss_fp8``): each warpgroup (128 threads, all of
  them) multiplies a 64 x K tile of A by a K x N tile of B into its accumulator registers. Shared
  operands are read through their 64-bit matrix descriptors (``tl::wgmma_desc``: start address
  >> 4 in bits 0-13, leading byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45,
  swizzle mode in 62-63), so a wrong descriptor reads the wrong bytes, as on the GPU: K-major
  element (r, k) lies at ``start + (r // 8) * SBO + (r % 8) * W + k * e`` (W: the swizzle width in
  bytes), MN-major element (k, r) at ``start + (r // (W / e)) * LBO + (k // 8) * SBO + (k % 8) * W
  + (r % (W / e)) * e``, then swizzled as above. The result is computed when issued but reaches
  the registers only at the ``wgmma_wait_group`` that retires its commit group.
- **the async proxy**: TMA and wgmma access shared memory through the async proxy; generic
  stores become visible to it only after ``fence.proxy.async`` by the writer or by the issuing
  thread after it is ordered after the write. mbarrier initialization must be published to the
  copy engine with ``fence.mbarrier_init`` (or ``fence.proxy.async``).

Checks, reported as :class:`~tegula.errors.RaceError` / :class:`~tegula.errors.SyncError`:
reads of a TMA destination before the phase that covers it completes (in :mod:`.races`); global
memory written while a TMA load in flight reads it (:func:`.memory.check_tma_sources`); generic
writes read by TMA / wgmma without a proxy fence; stage buffers written (TMA, generic) while a
wgmma or another warpgroup may still read them; accumulator registers read or written while their
wgmma is in flight, or after ``wait_group`` before ``wgmma_fence_operands`` pins them; A
registers of a ``wgmma_rs`` overwritten while it is in flight or before they are pinned; wgmma
issued on registers touched since the last ``wgmma.fence``; wgmma or setmaxnreg run by part of a
warpgroup; results never waited for; register budgets beyond the register file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np
import ml_dtypes

from tegula.errors import RaceError, SyncError, UnsupportedError
from tegula.ir import expr as E
from tegula.backends.closure import MASK, CExpr, checks_unwritten, compile_expr, unwritten_read
from tegula.backends.emu.builtins import compile_addr, template
from tegula.backends.emu.context import STATE, Ctx, builtin_rule, lanes_of, lanes_text, where
from tegula.backends.emu.exprs import dims_of
from tegula.backends.emu.memory import check_tma_sources
from tegula.backends.emu.mbarrier import bar_of, fence_inits, settle
from tegula.backends.emu.cluster import multicast_targets, remote_bar

WARPGROUP = 128
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}    # CUtensorMapSwizzle -> bytes
DESC_SWIZZLE = {1: 128, 2: 64, 3: 32}           # wgmma descriptor mode -> bytes
REGISTER_FILE = 65536                           # 32-bit registers per SM


def units_of(pos: np.ndarray, unit: int) -> np.ndarray:
    """The tracker units of distinct byte positions that come in runs of whole units (16-byte
    chunks stay whole under a swizzle, elements under a descriptor)."""
    return pos.reshape(-1)[::unit] // unit


def swizzle(pos: np.ndarray, width: int) -> np.ndarray:
    """Shared byte addresses moved by a ``width``-byte swizzle (16-byte chunks XOR row bits)."""
    if not width:
        return pos
    mask = width // 16 - 1
    return pos ^ (((pos >> 7) & mask) << 4)


# ---------------------------------------------------------------------------------------------
# Per-block state
# ---------------------------------------------------------------------------------------------

@dataclass
class Regs:
    """Register state of one local buffer that wgmma reads or writes."""

    pend: np.ndarray                 # (numel, n) results not yet visible
    group: np.ndarray                # (numel, n) commit group of the wgmma writing it, -1 none
    unpinned: np.ndarray             # (numel, n) retired, not yet pinned by fence_operands
    site: np.ndarray                 # (numel, n) the wgmma that wrote it last
    reads: np.ndarray                # (numel, n) in flight as the A operand of a wgmma_rs (read, not written)
    name: str = ""


@dataclass
class Warpgroup:
    agent: int
    groups: list = field(default_factory=list)  # clock of each committed group
    regs: int = 0                                # setmaxnreg budget (0: not set)


@dataclass
class Hopper:
    """What one block's async units hold: warpgroups, wgmma registers, fences."""

    n: int
    wgs: dict = field(default_factory=dict)
    regs: dict = field(default_factory=dict)        # local buffer index -> Regs
    touched: dict = field(default_factory=dict)     # local buffer index -> (n,) accessed since wgmma.fence
    touch_at: dict = field(default_factory=dict)    # local buffer index -> (span, element) of the last access
    stores: dict = field(default_factory=dict)      # thread -> [agent, clock of each committed group,
    #                                                  (clock, span, buffer) of its last store]

    def warpgroup(self, st: Any, g: int) -> Warpgroup:
        w = self.wgs.get(g)
        if w is None:
            w = self.wgs[g] = Warpgroup(st.tracker.agent(f"warpgroup {g}'s wgmma", "wgmma"))
        return w

    def reg_state(self, info: Any) -> Regs:
        r = self.regs.get(info.index)
        if r is None:
            shape = (info.numel, self.n)
            r = self.regs[info.index] = Regs(np.zeros(shape, info.np), np.full(shape, -1, np.int32),
                                             np.zeros(shape, bool), np.zeros(shape, np.int32), np.zeros(shape, bool),
                                             info.name)
        return r


def hopper(st: Any) -> Hopper:
    h = st.hopper
    if h is None:
        h = st.hopper = Hopper(st.nthreads)
    return h


def _warpgroups(env: list, n: int, span: Any, what: str) -> list:
    """The warpgroups executing a ``.sync.aligned`` warpgroup instruction (all their threads)."""
    lanes = lanes_of(env[MASK], n)
    out = []
    for g in np.unique(lanes // WARPGROUP):
        mine = lanes[lanes // WARPGROUP == g]
        want = min(WARPGROUP, n - int(g) * WARPGROUP)
        if len(mine) != want:
            st = env[STATE]
            raise RaceError(f"{what} executed by {lanes_text(mine)} only: it needs the whole warpgroup "
                            f"{int(g)} ({st.rep.block})", span)
        out.append((int(g), mine))
    return out


# ---------------------------------------------------------------------------------------------
# TMA
# ---------------------------------------------------------------------------------------------

@dataclass
class TmaCopy:
    pos: np.ndarray        # pool byte positions
    src: np.ndarray        # the global array read, when the copy lands (not when it is issued)
    flat: np.ndarray       # flat element indices of the box in it
    ok: np.ndarray         # which are in bounds (the others land as zeros)
    units: np.ndarray      # (1, m) tracker units
    nbytes: int
    site: int
    buf: Any
    lane: int              # the issuing thread

    def land(self, st: Any, b: Any) -> None:
        """Deliver this copy on ``b`` (:func:`land_tma`): what ``mbarrier.deliver`` calls."""
        land_tma(st, b, self)


def _tma_map(e: E.Builtin, ctx: Ctx, arg: Any) -> Any:
    m = ctx.info.get("tma_maps", {}).get(id(arg))
    if m is None:
        raise UnsupportedError(f"{e.name}: '{arg}' is not a tensor map of this kernel "
                               "(Kernel.annotations['tma_maps'])", e.span or ctx.span)
    return m


class _Box:
    """One tensor map seen by the emulator: element offsets of a box and which are in bounds."""

    def __init__(self, m: Any, ctx: Ctx, span: Any):
        self.m = m
        self.ginfo = ctx.buf(m.buffer)
        self.dims = dims_of(self.ginfo, ctx)
        self.eb = m.buffer.dtype.itemsize
        self.sw = SWIZZLE_BYTES[m.swizzle]
        self.box = tuple(int(b) for b in m.box)        # innermost first
        if self.sw and self.box[0] * self.eb > self.sw:
            raise UnsupportedError(f"tensor map of '{m.buffer.name}': an inner box of {self.box[0] * self.eb} "
                                   f"bytes exceeds its {self.sw}-byte swizzle", span)
        self.nbytes = int(np.prod(self.box)) * self.eb
        # box element i (row-major, innermost fastest) -> per-dimension offsets, innermost first
        grids = np.meshgrid(*[np.arange(b) for b in reversed(self.box)], indexing="ij")
        self.offs = [g.ravel() for g in reversed(grids)]

    def elements(self, env: list, coords: list) -> tuple[np.ndarray, np.ndarray]:
        """(flat global index, in bounds) of every element of the box at ``coords``."""
        shape = [int(d(env)) if callable(d) else int(d) for d in self.dims]  # outermost first
        inner_first = list(reversed(shape))
        ok = np.ones(len(self.offs[0]), bool)
        flat = np.zeros(len(self.offs[0]), np.int64)
        stride = 1
        for d, (c, o) in enumerate(zip(coords, self.offs)):
            i = c + o
            ok &= (i >= 0) & (i < inner_first[d])
            flat += np.clip(i, 0, inner_first[d] - 1) * stride
            stride *= inner_first[d]
        return flat, ok

    def smem(self, base: int) -> np.ndarray:
        """Pool byte positions of every byte of the box written at byte ``base``."""
        lin = np.arange(self.nbytes, dtype=np.int64) + base
        return swizzle(lin, self.sw)


def _smem_dst(st: Any, info: Any, addr: Any, lane: int, box: _Box, span: Any, what: str) -> int:
    f = int(np.broadcast_to(np.asarray(addr.flat, dtype=np.int64), (st.nthreads,))[lane])
    base = info.offset + f * info.itemsize
    if base % 128:
        raise RaceError(f"{what}: shared address {base} of '{info.name}' is not 128-byte aligned "
                        f"({st.rep.block})", span)
    if f < 0 or f * info.itemsize + box.nbytes > info.numel * info.itemsize:
        st.rep.oob(f"thread {lane}: {what} of {box.nbytes} bytes at element {f} leaves shared buffer "
                   f"'{info.name}' of {info.numel * info.itemsize} bytes", span, (info.index, id(span)))
    return base


def _compile_coords(e: E.Builtin, ctx: Ctx, first: int) -> list:
    return [compile_expr(a, ctx).fn for a in e.args[first:]]


def _lane_coords(env: list, fns: list, lane: int, n: int) -> list:
    return [int(np.broadcast_to(np.asarray(f(env)), (n,))[lane]) for f in fns]


def _tma_load_rule(multicast: bool) -> Callable:
    """``tl::tma_load(dst, map, bar, c...)``, or with ``multicast`` ``tl::tma_load_multicast(dst,
    map, bar, mask, c...)``: the box lands at ``dst``'s offset in every block of the cluster whose
    bit ``mask`` sets, counted on the mbarrier at ``bar``'s offset there (:mod:`.cluster`)."""
    def rule(e: E.Builtin, ctx: Ctx) -> CExpr:
        span = e.span or ctx.span
        fd, dinfo = compile_addr(e.args[0], ctx, e.name)
        if dinfo.scope != "shared":
            raise UnsupportedError(f"{e.name} must write shared memory, not '{dinfo.name}'", span)
        box = _Box(_tma_map(e, ctx, e.args[1]), ctx, span)
        fb, _ = compile_addr(e.args[2], ctx, e.name)
        fmask = compile_expr(e.args[3], ctx).fn if multicast else None
        fcs = _compile_coords(e, ctx, 4 if multicast else 3)
        if len(fcs) != len(box.box):
            raise UnsupportedError(f"{e.name}: {len(fcs)} coordinates for a {len(box.box)}-d tensor map", span)
        site = ctx.site(dinfo, "TMA load", span)
        n = ctx.nthreads
        gslot = box.ginfo.slot
        what = "a multicast TMA load" if multicast else "a TMA load"

        def issue(env: list) -> Any:
            st = env[STATE]
            dst, baddr = fd(env), fb(env)
            bflat = np.broadcast_to(np.asarray(baddr.flat), (n,))
            masks = np.broadcast_to(np.asarray(fmask(env)), (n,)) if fmask is not None else None
            for lane in lanes_of(env[MASK], n):
                lane = int(lane)
                elem = int(bflat[lane])
                flat, ok = box.elements(env, _lane_coords(env, fcs, lane, n))
                base = _smem_dst(st, dinfo, dst, lane, box, span, "TMA load")
                if masks is None:
                    targets = [(st, bar_of(env, baddr, elem, span, what, np.array([lane])))]
                else:
                    targets = [(p, remote_bar(env, p, baddr, elem, np.array([lane]), span, what))
                               for p in multicast_targets(env, int(masks[lane]), span)]
                for dst_st, b in targets:
                    _issue_box(st, dst_st, b, lane, box, flat, ok, base, site, dinfo, env[gslot], span)
            return np.True_
        return CExpr(issue, False)
    return rule


def _issue_box(st: Any, dst_st: Any, b: Any, lane: int, box: "_Box", flat: np.ndarray, ok: np.ndarray,
               base: int, site: int, dinfo: Any, src: np.ndarray, span: Any) -> None:
    """Thread ``lane`` of block ``st`` starts one box into block ``dst_st``'s shared memory at byte
    ``base``, counted on ``b`` (of ``dst_st``): the copy engine of ``b`` is ordered after the lane."""
    if not b.fenced:
        raise SyncError(f"a TMA load completes on mbarrier '{b.name}', whose initialization was "
                        f"not fenced for the async proxy ({dst_st.rep.block})\n"
                        f"  thread {lane}: {where(span)}\n"
                        f"  thread {b.init_thread}: {where(b.init_span)}", span,
                        hint="tl::fence_barrier_init() (fence.mbarrier_init) after initializing "
                        "the barriers, before the block barrier that publishes them")
    tr = dst_st.tracker
    pos = box.smem(base)
    if b.agent < 0:
        b.agent = tr.agent(f"the TMA load on mbarrier '{b.name}'", "tma")
    tr.vc[b.agent] = np.maximum(tr.vc[b.agent], st.tracker.vc[lane])
    units = units_of(pos, tr.unit)[None, :]
    tr.issue(units, np.array([b.agent]), site, dinfo, tag=b.phase, distinct=True)
    b.inflight.append(TmaCopy(pos, src, flat, ok, units, box.nbytes, site, dinfo, lane))


builtin_rule("tl::tma_load")(_tma_load_rule(False))
builtin_rule("tl::tma_load_multicast")(_tma_load_rule(True))


def land_tma(st: Any, b: Any, c: TmaCopy) -> None:
    """The copy engine delivers ``c``: the box's global elements as they are now (a copy reads
    global memory until it completes) into shared memory, transaction bytes on ``b``."""
    vals = np.where(c.ok, c.src[c.flat], np.zeros((), c.src.dtype))
    st.pool[c.pos] = np.ascontiguousarray(vals).view(np.uint8)
    st.tracker.land(c.units, np.array([b.agent]), c.site, c.buf, tag=b.phase, distinct=True)
    b.tx -= c.nbytes
    settle(st, b)


@builtin_rule("tl::tma_store")
def _tma_store(e: E.Builtin, ctx: Ctx) -> CExpr:
    span = e.span or ctx.span
    box = _Box(_tma_map(e, ctx, e.args[0]), ctx, span)
    fs, sinfo = compile_addr(e.args[1], ctx, "tl::tma_store")
    fcs = _compile_coords(e, ctx, 2)
    site = ctx.site(sinfo, "TMA store", span)
    n = ctx.nthreads
    gslot = box.ginfo.slot
    gdt = box.ginfo.np

    def issue(env: list) -> Any:
        st = env[STATE]
        tr = st.tracker
        h = hopper(st)
        src = fs(env)
        for lane in lanes_of(env[MASK], n):
            lane = int(lane)
            base = _smem_dst(st, sinfo, src, lane, box, span, "TMA store")
            pos = box.smem(base)
            rec = h.stores.get(lane)
            if rec is None:
                rec = h.stores[lane] = [tr.agent(f"thread {lane}'s TMA store", "tma_store"), [], None]
            tr.join_agent(rec[0], lane)
            rec[2] = (int(tr.own(rec[0])), span, sinfo.name)  # the last store: waited for by the end?
            tr.async_read(units_of(pos, tr.unit), rec[0], np.array([lane]), site, sinfo)
            flat, ok = box.elements(env, _lane_coords(env, fcs, lane, n))
            vals = np.ascontiguousarray(st.pool[pos]).view(gdt)
            check_tma_sources(st, box.ginfo, env[gslot], flat[ok][None, :], np.array([lane]), span)
            env[gslot][flat[ok]] = vals[ok]
        return np.True_
    return CExpr(issue, False)


@builtin_rule("tl::tma_store_commit")
def _tma_store_commit(e: E.Builtin, ctx: Ctx) -> CExpr:
    n = ctx.nthreads

    def commit(env: list) -> Any:
        st = env[STATE]
        h = hopper(st)
        for lane in lanes_of(env[MASK], n):
            rec = h.stores.get(int(lane))
            if rec is not None:  # an empty group counts too (tma_store_wait<N> counts groups)
                rec[1].append(int(st.tracker.own(rec[0])))
                st.tracker.tick(rec[0])
        return np.True_
    return CExpr(commit, False)


@builtin_rule("tl::tma_store_wait")
def _tma_store_wait(e: E.Builtin, ctx: Ctx) -> CExpr:
    keep = int(template(e)[0]) if template(e) else 0
    n = ctx.nthreads

    def wait(env: list) -> Any:
        st = env[STATE]
        h = hopper(st)
        for lane in lanes_of(env[MASK], n):
            rec = h.stores.get(int(lane))
            if rec is not None and len(rec[1]) > keep:
                clk = rec[1][len(rec[1]) - keep - 1]
                tr = st.tracker
                tr.see(int(lane), rec[0], clk)
        return np.True_
    return CExpr(wait, False)


# ---------------------------------------------------------------------------------------------
# Fences and setmaxnreg
# ---------------------------------------------------------------------------------------------

@builtin_rule("tl::fence_proxy_async")
def _fence_proxy_async(e: E.Builtin, ctx: Ctx) -> CExpr:
    n = ctx.nthreads

    def fence(env: list) -> Any:
        st = env[STATE]
        lanes = lanes_of(env[MASK], n)
        st.tracker.fence(lanes)
        fence_inits(st, lanes)
        return np.True_
    return CExpr(fence, False)


@builtin_rule("tl::wgmma_order_after")
def _wgmma_order_after(e: E.Builtin, ctx: Ctx) -> CExpr:
    """A scheduling constraint for the CUDA compiler (a store nobody reads): its operand is
    evaluated, so the register reads it makes are checked, and nothing else happens."""
    f = compile_expr(e.args[0], ctx).fn

    def run(env: list) -> Any:
        f(env)
        return np.True_
    return CExpr(run, False)


@builtin_rule("tl::wgmma_fence")
def _wgmma_fence(e: E.Builtin, ctx: Ctx) -> CExpr:
    n, span = ctx.nthreads, e.span or ctx.span

    def fence(env: list) -> Any:
        h = hopper(env[STATE])
        for _, lanes in _warpgroups(env, n, span, "wgmma.fence"):
            for t in h.touched.values():
                t[lanes] = False
        return np.True_
    return CExpr(fence, False)


def _setmaxnreg(inc: Optional[bool]) -> Callable:
    """setmaxnreg.inc / .dec (``inc`` None: the template's second value says which)."""
    def rule(e: E.Builtin, ctx: Ctx) -> CExpr:
        tpl = template(e)
        regs = int(tpl[0]) if tpl else int(compile_expr(e.args[0], ctx).fn([]))
        up = bool(int(tpl[1])) if inc is None else inc
        n, span = ctx.nthreads, e.span or ctx.span
        what = f"setmaxnreg.{'inc' if up else 'dec'} {regs}"
        if regs % 8 or not 24 <= regs <= 256:
            raise UnsupportedError(f"{what}: the register count must be a multiple of 8 in [24, 256]", span)

        def run(env: list) -> Any:
            st = env[STATE]
            h = hopper(st)
            nwg = -(-n // WARPGROUP)
            start = min(256, REGISTER_FILE // (nwg * WARPGROUP)) // 8 * 8  # the launch's share

            def total(g: int = -1) -> int:
                return sum((regs if i == g else (h.wgs[i].regs if i in h.wgs and h.wgs[i].regs else start))
                           * WARPGROUP for i in range(nwg))

            for g, _ in _warpgroups(env, n, span, what):
                if up and total(g) > REGISTER_FILE:
                    # setmaxnreg.inc waits until other warpgroups released enough registers
                    err = SyncError(f"deadlock: {what} by warpgroup {g} waits for registers nobody "
                                    f"releases: the block's warpgroups would hold {total(g)} of the "
                                    f"{REGISTER_FILE} registers ({st.rep.block})\n  warpgroup {g}: "
                                    f"{where(span)}", span, hint="the other warpgroups must lower their "
                                    "budget (setmaxnreg.dec) enough for this increase")
                    if st.scheduler is None:
                        raise err
                    st.scheduler.block(lambda g=g: total(g) <= REGISTER_FILE, env, lambda err=err: err,
                                       what=f"warpgroup {g} waits for registers: {where(span)}")
                h.warpgroup(st, g).regs = regs
            return np.True_
        return CExpr(run, False)
    return rule


builtin_rule("tl::warpgroup_reg_alloc")(_setmaxnreg(True))
builtin_rule("tl::warpgroup_reg_dealloc")(_setmaxnreg(False))
builtin_rule("tl::set_max_nreg")(_setmaxnreg(None))


# ---------------------------------------------------------------------------------------------
# wgmma
# ---------------------------------------------------------------------------------------------

@builtin_rule("tl::wgmma_desc")
def _wgmma_desc(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, info = compile_addr(e.args[0], ctx, "tl::wgmma_desc")
    flbo = compile_expr(e.args[1], ctx).fn
    fsbo = compile_expr(e.args[2], ctx).fn
    mode = int(template(e)[0]) if template(e) else 0
    if info.scope != "shared":
        raise UnsupportedError(f"tl::wgmma_desc must point at shared memory, not '{info.name}'", e.span or ctx.span)

    def desc(env: list) -> Any:
        a = fa(env)
        start = info.offset + np.asarray(a.flat, dtype=np.uint64) * np.uint64(info.itemsize)
        d = (start >> np.uint64(4)) & np.uint64(0x3FFF)
        d |= ((np.asarray(flbo(env)).astype(np.uint64) >> np.uint64(4)) & np.uint64(0x3FFF)) << np.uint64(16)
        d |= ((np.asarray(fsbo(env)).astype(np.uint64) >> np.uint64(4)) & np.uint64(0x3FFF)) << np.uint64(32)
        d |= np.uint64(mode & 3) << np.uint64(62)
        return d
    return CExpr(desc, True)


def _decode(d: int) -> tuple[int, int, int, int]:
    """(start byte, leading byte offset, stride byte offset, swizzle bytes) of a descriptor."""
    start = (d & 0x3FFF) << 4
    lbo = ((d >> 16) & 0x3FFF) << 4
    sbo = ((d >> 32) & 0x3FFF) << 4
    mode = (d >> 62) & 3
    return start, lbo, sbo, DESC_SWIZZLE.get(mode, 0)


def operand_bytes(d: int, rows: int, k: int, eb: int, mn_major: bool) -> np.ndarray:
    """Pool byte positions ``(rows, k, eb)`` of a ``rows x k`` operand (M or N by K) that the
    descriptor ``d`` describes."""
    start, lbo, sbo, sw = _decode(d)
    if not sw:
        raise UnsupportedError("wgmma descriptors without a swizzle mode are not emulated")
    r = np.arange(rows)[:, None]
    kk = np.arange(k)[None, :]
    if mn_major:
        per = sw // eb
        off = (r // per) * lbo + (kk // 8) * sbo + (kk % 8) * sw + (r % per) * eb
    else:
        off = (r // 8) * sbo + (r % 8) * sw + kk * eb
    pos = start + off[:, :, None] + np.arange(eb)
    return swizzle(pos.astype(np.int64), sw)


# (rows, cols) of accumulator register j of thread l of a warpgroup, for N columns
def acc_index(N: int) -> tuple[np.ndarray, np.ndarray]:
    l = np.arange(WARPGROUP)[:, None]
    j = np.arange(N // 2)[None, :]
    w, g, t = l // 32, (l % 32) // 4, l % 4
    i = j % 4
    row = 16 * w + g + 8 * (i // 2)
    col = 8 * (j // 4) + 2 * t + (i % 2)
    return row, col


def a_reg_index() -> tuple[np.ndarray, np.ndarray]:
    """(row, k) of A register element e (of 8) of thread l: the m16n8k16 A layout per warp."""
    l = np.arange(WARPGROUP)[:, None]
    e = np.arange(8)[None, :]
    w, g, q = l // 32, (l % 32) // 4, l % 4
    return 16 * w + g + 8 * ((e // 2) % 2), 2 * q + e % 2 + 8 * (e // 4)


_ACC: dict = {}
_A_ROW, _A_COL = a_reg_index()


def _np_dtype(d: Any) -> np.dtype:
    name = getattr(d, "name", str(d))
    return {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16),
            "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3fn),
            "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2)}[name]


def _buffer_at(st: Any, byte: int) -> Any:
    """The shared buffer at ``byte``: of buffers the planner gave the same bytes (their lifetimes
    do not overlap), the one those bytes were last written through."""
    held = [info for info in st.shared_infos if info.offset <= byte < info.offset + info.numel * info.itemsize]
    if len(held) > 1:
        last = int(st.tracker.w_buf[byte // st.tracker.unit])
        return next((info for info in held if info.index == last), held[0])
    return held[0] if held else None


def _uniform(v: Any, lanes: np.ndarray, n: int, what: str, st: Any, span: Any) -> int:
    a = np.broadcast_to(np.asarray(v), (n,))[lanes]
    if (a != a[0]).any():
        raise RaceError(f"{what} differs across the threads of the warpgroup ({lanes_text(lanes)}): a "
                        f"warpgroup instruction takes one value ({st.rep.block})", span)
    return int(a[0])


def _read_operand(st: Any, d: int, rows: int, k: int, dtype: np.dtype, mn_major: bool, agent: int,
                  lanes: np.ndarray, site: int, span: Any, what: str) -> np.ndarray:
    """The ``rows x k`` operand at descriptor ``d``, read through the async proxy."""
    eb = dtype.itemsize
    pos = operand_bytes(d, rows, k, eb, mn_major)
    start = _decode(d)[0]
    info = _buffer_at(st, start)
    if info is None or pos.min() < 0 or pos.max() >= len(st.pool):
        raise RaceError(f"{what}: the descriptor (start byte {start}) addresses bytes outside the shared "
                        f"buffers ({st.rep.block})", span)
    tr = st.tracker
    tr.sites[site].buffer = info
    tr.async_read(units_of(pos, tr.unit), agent, lanes, site, info)
    return st.pool[pos.reshape(-1)].view(dtype).reshape(rows, k)


def _wgmma_rule(kind: str) -> Callable:
    def rule(e: E.Builtin, ctx: Ctx) -> CExpr:
        span = e.span or ctx.span
        tpl = template(e)
        N = int(tpl[0])
        if kind == "fp8":
            adt, bdt = _np_dtype(tpl[1]), _np_dtype(tpl[2])
            ks, a_mn, b_mn = 32, False, False
        elif kind == "ss":
            adt = bdt = _np_dtype(tpl[1])
            ks, a_mn, b_mn = 16, bool(tpl[2]), bool(tpl[3])
        else:
            adt = bdt = _np_dtype(tpl[1])
            ks, a_mn, b_mn = 16, False, bool(tpl[2])
        fc, cinfo = compile_addr(e.args[0], ctx, e.name)
        if cinfo.scope != "local":
            raise UnsupportedError(f"{e.name}: the accumulator must be registers, not '{cinfo.name}'", span)
        fa = compile_expr(e.args[1], ctx).fn if kind != "rs" else None
        fra, ainfo = compile_addr(e.args[1], ctx, e.name) if kind == "rs" else (None, None)
        fb = compile_expr(e.args[2], ctx).fn
        # scale_d (wgmma.h's last argument, 1 when left out): D = A * B + (scale_d ? D : 0)
        fs = compile_expr(e.args[3], ctx).fn if len(e.args) > 3 else None
        site_a = ctx.site(None, "wgmma", span)
        site_b = ctx.site(None, "wgmma", span)
        n = ctx.nthreads
        if N not in _ACC:
            _ACC[N] = acc_index(N)
        row, col = _ACC[N]
        cslot = cinfo.slot
        aslot = ainfo.slot if ainfo is not None else -1

        def run(env: list) -> Any:
            st = env[STATE]
            h = hopper(st)
            tr = st.tracker
            cst = h.reg_state(cinfo)
            c0 = fc(env)
            da = fa(env) if fa is not None else None
            db = fb(env)
            sd = fs(env) if fs is not None else None
            for g, lanes in _warpgroups(env, n, span, "wgmma.mma_async"):
                w = h.warpgroup(st, g)
                for info in (cinfo, ainfo):
                    t_ = h.touched.get(info.index) if info is not None else None
                    if t_ is not None and t_[lanes].any():
                        t = int(lanes[t_[lanes]][0])
                        at, k = h.touch_at[info.index]
                        raise RaceError(f"wgmma.mma_async by warpgroup {g} uses register '{info.name}'[{k}] that "
                                        f"thread {t} accessed with no wgmma.fence in between ({st.rep.block})\n"
                                        f"  warpgroup {g}'s wgmma: {where(span)}\n  thread {t}: {where(at)}",
                                        span, hint="tl::wgmma_fence() between register accesses and the wgmma "
                                        "that uses the same registers")
                tr.join_agent(w.agent, lanes)
                what = f"wgmma of warpgroup {g}"
                b = _read_operand(st, _uniform(db, lanes, n, "the B descriptor", st, span), N, ks, bdt, b_mn,
                                  w.agent, lanes, site_b, span, what).T
                if kind == "rs":
                    f = _uniform(fra(env).flat, lanes, n, "the A register address", st, span)
                    areg = h.regs.get(ainfo.index)
                    if areg is not None and ((areg.group[f:f + 8, lanes] >= 0) & ~areg.reads[f:f + 8, lanes]).any():
                        raise RaceError(f"{what} reads A registers '{ainfo.name}' that a wgmma in flight "
                                        f"still writes ({st.rep.block})", span)
                    av = env[aslot][f:f + 8][:, lanes].T          # (128, 8)
                    # the registers stay the wgmma's until its group is retired and pinned
                    ast = h.reg_state(ainfo)
                    ast.reads[f:f + 8, lanes[0]:lanes[-1] + 1] = True
                    ast.pend[f:f + 8, lanes[0]:lanes[-1] + 1] = av.T
                    ast.group[f:f + 8, lanes[0]:lanes[-1] + 1] = len(w.groups)
                    ast.site[f:f + 8, lanes[0]:lanes[-1] + 1] = site_a
                    a = np.zeros((64, 16), av.dtype)
                    a[_A_ROW, _A_COL] = av
                else:
                    a = _read_operand(st, _uniform(da, lanes, n, "the A descriptor", st, span), 64, ks, adt, a_mn,
                                      w.agent, lanes, site_a, span, what)
                f0 = _uniform(c0.flat, lanes, n, "the accumulator address", st, span)
                regs = slice(f0, f0 + N // 2)
                busy = cst.group[regs][:, lanes] >= 0
                cur = np.where(busy, cst.pend[regs][:, lanes], env[cslot][regs][:, lanes])  # (N/2, 128)
                D = np.zeros((64, N), np.float32)
                if sd is None or _uniform(sd, lanes, n, "scale_d", st, span):
                    if checks_unwritten(cinfo.buffer):   # never written: a missing T.clear
                        unwritten_read(cinfo.buffer, cur, span, "wgmma accumulator: a read", tile=False)
                    D[row, col] = cur.T  # accumulate; scale_d = 0 overwrites
                D = (a.astype(np.float64) @ b.astype(np.float64) + D).astype(np.float32)
                cst.pend[regs, lanes[0]:lanes[-1] + 1] = D[row, col].T
                cst.group[regs, lanes[0]:lanes[-1] + 1] = len(w.groups)
                cst.site[regs, lanes[0]:lanes[-1] + 1] = site_a
                cst.reads[regs, lanes[0]:lanes[-1] + 1] = False
            return np.True_
        return CExpr(run, False)
    return rule


builtin_rule("tl::wgmma_ss")(_wgmma_rule("ss"))
builtin_rule("tl::wgmma_rs")(_wgmma_rule("rs"))
builtin_rule("tl::wgmma_ss_fp8")(_wgmma_rule("fp8"))


@builtin_rule("tl::wgmma_commit_group")
def _wgmma_commit(e: E.Builtin, ctx: Ctx) -> CExpr:
    n, span = ctx.nthreads, e.span or ctx.span

    def commit(env: list) -> Any:
        st = env[STATE]
        h = hopper(st)
        tr = st.tracker
        for g, _ in _warpgroups(env, n, span, "wgmma.commit_group"):
            w = h.warpgroup(st, g)
            w.groups.append(int(tr.own(w.agent)))
            tr.tick(w.agent)
        return np.True_
    return CExpr(commit, False)


@builtin_rule("tl::wgmma_wait_group")
def _wgmma_wait(e: E.Builtin, ctx: Ctx) -> CExpr:
    keep = int(template(e)[0]) if template(e) else 0
    n, span = ctx.nthreads, e.span or ctx.span

    def wait(env: list) -> Any:
        st = env[STATE]
        h = hopper(st)
        tr = st.tracker
        for g, lanes in _warpgroups(env, n, span, "wgmma.wait_group"):
            w = h.warpgroup(st, g)
            limit = len(w.groups) - keep
            if limit <= 0:
                continue
            sl = slice(int(lanes[0]), int(lanes[-1]) + 1)
            for info_index, r in h.regs.items():
                grp = r.group[:, sl]
                done = (grp >= 0) & (grp < limit)
                if done.any():
                    arr = env[st.local_slots[info_index]]
                    arr[:, sl][done] = r.pend[:, sl][done]
                    grp[done] = -1
                    r.unpinned[:, sl][done] = True
            tr.see(lanes, w.agent, w.groups[limit - 1])
        return np.True_
    return CExpr(wait, False)


@builtin_rule("tl::wgmma_fence_operands")
def _fence_operands(e: E.Builtin, ctx: Ctx) -> CExpr:
    fa, info = compile_addr(e.args[0], ctx, e.name)
    count = int(template(e)[0]) if template(e) else 1
    if e.args[0].attr("ctype") == "unsigned":  # 16-bit A registers as words
        count *= max(1, 4 // np.dtype(info.np).itemsize)
    n = ctx.nthreads

    def fence(env: list) -> Any:
        st = env[STATE]
        r = hopper(st).regs.get(info.index)
        if r is not None:
            lanes = lanes_of(env[MASK], n)
            f = int(np.broadcast_to(np.asarray(fa(env).flat), (n,))[lanes[0]]) if len(lanes) else 0
            r.unpinned[f:f + count][:, lanes] = False
        return np.True_
    return CExpr(fence, False)


def check_registers(st: Any, info: Any, f: Any, lanes: np.ndarray, write: bool, span: Any) -> None:
    """A generic access of wgmma registers ``info[f]`` by ``lanes``."""
    if not len(lanes):
        return
    h = hopper(st)
    t_ = h.touched.get(info.index)
    if t_ is None:
        t_ = h.touched[info.index] = np.zeros(st.nthreads, bool)
    t_[lanes] = True
    h.touch_at[info.index] = (span, int(np.broadcast_to(np.asarray(f), (st.nthreads,))[lanes[0]]))
    r = h.regs.get(info.index)
    if r is None:
        return
    fl = np.broadcast_to(np.asarray(f, dtype=np.int64), (st.nthreads,))[lanes]
    busy = r.group[fl, lanes] >= 0
    if not write:  # the A registers of a wgmma in flight may be read (it only reads them too)
        busy &= ~r.reads[fl, lanes]
    loose = r.unpinned[fl, lanes]
    if busy.any() or loose.any():
        i = int(np.flatnonzero(busy | loose)[0])
        t, k = int(lanes[i]), int(fl[i])
        wsite = st.tracker.sites[int(r.site[k, t])]
        verb = "writes" if write else "reads"
        if busy[i] and not r.reads[k, t]:
            msg = (f"accumulator read before wgmma.wait_group: thread {t} {verb} register '{info.name}'[{k}] "
                   f"while the wgmma that writes it is still in flight ({st.rep.block})")
            hint = "wgmma.wait_group must retire the wgmma's commit group before its registers are used"
        elif busy[i] and write:
            msg = (f"A operand overwritten before wgmma.wait_group: thread {t} writes register "
                   f"'{info.name}'[{k}] while the wgmma that reads it is still in flight ({st.rep.block})")
            hint = "wgmma.wait_group must retire the wgmma's commit group before its A registers are reused"
        else:
            msg = (f"accumulator used before wgmma_fence_operands: thread {t} {verb} register "
                   f"'{info.name}'[{k}] after wgmma.wait_group retired it, without the fence that keeps the "
                   f"compiler from moving the access above the wait ({st.rep.block})")
            hint = "tl::wgmma_fence_operands(...) right after the wait_group"
        st.rep.report(RaceError(f"{msg}\n  thread {t}: {where(span)}\n  warpgroup {t // WARPGROUP}'s wgmma: "
                                f"{wsite.where()}", span, hint=hint), ("wgmma-regs", id(span)))


def check_done(st: Any) -> None:
    """At the end of a block: no wgmma result left unretired, no A operand left unpinned, no TMA
    store still reading shared memory (its group committed and waited for)."""
    h = st.hopper
    if h is None:
        return
    for lane, (agent, _, last) in sorted(h.stores.items()):
        if last is not None and int(st.tracker.seen(lane, agent)) < last[0]:
            raise RaceError(f"the block ends while a TMA store may still read shared buffer '{last[2]}': thread "
                            f"{lane} never waited for it (no tma_store_commit, then tma_store_wait, after it) "
                            f"({st.rep.block})\n  thread {lane}'s TMA store: {where(last[1])}", last[1],
                            hint="tl::tma_store_commit() and tl::tma_store_wait<0>() by the issuing thread "
                            "before the block ends, so the shared memory is not released under the copy")
    for idx, r in h.regs.items():
        if (r.reads & r.unpinned & (r.group < 0)).any():
            k, t = (int(x[0]) for x in np.nonzero(r.reads & r.unpinned & (r.group < 0)))
            wsite = st.tracker.sites[int(r.site[k, t])]
            raise RaceError(f"A operand registers never pinned: register '{r.name}'[{k}] of thread {t}, read by a wgmma_rs, "
                            f"has no wgmma_fence_operands after the wait_group that retires it, so the compiler "
                            f"may reuse it while the wgmma still reads it ({st.rep.block})\n"
                            f"  warpgroup {t // WARPGROUP}'s wgmma: {wsite.where()}", wsite.span,
                            hint="tl::wgmma_fence_operands(...) on the A registers right after the wait_group")
        if (r.group >= 0).any():
            k, t = (int(x[0]) for x in np.nonzero(r.group >= 0))
            wsite = st.tracker.sites[int(r.site[k, t])]
            raise RaceError(f"the block ends with wgmma results never waited for: register {k} of thread {t} "
                            f"(no wgmma.wait_group retires its commit group) ({st.rep.block})\n"
                            f"  warpgroup {t // WARPGROUP}'s wgmma: {wsite.where()}", wsite.span)
