"""The Ascend C emitter (``target="ascendc:a2a3"``): lowered NPU IR to one mixed kernel
(``KERNEL_TYPE_MIX_AIC_1_2``; ``AIC_ONLY`` / ``AIV_ONLY`` when only one core kind has code), the
cube core's code under ``if ASCEND_IS_AIC``, the vector cores' under ``if ASCEND_IS_AIV``.

- memories: one ``TBuf`` per memory the core uses (``A1`` = L1, ``A2`` = L0A, ``B2`` = L0B,
  ``CO1`` = L0C, ``VECCALC`` = UB), sized to what PlanNpuMemory placed, ``pipe.InitBuffer``-ed
  from one ``TPipe``; each buffer a ``LocalTensor`` taken with ``GetWithOffset`` at its planned
  byte offset (a versioned buffer is indexed at ``version * elements`` per use);
- copies: ``DataCopyPad`` (GM <-> UB), ``DataCopy`` with ``Nd2NzParams`` (GM -> L1, ND -> NZ),
  ``LoadData`` with ``LoadData2DParams`` per fractal row (L1 -> L0A / L0B, transposing for a
  ``transpose_B`` / untransposed B operand), ``Fixpipe`` with ``FixpipeParamsV220`` (L0C -> GM / L1,
  NZ -> ND and the dtype conversion); ``T.mma``: ``Mmad`` (``cmatrixInitVal`` for ``init``);
- vector: ``Add`` / ``Adds`` / ``Muls`` / ``Exp`` / ``Cast`` / ``Duplicate`` ...; an operand with
  one value per row is read by the scalar unit row by row (after a ``V_S`` flag); row reductions
  ``WholeReduceMax`` / ``WholeReduceSum`` (rows of at most 256 bytes, one repeat per row);
- sync: ``SetFlag<HardEvent::SRC_DST>(id)`` / ``WaitFlag<...>``, ``PipeBarrier<PIPE_X>()``,
  ``CrossCoreSetFlag<mode, PIPE_X>(flag)`` / ``CrossCoreWaitFlag(flag)``.

The walker is the one both emitters share (:mod:`.emit`); this module is Ascend C's spelling: its
declarations and operands (``_AscendC``), a ``npu.ascendc`` rule per leaf statement, and the
``ascendc`` column of the vector-op table (:mod:`tegula.ir.vecops`). Each statement is preceded
by a ``// file.py:LINE  source`` comment naming the kernel line it came from. The source is not
compiled here (no CANN toolkit); names and parameter structs follow the
public Ascend C API documentation.
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import BufferRegion
from tegula.ir.npu import (BarrierAll, Mma, NpuKernel, PipeBarrier, SetCrossFlag, SetFlag, VecOp,
                           WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import Copy, Fill, PrimFunc, Reduce
from tegula.ir.tile_rules import tile_rule
from tegula.ir.visitor import post_order_visit
from tegula.backends.npu.emit import C_TYPES, Walker, c_expr, helpers
from tegula.backends.npu.layout import ND
from tegula.backends.npu.machine import FRACTAL_ROWS, c0, machine
from tegula.backends.npu.passes.plan_memory import buffer_bytes
from tegula.backends.npu.pto import _is_zero

_POSITION = {"l1": "A1", "l0a": "A2", "l0b": "B2", "l0c": "CO1", "ub": "VECCALC"}
_OWNER = {"C": ("l1", "l0a", "l0b", "l0c"), "V": ("ub",)}
_QUANT = {("float32", "float16"): "F322F16", ("float32", "bfloat16"): "F322BF16"}


ASC = "npu.ascendc"


class _AscendC(Walker):
    """Ascend C's declarations and operands over the shared walker (:mod:`.emit`)."""

    LANG = "Ascend C"
    ASPECT = ASC
    SPELLING = "ascendc"
    V_S = "SetFlag<HardEvent::V_S>(0); WaitFlag<HardEvent::V_S>(0);"

    def __init__(self, k: NpuKernel, m: Any, kind: str, used: Any = None):
        super().__init__(k, m, kind, used)
        # which L0 buffers feed a transposed (or, for B, an untransposed) operand of an mma
        self.mma_of: dict = {}
        post_order_visit(k.body, lambda n: self.mma_of.update({n.A.buffer: n, n.B.buffer: n})
                         if isinstance(n, Mma) else None)

    # -- declarations ------------------------------------------------------------------------
    def declare(self) -> None:
        mine = [b for b in self.k.allocs if b.scope in _OWNER[self.kind]]
        for scope in _OWNER[self.kind]:
            bufs = [b for b in mine if b.scope == scope]
            if not bufs:
                continue
            top = max(self.offsets[b] + buffer_bytes(b, self.layouts) for b in bufs)
            self.out(f"TBuf<TPosition::{_POSITION[scope]}> {scope}_buf;")
            self.out(f"pipe.InitBuffer({scope}_buf, {top});")
            for b in bufs:
                t = C_TYPES.get(b.dtype.name, b.dtype.name)
                n = buffer_bytes(b, self.layouts) // b.dtype.itemsize
                self.out(f"LocalTensor<{t}> {b.name} = {scope}_buf.GetWithOffset<{t}>({n}, {self.offsets[b]});")

    # -- operands ----------------------------------------------------------------------------
    def elems(self, r: BufferRegion) -> int:
        """Elements of region ``r`` (one version of a versioned buffer)."""
        n = 1
        for e in r.tile_shape():
            n *= int(e)
        return n

    def tile(self, r: BufferRegion) -> str:
        """The LocalTensor of region ``r``: the buffer, or its version / rows as an offset."""
        b = r.buffer
        shape = tuple(b.shape)
        if len(shape) > 2:
            per = buffer_bytes(b, self.layouts) // b.dtype.itemsize // int(shape[0])
            return f"{b.name}[{self.c(r.starts[0])} * {per}]"
        if self.layouts.get(b, ND) is not ND or all(_is_zero(x) for x in r.starts):
            return b.name
        if len(shape) == 2 and r.extents[1] != shape[1] and r.extents[0] != 1:
            raise UnsupportedError(f"the Ascend C emitter cannot address a part of the rows of "
                                   f"'{b.name}'", r.buffer.span)
        off = self.c(r.starts[-1]) if len(shape) == 1 else \
            f"{self.c(r.starts[0])} * {shape[1]} + {self.c(r.starts[1])}"
        return f"{b.name}[{off}]"

    def gm(self, r: BufferRegion) -> tuple:
        """(GM tensor expression at the region's start, rows, columns, row stride in elements)."""
        b = r.buffer
        shape = list(b.shape)
        strides: list = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        off = " + ".join(f"{self.c(s)} * {self.c(st)}" if not (isinstance(st, int) and st == 1)
                         else self.c(s) for s, st in zip(r.starts, strides))
        ext = list(r.extents)
        rows = ext[-2] if len(ext) >= 2 else 1
        ld = strides[-2] if len(strides) >= 2 else ext[-1]
        return f"{b.name}_gm[{off}]", rows, ext[-1], ld

    def scalar(self, v: Any, like: BufferRegion) -> str:
        t = C_TYPES.get(like.dtype.name, like.dtype.name)
        return f"({t}){self.c(v)}"

    def copy(self, s: Copy) -> None:
        src, dst = s.src.buffer.scope, s.dst.buffer.scope
        if src == "global" and dst == "ub":
            g, rows, cols, ld = self.gm(s.src)
            sz = s.dst.dtype.itemsize
            self.out(f"DataCopyPad({self.tile(s.dst)}, {g}, DataCopyExtParams({self.c(rows)}, "
                     f"{_bytes(cols, sz)}, {_bytes(ld - cols, sz)}, 0, 0), "
                     f"DataCopyPadExtParams<{C_TYPES[s.dst.dtype.name]}>(false, 0, 0, 0));")
        elif src == "ub" and dst == "global":
            g, rows, cols, ld = self.gm(s.dst)
            sz = s.src.dtype.itemsize
            self.out(f"DataCopyPad({g}, {self.tile(s.src)}, DataCopyExtParams({self.c(rows)}, "
                     f"{_bytes(cols, sz)}, 0, {_bytes(ld - cols, sz)}, 0));")
        elif src == "global" and dst == "l1":
            g, rows, cols, ld = self.gm(s.src)
            rp = self.layouts[s.dst.buffer].padded(tuple(s.dst.buffer.shape))[-2]
            self.out(f"DataCopy({self.tile(s.dst)}, {g}, Nd2NzParams(1, {self.c(rows)}, {self.c(cols)}, 0, "
                     f"{self.c(ld)}, {rp}, 1, 0));")
        elif src == "l1" and dst in ("l0a", "l0b"):
            self.load_l0(s)
        elif src == "l0c":
            self.fixpipe(s)
        elif src == "ub" and dst == "ub":
            self.out(f"DataCopy({self.tile(s.dst)}, {self.tile(s.src)}, {self.elems(s.dst)});")
        elif src == "ub" and dst == "l1":
            rp, cp = self.layouts[s.dst.buffer].padded(tuple(s.dst.buffer.shape))[-2:]
            self.out(f"DataCopy({self.tile(s.dst)}, {self.tile(s.src)}, DataCopyParams("
                     f"{cp * s.dst.dtype.itemsize // 32}, {rp * 32 // 32}, 0, 0));  // ND -> NZ by 32-byte columns")
        else:
            raise UnsupportedError(f"the Ascend C emitter has no copy {src} -> {dst}", s.span)

    def load_l0(self, s: Copy) -> None:
        """L1 (NZ) -> L0A (ZZ) / L0B (ZN): one LoadData per row of fractals of the destination."""
        b = s.dst.buffer
        if s.annotations.get("transpose_tile") and b.scope != "l0b":
            raise UnsupportedError("the Ascend C emitter transposes L1 -> L0B loads only "
                                   "(T.copy(transpose=True) into L0A)", s.span)
        R, C = (int(x) for x in tuple(b.shape)[-2:])
        lay = self.layouts[b]
        Rp, Cp = lay.padded((R, C))
        fc = c0(b.dtype.itemsize)
        src_rows = self.layouts[s.src.buffer].padded(tuple(s.src.buffer.shape))[-2]
        frac = FRACTAL_ROWS * fc
        # NZ -> ZN turns each fractal over, unless L1 holds B^T already (transpose_B): NZ of
        # N x K is ZN of K x N byte for byte; NZ -> ZZ only reorders whole fractals
        transpose = (b.scope == "l0b") != bool(s.annotations.get("transpose"))
        if b.scope == "l0b" and not transpose:  # every fractal in order, as it is
            n = (Rp // FRACTAL_ROWS) * (Cp // fc)
            self.out(f"LoadData({self.tile(s.dst)}, {self.tile(s.src)}, LoadData2DParams(0, {n}, 1, 0, 0, false, 0));")
            return
        self.out(f"for (int32_t r = 0; r < {Rp // FRACTAL_ROWS}; ++r) {{")
        self.out(f"  LoadData({self.tile(s.dst)}[r * {(Cp // fc) * frac}], {self.tile(s.src)}[r * {frac}], "
                 f"LoadData2DParams(0, {Cp // fc}, {src_rows // FRACTAL_ROWS}, 0, 0, "
                 f"{'true' if transpose else 'false'}, 0));")
        self.out("}")

    def fixpipe(self, s: Copy) -> None:
        src = s.src.buffer
        R, C = (int(x) for x in tuple(src.shape)[-2:])
        Rp = self.layouts[src].padded((R, C))[0]
        dt, st = C_TYPES[s.dst.dtype.name], C_TYPES[s.src.dtype.name]
        quant = _QUANT.get((s.src.dtype.name, s.dst.dtype.name), "NoQuant")
        if s.annotations.get("relu"):  # T.copy(enable_relu=True): the fixpipe's ReLU pre-stage
            quant += "; fp.reluEn = true"
        if s.dst.buffer.scope == "global":
            g, rows, cols, ld = self.gm(s.dst)
            self.out(f"{{ FixpipeParamsV220 fp; fp.nSize = {self.c(cols)}; fp.mSize = {self.c(rows)}; "
                     f"fp.srcStride = {Rp}; fp.dstStride = {self.c(ld)}; fp.quantPre = QuantMode_t::{quant}; "
                     f"Fixpipe<{dt}, {st}, CFG_ROW_MAJOR>({g}, {self.tile(s.src)}, fp); }}")
        else:
            self.out(f"{{ FixpipeParamsV220 fp; fp.nSize = {C}; fp.mSize = {R}; fp.srcStride = {Rp}; "
                     f"fp.dstStride = {Rp}; fp.quantPre = QuantMode_t::{quant}; "
                     f"Fixpipe<{dt}, {st}, CFG_NZ>({self.tile(s.dst)}, {self.tile(s.src)}, fp); }}")

    def mma(self, s: Mma) -> None:
        M, N = (int(x) for x in s.C.tile_shape())
        ka = s.A.tile_shape()
        K = int(ka[0] if s.transpose_A else ka[1])
        init = {True: "true", False: "false"}.get(s.init) if isinstance(s.init, bool) else self.c(s.init)
        self.out(f"{{ MmadParams mp; mp.m = {M}; mp.n = {N}; mp.k = {K}; mp.cmatrixInitVal = {init}; "
                 f"Mmad({self.tile(s.C)}, {self.tile(s.A)}, {self.tile(s.B)}, mp); }}")

    def vec_other(self, s: VecOp, row: Any, form: str) -> bool:
        """A per-row operand (form ``tr``): the scalar unit reads it row by row and issues the
        row's tile-scalar spelling once per row (the V_S flag makes the vector writes of it
        visible to the scalar unit first)."""
        ts = row.ascendc.get("ts")
        if form != "tr" or ts is None:
            return False
        R, C = (int(x) for x in s.dst.tile_shape())
        dst, a = self.tile(s.dst), self.tile(s.srcs[0])
        fields = {**self.vec_fields(s, row), "n": C}
        self.out("SetFlag<HardEvent::V_S>(0);")
        self.out("WaitFlag<HardEvent::V_S>(0);")
        self.out(f"for (int32_t r = 0; r < {R}; ++r) {{")
        self.out("  " + ts.format(f"{a}[r * {C}]", f"{self.tile(s.srcs[1])}.GetValue(r)",
                                  d=f"{dst}[r * {C}]", **fields))
        self.out("}")
        return True

    def reduce(self, s: Reduce) -> None:
        shape = s.src.tile_shape()
        if len(shape) != 2 or s.dim not in (1, -1) or not s.clear:
            raise UnsupportedError("the Ascend C emitter prints row reductions (dim=-1, into a "
                                   "cleared destination) only", s.span)
        R, C = (int(x) for x in shape)
        if s.kind not in ("max", "sum"):
            raise UnsupportedError(f"the Ascend C emitter cannot print T.reduce_{s.kind} yet", s.span)
        src, dst = self.tile(s.src), self.tile(s.dst)
        if C * s.src.dtype.itemsize <= 256:  # one repeat per row
            order = ", ReduceOrder::ORDER_ONLY_VALUE" if s.kind == "max" else ""
            self.out(f"Whole{'ReduceMax' if s.kind == 'max' else 'ReduceSum'}({dst}, {src}, {C}, {R}, 1, 1, "
                     f"{C * s.src.dtype.itemsize // 32}{order});")
            return
        # longer rows: one ReduceMax / ReduceSum per row, the scratch area as its work space
        t = C_TYPES.get(s.src.dtype.name, s.src.dtype.name)
        at, n = self.k.annotations["scratch"]
        work = f"ub_buf.GetWithOffset<{t}>({n // s.src.dtype.itemsize}, {at})"
        self.out(f"for (int32_t r = 0; r < {R}; ++r) {{")
        self.out(f"  Reduce{s.kind.capitalize()}<{t}>({dst}[r], {src}[r * {C}], {work}, {C}, false);")
        self.out("}")


# -- the Ascend C spelling of each leaf statement -----------------------------------------------

def _flag(em: Walker, s: Any) -> None:
    name = "SetFlag" if isinstance(s, SetFlag) else "WaitFlag"
    fid = em.c(s.id) if isinstance(s.id, E.Const) else f"(event_t){em.c(s.id)}"
    em.out(f"{name}<HardEvent::{s.src}_{s.dst}>({fid});")


def _fill(em: _AscendC, s: Fill) -> None:
    if s.dst.buffer.scope != "ub":
        raise UnsupportedError(f"the Ascend C emitter cannot print Fill on {s.dst.buffer.scope} yet",
                               s.span, hint="run it on target='ascend-emu' instead")
    em.out(f"Duplicate({em.tile(s.dst)}, {em.scalar(s.value, s.dst)}, {em.elems(s.dst)});")


tile_rule(SetFlag, ASC)(_flag)
tile_rule(WaitFlag, ASC)(_flag)
tile_rule(PipeBarrier, ASC)(lambda em, s: em.out(f"PipeBarrier<PIPE_{s.pipe}>();"))
tile_rule(BarrierAll, ASC)(lambda em, s: em.out("PipeBarrier<PIPE_ALL>();"))
tile_rule(SetCrossFlag, ASC)(lambda em, s: em.out(f"CrossCoreSetFlag<{s.mode}, PIPE_{s.pipe}>({em.c(s.flag)});"))
tile_rule(WaitCrossFlag, ASC)(lambda em, s: em.out(f"CrossCoreWaitFlag({em.c(s.flag)});"))
tile_rule(Copy, ASC)(lambda em, s: em.copy(s))
tile_rule(Mma, ASC)(lambda em, s: em.mma(s))
tile_rule(Reduce, ASC)(lambda em, s: em.reduce(s))
tile_rule(Fill, ASC)(_fill)


def _bytes(n: Any, size: int) -> str:
    """``n`` elements of ``size`` bytes, in C (folded when ``n`` is a constant)."""
    from tegula.arith.simplify import simplify

    n = simplify(E.as_expr(n)) if not isinstance(n, int) else n
    if isinstance(n, E.Const):
        n = int(n.value)
    return str(n * size) if isinstance(n, int) else f"{c_expr(n)} * {size}"


def _has_code(k: NpuKernel, kind: str) -> bool:
    from tegula.ir.npu import CoreScope

    found: list = []
    post_order_visit(k.body, lambda n: found.append(1) if isinstance(n, CoreScope) and n.kind == kind else None)
    return bool(found)


def emit(func: PrimFunc, target: Any) -> str:
    """Ascend C for lowered ``func`` (see the module docstring)."""
    m = machine(target.arch)
    kernels: list = []
    post_order_visit(func.body, lambda n: kernels.append(n) if isinstance(n, NpuKernel) else None)
    params = ", ".join([f"GM_ADDR {p.name}" if hasattr(p, "shape") else f"int32_t {p.name}"
                        for p in func.params] + [f"int32_t {v.name}" for v in func.dynamic_vars()])
    out = [f"// Ascend C generated by tegula for {target} from '{func.name}'",
           "// launch: blockDim = the kernel's grid (AI core groups of 1 AIC + 2 AIV)",
           '#include "kernel_operator.h"', "using namespace AscendC;", ""]
    used: set = set()
    body: list = []
    for n, k in enumerate(kernels):
        cube, vec = _has_code(k, "C"), _has_code(k, "V")
        ktype = "MIX_AIC_1_2" if cube and vec else "AIC_ONLY" if cube else "AIV_ONLY"
        body.append(f"extern \"C\" __global__ __aicore__ void {func.name}_kernel{n if n else ''}({params}) {{")
        body.append(f"  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_{ktype});")
        for p in func.params:
            if hasattr(p, "shape"):
                t = C_TYPES.get(p.dtype.name, p.dtype.name)
                body.append(f"  GlobalTensor<{t}> {p.name}_gm;")
                body.append(f"  {p.name}_gm.SetGlobalBuffer((__gm__ {t} *){p.name});")
        body.append("  TPipe pipe;")
        for kind, guard, present in (("C", "ASCEND_IS_AIC", cube), ("V", "ASCEND_IS_AIV", vec)):
            if not present:
                continue
            em = _AscendC(k, m, kind, used)
            em.depth = 2
            cid, vid = k.block_vars[0].name, k.sub_var.name
            if kind == "C":
                em.out(f"int32_t {cid} = GetBlockIdx();")
                em.out(f"int32_t {vid} = 0;")
            else:  # vector cores count 2 per group: AIV index = group * 2 + sub-block
                em.out(f"int32_t {cid} = GetBlockIdx() / 2;")
                em.out(f"int32_t {vid} = GetSubBlockIdx();")
            em.declare()
            em.stmt(k.body)
            body.append(f"  if {guard} {{")
            body.extend(em.lines)
            body.append("  }")
        body.append("}")
    return "\n".join(out + helpers(used, "__aicore__") + body) + "\n"
