"""The expert-level ``T.*`` names for Hopper (sm_90): warp-specialized regions, TMA copies on
user barriers, register reallocation, proxy fences, wgmma.

``with T.ws(1): ...`` (or ``T.warp_specialize(1)``) is code that only warpgroup 1 (threads
128..255) runs; tile operations inside are computed by that warpgroup's threads alone, and the
barriers the compiler places inside are named barriers for those threads. The kernel becomes
thread-level code (docs/language.md). Producer and consumer warpgroups hand tiles to each other
through the barriers of ``T.alloc_barrier``; the compiler places no barrier between regions.

``T.tma_copy(src, dst, barrier=bar)`` loads a global tile into shared memory with the copy engine:
one thread announces the bytes on ``bar`` and issues the load; the phase of ``bar`` completes when
the bytes have landed and its arrivals are in (``T.barrier_arrive``). On the interpreter it is a
plain copy; for a GPU older than sm_90 it is an error.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from tegula.errors import KernelSyntaxError, KernelTypeError, ScopeError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.stmt import WARP_SPECIALIZE, WARPGROUP, AttrStmt, Copy, Evaluate, seq
from tegula.language import semantic
from tegula.language.builder import current
from tegula.language.primitives import _emit_op, _thread_var, gemm



@dataclass
class _WarpGroups:
    ids: tuple
    what: str

    def tegula_with(self, parser: Any, item: ast.withitem, body: list) -> None:
        b = parser.b
        k = b.require_kernel(self.what)
        if item.optional_vars is not None:
            raise KernelSyntaxError(f"`with {self.what}:` binds no name")
        if getattr(b, "ws_region", None) is not None:
            raise ScopeError(f"{self.what} cannot be nested inside another warp-specialized region")
        ids = sorted(self.ids)
        if not ids or any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in ids):
            raise KernelTypeError(f"{self.what}: warpgroup indices must be non-negative Python ints, "
                                  f"got {self.ids!r}")
        if ids != list(range(ids[0], ids[0] + len(ids))):
            raise KernelTypeError(f"{self.what}: the warpgroups of one region must be consecutive, "
                                  f"got {self.ids!r}", hint="use one region per run of warpgroups")
        threads = 1
        for t in k.threads:
            threads *= t
        lo, n = ids[0] * WARPGROUP, len(ids) * WARPGROUP
        if len(k.threads) != 1 or lo + n > threads:
            raise KernelTypeError(f"{self.what}: warpgroup {ids[-1]} needs threads "
                                  f"{lo}..{lo + n - 1}, but the kernel has {k.threads} threads",
                                  hint="a warpgroup is 128 threads: T.Kernel(..., threads=128 * groups)")
        _thread_var(k)
        b.ws_region = (lo, n)
        try:
            with b.frame() as stmts:
                parser.visit_body(body)
        finally:
            b.ws_region = None
        b.emit(AttrStmt(WARP_SPECIALIZE, (lo, n), seq(*stmts)))


def ws(*warp_group_idx: int) -> _WarpGroups:
    """``with T.ws(i, ...):`` code that only warpgroups ``i, ...`` (128 threads each) run."""
    return _WarpGroups(tuple(warp_group_idx), "T.ws")


def warp_specialize(*warp_group_idx: int) -> _WarpGroups:
    """Same as :func:`ws`."""
    return _WarpGroups(tuple(warp_group_idx), "T.warp_specialize")


def _barrier_slot(bar: Any) -> tuple[Buffer, E.Expr]:
    if isinstance(bar, Buffer) and bar.ndim == 1:
        bar = bar[0]
    if not (isinstance(bar, E.BufferLoad) and bar.buffer.is_shared and bar.buffer.dtype == dt.uint64
            and len(bar.indices) == 1):
        raise KernelTypeError(f"T.tma_copy: barrier= takes a barrier from T.alloc_barrier (or one "
                              f"element of it), got {semantic.describe(bar)}")
    return bar.buffer, bar.indices[0]


def tma_copy(src: Any, dst: Any, barrier: Any = None, **_ignored: Any) -> None:
    """``T.tma_copy(src, dst, barrier=bar)``: a global -> shared tile copy by the copy engine,
    its bytes counted on ``bar`` (sm_90; a plain copy on the interpreter)."""
    if barrier is None:
        raise KernelTypeError("T.tma_copy needs barrier=: the mbarrier that counts the bytes delivered",
                              hint="allocate one with T.alloc_barrier(arrive_count)")
    bars, slot = _barrier_slot(barrier)
    _emit_op("T.tma_copy", Copy, src, dst)
    b = current("T.tma_copy")
    c = b.stack[-1][-1]
    if not (c.src.buffer.is_global and c.dst.buffer.is_shared):
        b.stack[-1].pop()
        raise KernelTypeError(f"T.tma_copy copies global memory into shared memory, got "
                              f"{c.src.buffer.scope} '{c.src.buffer.name}' -> {c.dst.buffer.scope} "
                              f"'{c.dst.buffer.name}'", hint="use T.copy for other copies")
    b.stack[-1][-1] = Copy(c.src, c.dst, {"tma_bar": bars, "tma_stage": slot, "tma_user": True},
                           span=c.span)


def _hopper_call(what: str, name: str, *args: Any, template: tuple = ()) -> None:
    k = current(what).require_kernel(what)
    _thread_var(k)
    attrs = (("template", template),) if template else ()
    current().emit(Evaluate(E.Builtin(name, tuple(E.as_expr(a) for a in args), dt.bool_, attrs)))


def set_max_nreg(reg_count: int, is_inc: int) -> None:
    """``setmaxnreg``: the warpgroup running it raises (``is_inc=1``) or lowers (``0``) its
    register budget per thread to ``reg_count`` (24..256, a multiple of 8); sm_90a. Nothing on
    the interpreter."""
    if not isinstance(reg_count, int) or isinstance(reg_count, bool) or not 24 <= reg_count <= 256 \
            or reg_count % 8:
        raise KernelTypeError(f"T.set_max_nreg: reg_count must be a multiple of 8 in 24..256, got "
                              f"{reg_count!r}")
    if is_inc not in (0, 1, True, False):
        raise KernelTypeError(f"T.set_max_nreg: is_inc must be 0 or 1, got {is_inc!r}")
    _hopper_call("T.set_max_nreg", "tl::warpgroup_reg_alloc" if is_inc else "tl::warpgroup_reg_dealloc",
                 template=(reg_count,))


def fence_proxy_async() -> None:
    """``fence.proxy.async``: this thread's shared-memory writes become visible to the copy
    engine and wgmma (sm_90). Nothing on the interpreter."""
    _hopper_call("T.fence_proxy_async", "tl::fence_proxy_async")


def wgmma_gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
               policy: Any = "Square", clear_accum: bool = False, k_pack: int = 1,
               wg_wait: int = 0) -> None:
    """``T.gemm`` as Hopper's warpgroup MMA computes it (on sm_90a the compiler picks wgmma for
    every gemm whose shapes allow; elsewhere this is ``T.gemm``)."""
    gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack, wg_wait)


def wait_wgmma(num: int = 0) -> None:
    """Wait until at most ``num`` groups of wgmma are in flight (sm_90a)."""
    if not isinstance(num, int) or isinstance(num, bool) or num < 0:
        raise KernelTypeError(f"T.wait_wgmma: num must be a non-negative Python int, got {num!r}")
    _hopper_call("T.wait_wgmma", "tl::wgmma_wait_group", template=(num,))
