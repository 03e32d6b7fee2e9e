"""LowerGemmV0: ``T.gemm_v0`` on L1 operands becomes what TileLang-Ascend's ``gemm_v0`` does on
the cube: K is cut into L0-sized chunks (``K_L0`` = 128 elements, halved until a chunk of A and
of B fits half of L0A / L0B), each chunk moved by MTE1 into one of two ping-pong L0A / L0B
buffers and multiplied into the L0C accumulator (``init`` on the first chunk only), so a gemm
whose whole operands would overflow L0 fits, and every ``gemm_v0`` of a kernel reuses the same
two halves of L0A and L0B (the chunk buffers sit at offsets 0 and half the memory).

In a kernel that syncs by hand (no ``tl.ascend_auto_sync``), ``gemm_v0`` syncs its own pipes as
upstream's does: MTE2 -> MTE1 (the L1 operands have landed) and FIX -> M (the accumulator was
read out) before it, M -> MTE1 per ping-pong buffer between chunks, MTE1 -> M before each mma,
MTE1 -> MTE2 and M -> FIX after it (event ids 0 and 1). With InsertSync the flags come from there.

Before::

    T.gemm_v0(A_l1, B_l1, C_l0c, init=True)          # A (128, 256), B (256, 128)

After (InsertSync's flags not shown)::

    A_l1_l0a = T.alloc_L0A((128, 128), "float16")     # at L0A+0
    A_l1_l0a_pp = T.alloc_L0A((128, 128), "float16")  # at L0A+32768
    ...
    T.copy(A_l1[0:128, 0:128], A_l1_l0a)
    T.copy(B_l1[0:128, 0:128], B_l1_l0b)
    T.mma(A_l1_l0a, B_l1_l0b, C_l0c, init=True)
    T.copy(A_l1[0:128, 128:256], A_l1_l0a_pp)
    T.copy(B_l1[128:256, 0:128], B_l1_l0b_pp)
    T.mma(A_l1_l0a_pp, B_l1_l0b_pp, C_l0c)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tegula.arith.simplify import const_int
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import const
from tegula.ir.npu import Mma, NpuKernel, PipeBarrier, SetFlag, WaitFlag
from tegula.ir.stmt import Copy, PrimFunc, Stmt, seq
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.npu.passes.infer_fractal_layout import layout_for
from tegula.backends.npu.machine import machine as _machine

K_L0 = 128  # upstream's kL0Size: elements of K per chunk


def _dims(r: BufferRegion) -> Optional[list]:
    """Positions of the two matrix dimensions of operand region ``r`` (its non-unit extents), or
    None when that is not clear."""
    dims = [i for i, e in enumerate(r.extents) if const_int(e) != 1]
    if len(dims) == 2 and all(const_int(r.extents[i]) is not None for i in dims):
        return dims
    if len(dims) < 2 and len(r.extents) >= 2 and all(const_int(e) is not None for e in r.extents[-2:]):
        return [len(r.extents) - 2, len(r.extents) - 1]
    return None


def _chunk(r: BufferRegion, dim: int, start: int, size: int) -> BufferRegion:
    ranges = list(r.ranges)
    s0, _ = ranges[dim]
    ranges[dim] = (s0 + start if start else s0, const(size, "int32"))
    return BufferRegion(r.buffer, tuple(ranges))


def _flag(kind: type, src: str, dst: str, i: int) -> Stmt:
    return kind(src, dst, const(i, "int32"))


class _Lower(Mutator):
    def __init__(self, m: Any, hand_sync: bool, pin: bool) -> None:
        super().__init__()
        self.m = m
        self.hand_sync = hand_sync
        self.pin = pin
        self.new: dict = {}
        self.addresses: dict = {}

    def _l0(self, r: BufferRegion, dims: list, k_dim: int, kc: int, scope: str, pp: int) -> Buffer:
        shape = tuple(kc if i == k_dim else const_int(r.extents[i]) for i in dims)
        key = (scope, shape, r.dtype.name, pp)
        if key not in self.new:
            name = f"{r.buffer.name}_{scope}" + ("_pp" if pp else "")
            taken = {b.name for b in self.new.values()}
            if name in taken:  # a tail chunk of another size
                name += f"_{shape[0]}x{shape[1]}"
            b = Buffer(name, shape, r.dtype, scope, span=r.buffer.span)
            self.new[key] = b
            if self.pin:
                self.addresses[name] = (pp * (self.m.buffer(scope).capacity // 2), None)
        return self.new[key]

    def _kc(self, rows: int, dtype: Any, k: int, scope: str) -> int:
        half = self.m.buffer(scope).capacity // 2
        kc = min(K_L0, k)
        while kc > 16:
            lay = layout_for(scope, dtype.itemsize)
            if lay.numel((rows, kc)) * dtype.itemsize <= half and lay.numel((kc, rows)) * dtype.itemsize <= half:
                break
            kc //= 2
        return kc

    def visit_Mma(self, s: Mma) -> Stmt:
        if s.A.buffer.scope != "l1":
            return s
        da, db = _dims(s.A), _dims(s.B)
        if da is None or db is None:
            return self._whole(s)
        ka = da[0] if s.transpose_A else da[1]
        kb = db[1] if s.transpose_B else db[0]
        K = const_int(s.A.extents[ka])
        M = const_int(s.A.extents[da[1] if s.transpose_A else da[0]])
        N = const_int(s.B.extents[db[0] if s.transpose_B else db[1]])
        kc = min(self._kc(M, s.A.dtype, K, "l0a"), self._kc(N, s.B.dtype, K, "l0b"))
        out: list = []
        if self.hand_sync:
            out += [_flag(SetFlag, "MTE2", "MTE1", 0), _flag(WaitFlag, "MTE2", "MTE1", 0),
                    _flag(SetFlag, "FIX", "M", 0), _flag(WaitFlag, "FIX", "M", 0),
                    _flag(SetFlag, "M", "MTE1", 0), _flag(SetFlag, "M", "MTE1", 1)]
        for n, k0 in enumerate(range(0, K, kc)):
            size, pp = min(kc, K - k0), n % 2
            a0 = self._l0(s.A, da, ka, size, "l0a", pp)
            b0 = self._l0(s.B, db, kb, size, "l0b", pp)
            if self.hand_sync:
                out.append(_flag(WaitFlag, "M", "MTE1", pp))
            out += [Copy(_chunk(s.A, ka, k0, size), a0.region(), {"transpose": True} if s.transpose_A else {},
                         span=s.span),
                    Copy(_chunk(s.B, kb, k0, size), b0.region(), {"transpose": True} if s.transpose_B else {},
                         span=s.span)]
            if self.hand_sync:
                out += [_flag(SetFlag, "MTE1", "M", pp), _flag(WaitFlag, "MTE1", "M", pp), PipeBarrier("M")]
            out.append(Mma(a0.region(), b0.region(), s.C, s.transpose_A, s.transpose_B,
                           s.init if n == 0 else False, span=s.span))
            if self.hand_sync:
                out.append(_flag(SetFlag, "M", "MTE1", pp))
        if self.hand_sync:
            out += [_flag(WaitFlag, "M", "MTE1", 0), _flag(WaitFlag, "M", "MTE1", 1),
                    _flag(SetFlag, "MTE1", "MTE2", 0), _flag(WaitFlag, "MTE1", "MTE2", 0),
                    _flag(SetFlag, "M", "FIX", 0), _flag(WaitFlag, "M", "FIX", 0)]
        return seq(out)

    def _whole(self, s: Mma) -> Stmt:
        """Operands whose matrix dimensions are not constant: moved whole (no K chunks)."""
        def l0(r: BufferRegion, scope: str) -> Buffer:
            shape = tuple(e for e in r.extents if e != 1) or (1,)
            key = (scope, shape, r.dtype.name, "whole")
            if key not in self.new:
                self.new[key] = Buffer(f"{r.buffer.name}_{scope}", shape, r.dtype, scope, span=r.buffer.span)
            return self.new[key]
        a0, b0 = l0(s.A, "l0a"), l0(s.B, "l0b")
        self.pin = False
        return seq(Copy(s.A, a0.region(), {"transpose": True} if s.transpose_A else {}, span=s.span),
                   Copy(s.B, b0.region(), {"transpose": True} if s.transpose_B else {}, span=s.span),
                   Mma(a0.region(), b0.region(), s.C, s.transpose_A, s.transpose_B, s.init, span=s.span))


def lower_kernel(k: NpuKernel, m: Any, auto_sync: bool = False) -> NpuKernel:
    """LowerGemmV0 on one NPU kernel for machine ``m``; ``auto_sync``: InsertSync will run on it."""
    from tegula.backends.npu.passes.assign_npu_scopes import AUTO_SYNC

    has_mma: list = []
    post_order_visit(k.body, lambda n: has_mma.append(n) if isinstance(n, Mma) and n.A.buffer.scope == "l1" else None)
    if not has_mma:
        return k
    own_l0 = any(b.scope in ("l0a", "l0b") for b in k.allocs)
    low = _Lower(m, hand_sync=not (auto_sync or k.annotations.get(AUTO_SYNC)), pin=not own_l0)
    body = low.visit(k.body)
    ann = dict(k.annotations)
    if low.pin and low.addresses:
        ann["addresses"] = {**ann.get("addresses", {}), **low.addresses}
    return dataclasses.replace(k, body=body, allocs=k.allocs + tuple(low.new.values()), annotations=ann)


def lower_gemm_v0(func: PrimFunc, arch: Optional[str] = None, auto_sync: Any = None) -> PrimFunc:
    """LowerGemmV0 over every NPU kernel of ``func`` (machine ``arch``, a2a3 when None)."""
    m = _machine(arch)

    class _Kernels(Mutator):
        def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
            return lower_kernel(k, m, bool(auto_sync))
    return func.with_body(_Kernels().visit(func.body))
