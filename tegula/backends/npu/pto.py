"""The PTO C++ emitter (``target="ascend-pto:a2a3" | "ascend-pto:a5"``): lowered NPU IR to PTO
tile-ISA source, one function per kernel with the cube-core code under ``__DAV_CUBE__`` and the
vector-core code under ``__DAV_VEC__``.

- every NPU buffer is a ``Tile<TileType, T, Rows, Cols, BLayout, RowValid, ColValid, SLayout,
  SFractalSize, PadValue>`` placed with ``TASSIGN`` at the byte offset PlanNpuMemory chose (Mat =
  L1, Left = L0A, Right = L0B, Acc = L0C, Vec = UB; rows and columns padded to whole fractals); a
  versioned buffer is one tile re-assigned to ``offset + version * bytes`` before each use;
- copies: ``TLOAD`` (GM -> L1 / UB), ``TSTORE`` (L0C / UB -> GM), ``TEXTRACT`` (L1 -> L0A / L0B),
  ``TMOV`` (UB -> UB, L0C -> L1); ``T.mma``: ``TMATMUL`` / ``TMATMUL_ACC``; ``T.tile.*``: the
  tile-tile, tile-scalar and row-broadcast instructions (``TADD``, ``TADDS``, ``TROWEXPANDSUB``,
  ...); reductions: ``TROWMAX`` / ``TROWSUM``;
- flags: ``set_flag(PIPE_X, PIPE_Y, EVENT_IDn)`` / ``wait_flag``, ``pipe_barrier(PIPE_X)``,
  cross-core ``ffts_cross_core_sync`` / ``wait_flag_dev``.

The walker is the one both emitters share (:mod:`.emit`); this module is PTO's spelling: its
declarations and operands (``_Pto``), a ``npu.pto`` rule per leaf statement, and the ``pto``
column of the vector-op table (:mod:`tegula.ir.vecops`). Index arithmetic is spelled by the
operator table (``tl::floordiv`` / ``tl::floormod`` / ``tl::min`` / ``tl::max``, defined at the top
of the file when used). Each statement is preceded by a ``// file.py:LINE  source`` comment naming
the kernel line it came from. The source is not compiled here (no CANN toolkit); its intrinsic names follow the public PTO
ISA documentation.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import BufferRegion
from tegula.ir.npu import (BarrierAll, Mma, NpuKernel, PipeBarrier, SetCrossFlag, SetFlag,
                           WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import Copy, Fill, PrimFunc, Reduce
from tegula.ir.tile_rules import tile_rule
from tegula.ir.visitor import post_order_visit
from tegula.backends.npu.emit import C_TYPES, Walker, c_expr, helpers  # noqa: F401 (c_expr: re-exported)
from tegula.backends.npu.layout import ND
from tegula.backends.npu.machine import machine
from tegula.backends.npu.passes.plan_memory import buffer_bytes

_TILE_TYPE = {"l1": "Mat", "l0a": "Left", "l0b": "Right", "l0c": "Acc", "ub": "Vec"}
PTO = "npu.pto"


@dataclasses.dataclass(frozen=True)
class _Named:
    """An operand already declared under ``name`` (a transposed view of ``region``)."""

    name: str
    region: Any

    def tile_shape(self) -> tuple:
        return tuple(reversed(self.region.tile_shape()))


def _is_zero(x: Any) -> bool:
    return (isinstance(x, int) and x == 0) or (isinstance(x, E.Const) and x.value == 0)


class _Pto(Walker):
    """PTO's declarations and operands over the shared walker (:mod:`.emit`)."""

    LANG = "PTO"
    ASPECT = PTO
    SPELLING = "pto"
    V_S = "set_flag(PIPE_V, PIPE_S, EVENT_ID0); wait_flag(PIPE_V, PIPE_S, EVENT_ID0);"

    # -- declarations ------------------------------------------------------------------------
    def tile_type(self, b: Any) -> str:
        t = C_TYPES.get(b.dtype.name, b.dtype.name)
        shape = tuple(b.shape[-2:]) if len(b.shape) >= 2 else (1, b.shape[0])
        lay = self.layouts.get(b, ND)
        rp, cp = lay.padded(shape) if lay is not ND else shape
        if lay is not ND and cp * b.dtype.itemsize % 32:
            cp = -(-cp * b.dtype.itemsize // 32) * 32 // b.dtype.itemsize
        tt = _TILE_TYPE[b.scope]
        alias = {"l0a": "TileLeft", "l0b": "TileRight", "l0c": "TileAcc"}.get(b.scope)
        if alias:  # the header picks the arch's fractal layouts (a2a3 L0A: RowMajor on the NPU)
            return f"{alias}<{t}, {rp}, {cp}, {shape[0]}, {shape[1]}>"
        if b.scope == "ub":
            return f"Tile<TileType::Vec, {t}, {rp}, {cp}, BLayout::RowMajor, {shape[0]}, {shape[1]}>"
        blay, slay, frac = "ColMajor", "RowMajor", 512   # L1: NZ
        return (f"Tile<TileType::{tt}, {t}, {rp}, {cp}, BLayout::{blay}, {shape[0]}, {shape[1]}, "
                f"SLayout::{slay}, {frac}, PadValue::Zero>")

    def declare(self) -> None:
        owner = {"C": ("l1", "l0a", "l0b", "l0c"), "V": ("ub",)}[self.kind]
        for b in self.k.allocs:
            if b.scope in owner:
                self.out(f"using {b.name}_t = {self.tile_type(b)};")
                self.out(f"{b.name}_t {b.name};")
                if len(b.shape) <= 2:
                    self.out(f"TASSIGN({b.name}, 0x{self.offsets[b]:x});")

    # -- operands ----------------------------------------------------------------------------
    def tile(self, r: Any) -> str:
        """The tile of region ``r``: the buffer (re-assigned to its version first when it has
        versions), or, for some rows of a UB tile, a tile of those rows placed on them."""
        if isinstance(r, _Named):
            return r.name
        b = r.buffer
        base = f"0x{self.offsets[b]:x}"
        if len(b.shape) > 2:
            per = buffer_bytes(b, self.layouts) // int(b.shape[0])
            base = f"0x{self.offsets[b]:x} + {self.c(r.starts[0])} * {per}"
        rows = list(zip(r.starts, r.extents))[-2:]
        whole = len(b.shape) < 2 or all(_is_zero(st) and ex == full for (st, ex), full
                                        in zip(rows, tuple(b.shape)[-2:]))
        if whole:
            if len(b.shape) > 2:
                self.out(f"TASSIGN({b.name}, {base});")
            return b.name
        (r0, nr), (c0_, nc) = rows
        R, C = (int(x) for x in tuple(b.shape)[-2:])
        if b.scope != "ub" or not _is_zero(c0_) or nc != C or not isinstance(nr, int):
            raise UnsupportedError(f"the {self.LANG} emitter addresses whole rows of a UB tile only "
                                   f"('{b.name}')", getattr(r, "span", None) or self.k.span)
        self.subs += 1
        name = f"{b.name}_rows{self.subs}"
        t = C_TYPES.get(b.dtype.name, b.dtype.name)
        self.out(f"Tile<TileType::Vec, {t}, {nr}, {C}, BLayout::RowMajor, {nr}, {C}> {name};")
        self.out(f"TASSIGN({name}, {base} + {self.c(r0)} * {C * b.dtype.itemsize});")
        return name

    def column(self, r: BufferRegion) -> str:
        """A one-value-per-row UB tile (1 x R) as the R x 1 column (DN) tile that row reductions
        write and row broadcasts read: another tile on the same bytes."""
        b = r.buffer
        if len(b.shape) != 1:
            return self.tile(r)
        t = C_TYPES.get(b.dtype.name, b.dtype.name)
        n = int(b.shape[0])
        self.subs += 1
        name = f"{b.name}_col{self.subs}"
        self.out(f"Tile<TileType::Vec, {t}, {n}, 1, BLayout::ColMajor, {n}, 1> {name};")
        self.out(f"TASSIGN({name}, {self.address(r)});")
        return name

    def address(self, r: BufferRegion) -> str:
        """The byte address of (the version of) region ``r``'s buffer."""
        b = r.buffer
        if len(b.shape) > 2:
            per = buffer_bytes(b, self.layouts) // int(b.shape[0])
            return f"0x{self.offsets[b]:x} + {self.c(r.starts[0])} * {per}"
        return f"0x{self.offsets[b]:x}"

    def transposed(self, b: Any, kind: str) -> str:
        """The tile type of cube buffer ``b`` (R x C) read as its C x R transpose."""
        t = C_TYPES.get(b.dtype.name, b.dtype.name)
        R, C = (int(x) for x in tuple(b.shape)[-2:])
        if kind == "Right":
            return f"TileRight<{t}, {C}, {R}, {C}, {R}>"
        return (f"Tile<TileType::Mat, {t}, {C}, {R}, BLayout::RowMajor, {C}, {R}, SLayout::ColMajor, "
                f"512, PadValue::Zero>")

    def gm(self, r: BufferRegion) -> str:
        """A GlobalTensor view of a GM region (row-major, the buffer's own strides)."""
        b = r.buffer
        shape = list(b.shape)
        strides: list = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * shape[i + 1]
        off = " + ".join(f"{self.c(s)} * {self.c(st)}" if not (isinstance(st, int) and st == 1)
                         else self.c(s) for s, st in zip(r.starts, strides))
        ext = [e for e in r.extents]
        rows = ext[-2] if len(ext) >= 2 else 1
        t = C_TYPES.get(b.dtype.name, b.dtype.name)
        rs = self.c(strides[-2]) if len(strides) >= 2 else "1"
        return (f"GlobalTensor<{t}, Shape<1, 1, 1, {self.c(rows)}, {self.c(ext[-1])}>, Stride<1, 1, 1, {rs}, 1>>"
                f"({b.name} + {off})")

    def operand(self, x: Any, letter: str) -> str:
        """A per-row tile is read as its column (DN) tile, as row broadcasts take it."""
        return self.column(x) if letter == "r" else super().operand(x, letter)

    def reduce(self, s: Reduce) -> None:
        """TROWMAX / TROWSUM with the scratch tile PlanNpuMemory placed after the UB buffers as
        their work space (the source stays intact)."""
        shape = s.src.tile_shape()
        if len(shape) != 2 or s.dim not in (1, -1) or not s.clear or s.kind not in ("max", "sum"):
            raise UnsupportedError("the PTO emitter prints T.reduce_max / reduce_sum over rows "
                                   "(dim=-1, into a cleared destination) only", s.span)
        src, dst = self.tile(s.src), self.column(s.dst)
        R, C = (int(x) for x in shape)
        t = C_TYPES.get(s.src.dtype.name, s.src.dtype.name)
        at = self.k.annotations["scratch"][0]
        self.out(f"{{ Tile<TileType::Vec, {t}, {R}, {C}, BLayout::RowMajor, {R}, {C}> tmp; "
                 f"TASSIGN(tmp, 0x{at:x}); TROW{s.kind.upper()}({dst}, {src}, tmp); }}")

    def copy(self, s: Copy) -> None:
        src, dst = s.src.buffer.scope, s.dst.buffer.scope
        if s.annotations.get("relu"):
            raise UnsupportedError(f"the {self.LANG} emitter has no spelling for T.copy(enable_relu=True) "
                                   "(the fixpipe's ReLU out of L0C)", s.span,
                                   hint="emit Ascend C (target='ascendc'), or run it on ascend-emu")
        if src == "global":  # TLOAD / TSTORE take the GlobalTensor as an lvalue
            t = self.tile(s.dst)
            self.out(f"{{ auto gm = {self.gm(s.src)}; TLOAD({t}, gm); }}")
        elif dst == "global":
            t = self.tile(s.src)
            self.out(f"{{ auto gm = {self.gm(s.dst)}; TSTORE(gm, {t}); }}")
        elif src == "l1" and dst in ("l0a", "l0b") and s.annotations.get("transpose"):
            # the L1 tile (N x K, NZ) read as its transpose (K x N, ZN): same bytes, another view
            if dst == "l0a" or s.src.dtype.itemsize != 2:
                raise UnsupportedError(f"the {self.LANG} emitter transposes 16-bit B operands only",
                                       s.span)
            lt = self.transposed(s.src.buffer, "Mat")
            if s.annotations.get("transpose_tile"):  # T.copy(transpose=True): L0B is K x N already
                self.out(f"{{ {lt} srcT; TASSIGN(srcT, {self.address(s.src)}); "
                         f"TEXTRACT({self.tile(s.dst)}, srcT, 0, 0); }}")
                return
            rt = self.transposed(s.dst.buffer, "Right")
            self.out(f"{{ {lt} srcT; TASSIGN(srcT, {self.address(s.src)}); {rt} dstT; "
                     f"TASSIGN(dstT, {self.address(s.dst)}); TEXTRACT(dstT, srcT, 0, 0); }}")
        elif src == "l1" and dst in ("l0a", "l0b"):
            self.out(f"TEXTRACT({self.tile(s.dst)}, {self.tile(s.src)}, 0, 0);")
        else:
            self.out(f"TMOV({self.tile(s.dst)}, {self.tile(s.src)});")

# -- the PTO spelling of each leaf statement ----------------------------------------------------

def _event(em: Walker, s: Any) -> str:
    return f"EVENT_ID{em.c(s.id)}" if isinstance(s.id, E.Const) else f"(event_t){em.c(s.id)}"


tile_rule(SetFlag, PTO)(lambda em, s: em.out(f"set_flag(PIPE_{s.src}, PIPE_{s.dst}, {_event(em, s)});"))
tile_rule(WaitFlag, PTO)(lambda em, s: em.out(f"wait_flag(PIPE_{s.src}, PIPE_{s.dst}, {_event(em, s)});"))
tile_rule(PipeBarrier, PTO)(lambda em, s: em.out(f"pipe_barrier(PIPE_{s.pipe});"))
tile_rule(BarrierAll, PTO)(lambda em, s: em.out("pipe_barrier(PIPE_ALL);"))
tile_rule(SetCrossFlag, PTO)(lambda em, s: em.out(
    f"ffts_cross_core_sync(PIPE_{s.pipe}, getFFTSMsg({s.mode}, {em.c(s.flag)}));"))
tile_rule(WaitCrossFlag, PTO)(lambda em, s: em.out(f"wait_flag_dev({em.c(s.flag)});"))
tile_rule(Copy, PTO)(lambda em, s: em.copy(s))
tile_rule(Reduce, PTO)(lambda em, s: em.reduce(s))
tile_rule(Fill, PTO)(lambda em, s: em.out(f"TEXPANDS({em.tile(s.dst)}, {em.c(s.value)});"))


@tile_rule(Mma, PTO)
def _mma(em: _Pto, s: Mma) -> None:
    if s.transpose_B:  # B^T was loaded into L0B: its K x N view
        rt = em.transposed(s.B.buffer, "Right")
        em.out(f"{{ {rt} bT; TASSIGN(bT, {em.address(s.B)});")
        em.depth += 1
        _mma(em, dataclasses.replace(s, B=_Named("bT", s.B), transpose_B=False))
        em.depth -= 1
        em.out("}")
        return
    a, b, c = em.tile(s.A), em.tile(s.B), em.tile(s.C)
    if s.init is True:
        em.out(f"TMATMUL({c}, {a}, {b});")
    elif s.init is False:
        em.out(f"TMATMUL_ACC({c}, {c}, {a}, {b});")
    else:
        em.out(f"if {em.c(s.init)} TMATMUL({c}, {a}, {b}); else TMATMUL_ACC({c}, {c}, {a}, {b});")


def emit(func: PrimFunc, target: Any) -> str:
    """PTO C++ for lowered ``func`` (see the module docstring)."""
    m = machine(target.arch)
    kernels: list = []
    post_order_visit(func.body, lambda n: kernels.append(n) if isinstance(n, NpuKernel) else None)
    params = ", ".join([f"__gm__ {C_TYPES.get(p.dtype.name, p.dtype.name)} *{p.name}"
                        if hasattr(p, "shape") else f"int32_t {p.name}" for p in func.params]
                       + [f"int32_t {v.name}" for v in func.dynamic_vars()])
    used: set = set()
    body: list = []
    for n, k in enumerate(kernels):
        body.append(f"extern \"C\" __global__ AICORE void {func.name}_kernel{n if n else ''}({params}) {{")
        for kind, macro in (("C", "__DAV_CUBE__"), ("V", "__DAV_VEC__")):
            em = _Pto(k, m, kind, used)
            em.out(f"int32_t {k.block_vars[0].name} = get_block_idx();")
            if kind == "V":
                em.out(f"int32_t {k.sub_var.name} = get_subblockid();")
            else:
                em.out(f"int32_t {k.sub_var.name} = 0;")
            em.declare()
            em.stmt(k.body)
            body.append(f"#if defined({macro})")
            body.extend(em.lines)
            body.append("#endif")
        body.append("}")
    head = [f"// PTO C++ generated by tegula for {target} from '{func.name}'",
            "#include <pto/pto-inst.hpp>", "using namespace pto;", ""]
    return "\n".join(head + helpers(used, "AICORE") + body) + "\n"
