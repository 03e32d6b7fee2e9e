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

Each statement is preceded by a ``// file.py:LINE  source`` comment naming the kernel line it came
from. The source is not compiled here (no CANN toolkit); names and parameter structs follow the
public Ascend C API documentation.
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import BufferRegion
from tegula.ir.npu import (BarrierAll, Mma, NpuKernel, PipeBarrier, SetCrossFlag, SetFlag, VecOp,
                           WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import Copy, Fill, PrimFunc, Reduce, Stmt
from tegula.ir.visitor import post_order_visit
from tegula.backends.npu.layout import ND
from tegula.backends.npu.machine import FRACTAL_ROWS, c0, machine
from tegula.backends.npu.passes.plan_memory import buffer_bytes
from tegula.backends.npu.pto import C_TYPES, _Emitter, _is_zero, c_expr

_POSITION = {"l1": "A1", "l0a": "A2", "l0b": "B2", "l0c": "CO1", "ub": "VECCALC"}
_OWNER = {"C": ("l1", "l0a", "l0b", "l0c"), "V": ("ub",)}
_BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "max": "Max", "min": "Min"}
_SCALAR = {"add": "Adds", "mul": "Muls", "max": "Maxs", "min": "Mins"}
_UNARY = {"exp": "Exp", "ln": "Ln", "abs": "Abs", "reciprocal": "Reciprocal", "sqrt": "Sqrt",
          "rsqrt": "Rsqrt", "relu": "Relu", "sigmoid": "Sigmoid", "silu": "Silu"}
_QUANT = {("float32", "float16"): "F322F16", ("float32", "bfloat16"): "F322BF16"}


class _AscendC(_Emitter):
    LANG = "Ascend C"

    def __init__(self, k: NpuKernel, m: Any, kind: str):
        super().__init__(k, m, kind)
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
            return f"{b.name}[{c_expr(r.starts[0])} * {per}]"
        if self.layouts.get(b, ND) is not ND or all(_is_zero(x) for x in r.starts):
            return b.name
        if len(shape) == 2 and r.extents[1] != shape[1] and r.extents[0] != 1:
            raise UnsupportedError(f"the Ascend C emitter cannot address a part of the rows of "
                                   f"'{b.name}'", r.buffer.span)
        off = c_expr(r.starts[-1]) if len(shape) == 1 else \
            f"{c_expr(r.starts[0])} * {shape[1]} + {c_expr(r.starts[1])}"
        return f"{b.name}[{off}]"

    def gm(self, r: BufferRegion) -> tuple:
        """(GM tensor expression at the region's start, rows, columns, row stride in elements)."""
        b = r.buffer
        shape = list(b.shape)
        strides: list = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        off = " + ".join(f"{c_expr(s)} * {c_expr(st)}" if not (isinstance(st, int) and st == 1)
                         else c_expr(s) for s, st in zip(r.starts, strides))
        ext = list(r.extents)
        rows = ext[-2] if len(ext) >= 2 else 1
        ld = strides[-2] if len(strides) >= 2 else ext[-1]
        return f"{b.name}_gm[{off}]", rows, ext[-1], ld

    # -- statements ----------------------------------------------------------------------------
    def leaf(self, s: Stmt) -> None:
        if isinstance(s, (SetFlag, WaitFlag)):
            name = "SetFlag" if isinstance(s, SetFlag) else "WaitFlag"
            fid = c_expr(s.id) if isinstance(s.id, E.Const) else f"(event_t){c_expr(s.id)}"
            self.out(f"{name}<HardEvent::{s.src}_{s.dst}>({fid});")
        elif isinstance(s, PipeBarrier):
            self.out(f"PipeBarrier<PIPE_{s.pipe}>();")
        elif isinstance(s, BarrierAll):
            self.out("PipeBarrier<PIPE_ALL>();")
        elif isinstance(s, SetCrossFlag):
            self.out(f"CrossCoreSetFlag<{s.mode}, PIPE_{s.pipe}>({c_expr(s.flag)});")
        elif isinstance(s, WaitCrossFlag):
            self.out(f"CrossCoreWaitFlag({c_expr(s.flag)});")
        elif isinstance(s, Copy):
            self.copy(s)
        elif isinstance(s, Mma):
            self.mma(s)
        elif isinstance(s, VecOp):
            self.vec(s)
        elif isinstance(s, Reduce):
            self.reduce(s)
        elif isinstance(s, Fill) and s.dst.buffer.scope == "ub":
            self.out(f"Duplicate({self.tile(s.dst)}, {self.scalar(s.value, s.dst)}, {self.elems(s.dst)});")
        else:
            raise UnsupportedError(f"the Ascend C emitter cannot print {type(s).__name__} on "
                                   f"{getattr(getattr(s, 'dst', None), 'buffer', None) and s.dst.buffer.scope or 'this core'} yet",
                                   s.span, hint="run it on target='ascend-emu' instead")

    def scalar(self, v: Any, like: BufferRegion) -> str:
        t = C_TYPES.get(like.dtype.name, like.dtype.name)
        return f"({t}){c_expr(v)}"

    def copy(self, s: Copy) -> None:
        src, dst = s.src.buffer.scope, s.dst.buffer.scope
        if src == "global" and dst == "ub":
            g, rows, cols, ld = self.gm(s.src)
            sz = s.dst.dtype.itemsize
            self.out(f"DataCopyPad({self.tile(s.dst)}, {g}, DataCopyExtParams({c_expr(rows)}, "
                     f"{_bytes(cols, sz)}, {_bytes(ld - cols, sz)}, 0, 0), "
                     f"DataCopyPadExtParams<{C_TYPES[s.dst.dtype.name]}>(false, 0, 0, 0));")
        elif src == "ub" and dst == "global":
            g, rows, cols, ld = self.gm(s.dst)
            sz = s.src.dtype.itemsize
            self.out(f"DataCopyPad({g}, {self.tile(s.src)}, DataCopyExtParams({c_expr(rows)}, "
                     f"{_bytes(cols, sz)}, 0, {_bytes(ld - cols, sz)}, 0));")
        elif src == "global" and dst == "l1":
            g, rows, cols, ld = self.gm(s.src)
            rp = self.layouts[s.dst.buffer].padded(tuple(s.dst.buffer.shape))[-2]
            self.out(f"DataCopy({self.tile(s.dst)}, {g}, Nd2NzParams(1, {c_expr(rows)}, {c_expr(cols)}, 0, "
                     f"{c_expr(ld)}, {rp}, 1, 0));")
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
        if s.dst.buffer.scope == "global":
            g, rows, cols, ld = self.gm(s.dst)
            self.out(f"{{ FixpipeParamsV220 fp; fp.nSize = {c_expr(cols)}; fp.mSize = {c_expr(rows)}; "
                     f"fp.srcStride = {Rp}; fp.dstStride = {c_expr(ld)}; fp.quantPre = QuantMode_t::{quant}; "
                     f"Fixpipe<{dt}, {st}, CFG_ROW_MAJOR>({g}, {self.tile(s.src)}, fp); }}")
        else:
            self.out(f"{{ FixpipeParamsV220 fp; fp.nSize = {C}; fp.mSize = {R}; fp.srcStride = {Rp}; "
                     f"fp.dstStride = {Rp}; fp.quantPre = QuantMode_t::{quant}; "
                     f"Fixpipe<{dt}, {st}, CFG_NZ>({self.tile(s.dst)}, {self.tile(s.src)}, fp); }}")

    def mma(self, s: Mma) -> None:
        M, N = (int(x) for x in s.C.tile_shape())
        ka = s.A.tile_shape()
        K = int(ka[0] if s.transpose_A else ka[1])
        init = {True: "true", False: "false"}.get(s.init) if isinstance(s.init, bool) else c_expr(s.init)
        self.out(f"{{ MmadParams mp; mp.m = {M}; mp.n = {N}; mp.k = {K}; mp.cmatrixInitVal = {init}; "
                 f"Mmad({self.tile(s.C)}, {self.tile(s.A)}, {self.tile(s.B)}, mp); }}")

    def vec(self, s: VecOp) -> None:
        dst, n = self.tile(s.dst), self.elems(s.dst)
        srcs = s.srcs
        ops = [self.tile(x) if isinstance(x, BufferRegion) else self.scalar(x, s.dst) for x in srcs]
        if s.op == "fill":
            self.out(f"Duplicate({dst}, {ops[0]}, {n});")
        elif s.op in _UNARY:
            self.out(f"{_UNARY[s.op]}({dst}, {ops[0]}, {n});")
        elif s.op == "cast":
            wide = s.dst.dtype.itemsize > srcs[0].dtype.itemsize
            self.out(f"Cast({dst}, {ops[0]}, RoundMode::{'CAST_NONE' if wide else 'CAST_RINT'}, {n});")
        elif s.op == "copy":
            self.out(f"DataCopy({dst}, {ops[0]}, {n});")
        elif s.op == "axpy":
            self.out(f"Axpy({dst}, {ops[0]}, {ops[1]}, {n});")
        elif s.op == "leaky_relu":
            self.out(f"LeakyRelu({dst}, {ops[0]}, {ops[1]}, {n});")
        elif s.op in _BINARY and not isinstance(srcs[0], BufferRegion):
            raise UnsupportedError(f"the Ascend C emitter needs a tile as the first operand of "
                                   f"T.tile.{s.op}", s.span)
        elif s.op in _BINARY and not isinstance(srcs[1], BufferRegion):
            self.out(self.with_scalar(s.op, dst, ops[0], c_expr(srcs[1]), s.dst, n) + ";")
        elif s.op in _BINARY and srcs[1].tile_shape() != s.dst.tile_shape():
            self.row_broadcast(s, dst, ops)
        elif s.op in _BINARY:
            self.out(f"{_BINARY[s.op]}({dst}, {ops[0]}, {ops[1]}, {n});")
        else:
            raise UnsupportedError(f"the Ascend C emitter cannot print T.tile.{s.op} yet", s.span)

    def with_scalar(self, op: str, dst: str, a: str, v: str, like: BufferRegion, n: Any) -> str:
        t = C_TYPES.get(like.dtype.name, like.dtype.name)
        if op == "sub":
            return f"Adds({dst}, {a}, ({t})(-({v})), {n})"
        if op == "div":
            return f"Muls({dst}, {a}, ({t})(1.0f / ({v})), {n})"
        return f"{_SCALAR[op]}({dst}, {a}, ({t})({v}), {n})"

    def row_broadcast(self, s: VecOp, dst: str, ops: list) -> None:
        """``dst[r, :] = a[r, :] op b[r]``: the scalar unit reads b[r] and issues one tile-scalar
        instruction per row (the V_S flag makes the vector writes of b visible to it first)."""
        R, C = (int(x) for x in s.dst.tile_shape())
        self.out("SetFlag<HardEvent::V_S>(0);")
        self.out("WaitFlag<HardEvent::V_S>(0);")
        self.out(f"for (int32_t r = 0; r < {R}; ++r) {{")
        self.out("  " + self.with_scalar(s.op, f"{dst}[r * {C}]", f"{ops[0]}[r * {C}]",
                                         f"{ops[1]}.GetValue(r)", s.dst, C) + ";")
        self.out("}")

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
    for n, k in enumerate(kernels):
        cube, vec = _has_code(k, "C"), _has_code(k, "V")
        ktype = "MIX_AIC_1_2" if cube and vec else "AIC_ONLY" if cube else "AIV_ONLY"
        out.append(f"extern \"C\" __global__ __aicore__ void {func.name}_kernel{n if n else ''}({params}) {{")
        out.append(f"  KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_{ktype});")
        for p in func.params:
            if hasattr(p, "shape"):
                t = C_TYPES.get(p.dtype.name, p.dtype.name)
                out.append(f"  GlobalTensor<{t}> {p.name}_gm;")
                out.append(f"  {p.name}_gm.SetGlobalBuffer((__gm__ {t} *){p.name});")
        out.append("  TPipe pipe;")
        for kind, guard, present in (("C", "ASCEND_IS_AIC", cube), ("V", "ASCEND_IS_AIV", vec)):
            if not present:
                continue
            em = _AscendC(k, m, kind)
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
            out.append(f"  if {guard} {{")
            out.extend(em.lines)
            out.append("  }")
        out.append("}")
    return "\n".join(out) + "\n"
