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

Each statement is preceded by a ``// file.py:LINE  source`` comment naming the kernel line it came
from. The source is not compiled here (no CANN toolkit); its intrinsic names follow the public PTO
ISA documentation.
"""
from __future__ import annotations

import dataclasses
import linecache
import math
from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import BufferRegion
from tegula.ir.npu import (BarrierAll, CoreScope, Mma, NpuKernel, PipeBarrier, SetCrossFlag,
                           SetFlag, VecOp, WaitCrossFlag, WaitFlag)
from tegula.ir.expr import BufferLoad
from tegula.ir.stmt import (BufferStore, Copy, Fill, For, IfThenElse, LetStmt, PrimFunc, Reduce,
                            SeqStmt, Stmt)
from tegula.ir.visitor import post_order_visit
from tegula.backends.npu.layout import ND
from tegula.backends.npu.machine import machine
from tegula.backends.npu.passes.plan_memory import buffer_bytes

C_TYPES = {"float16": "half", "bfloat16": "bfloat16_t", "float32": "float", "int8": "int8_t",
           "int32": "int32_t", "uint8": "uint8_t", "int16": "int16_t"}
_TILE_TYPE = {"l1": "Mat", "l0a": "Left", "l0b": "Right", "l0c": "Acc", "ub": "Vec"}
_C_OPS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "/", "floormod": "%", "div": "/",
          "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "and": "&&",
          "or": "||", "min": "min", "max": "max"}
_VEC_TT = {"add": "TADD", "sub": "TSUB", "mul": "TMUL", "div": "TDIV", "max": "TMAX", "min": "TMIN"}
_VEC_UNARY = {"exp": "TEXP", "ln": "TLOG", "abs": "TABS", "reciprocal": "TRECIP", "sqrt": "TSQRT",
              "rsqrt": "TRSQRT", "relu": "TRELU", "cast": "TCVT", "copy": "TMOV",
              "sigmoid": "TSIGMOID", "silu": "TSILU"}


def c_expr(e: Any) -> str:
    """An index expression as C (integer division and modulo of non-negative values)."""
    if isinstance(e, int):
        return str(e)
    if isinstance(e, E.Const):
        if e.dtype.is_int:
            return str(int(e.value))
        v = float(e.value)
        return ("INFINITY" if v > 0 else "-INFINITY") if math.isinf(v) else "NAN" if v != v else repr(v)
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.BinOp) and e.op in ("min", "max"):
        return f"{e.op}({c_expr(e.a)}, {c_expr(e.b)})"
    if isinstance(e, (E.BinOp, E.Compare)):
        return f"({c_expr(e.a)} {_C_OPS[e.op]} {c_expr(e.b)})"
    if isinstance(e, E.Cast):
        return c_expr(e.value)
    if isinstance(e, E.Select):
        return f"({c_expr(e.cond)} ? {c_expr(e.then)} : {c_expr(e.else_)})"
    raise UnsupportedError(f"the PTO emitter cannot print {type(e).__name__} expressions yet",
                           getattr(e, "span", None))


@dataclasses.dataclass(frozen=True)
class _Named:
    """An operand already declared under ``name`` (a transposed view of ``region``)."""

    name: str
    region: Any

    def tile_shape(self) -> tuple:
        return tuple(reversed(self.region.tile_shape()))


def _is_zero(x: Any) -> bool:
    return (isinstance(x, int) and x == 0) or (isinstance(x, E.Const) and x.value == 0)


_CALLS = {"exp": "exp", "log": "ln", "abs": "abs", "sqrt": "sqrt", "rsqrt": "rsqrt"}
_COMMUTES = ("add", "mul", "max", "min")


def parallel_as_vec(s: For) -> Any:
    """The one vector instruction a ``T.Parallel`` nest is (``c[i, j] = max(a[i, j], 0)`` ->
    ``VecOp("max", c, (a, 0))``), or None: the body must store one expression into a whole UB
    tile, an elementwise operation of loads of whole UB tiles at the loop indices (or of a
    one-value-per-row tile at the row index) and values that do not depend on them."""
    loops = []
    body: Any = s
    while isinstance(body, For) and body.kind == "parallel":
        loops.append(body)
        body = body.body
        while isinstance(body, SeqStmt) and len(body.stmts) == 1:
            body = body.stmts[0]
    if not isinstance(body, BufferStore) or body.buffer.scope != "ub":
        return None
    ivars = [lp.var for lp in loops]
    b = body.buffer
    if list(body.indices) != ivars or [int(lp.extent) if isinstance(lp.extent, int) else lp.extent
                                       for lp in loops] != list(b.shape):
        return None

    def tile(x: Any) -> Any:
        if not (isinstance(x, BufferLoad) and x.buffer.scope == "ub"):
            return None
        if list(x.indices) == ivars and tuple(x.buffer.shape) == tuple(b.shape):
            return x.buffer.region()
        if len(ivars) == 2 and list(x.indices) == ivars[:1] and tuple(x.buffer.shape) == tuple(b.shape[:1]):
            return x.buffer.region()  # one value per row
        return None

    def free(x: Any) -> bool:
        used: list = []
        post_order_visit(x, lambda n: used.append(n) if (isinstance(n, E.Var) and n in ivars)
                         or isinstance(n, BufferLoad) else None)
        return not used

    v = body.value
    dst = b.region()
    if tile(v) is not None:
        return VecOp("copy", dst, (tile(v),), span=s.span)
    if isinstance(v, E.Cast) and tile(v.value) is not None:
        return VecOp("cast", dst, (tile(v.value),), span=s.span)
    if isinstance(v, E.Call) and v.name in _CALLS and len(v.args) == 1 and tile(v.args[0]) is not None:
        return VecOp(_CALLS[v.name], dst, (tile(v.args[0]),), span=s.span)
    if isinstance(v, E.BinOp) and v.op in _VEC_TT:
        x, y = v.a, v.b
        if tile(x) is None and v.op in _COMMUTES:
            x, y = y, x
        if tile(x) is None:
            return None
        if tile(y) is not None:
            return VecOp(v.op, dst, (tile(x), tile(y)), span=s.span)
        if free(y):
            return VecOp(v.op, dst, (tile(x), y), span=s.span)
    return None


class _Emitter:
    """Walks one core kind's code of an NpuKernel: structure (loops, ifs, lets, core scopes) and
    the ``// file.py:LINE`` comments here; ``declare``, ``tile`` and ``leaf`` are the language's."""

    LANG = "PTO"

    def __init__(self, k: NpuKernel, m: Any, kind: str):
        self.k, self.m, self.kind = k, m, kind
        self.layouts = k.annotations.get("layouts", {})
        self.offsets = k.annotations.get("offsets", {})
        self.lines: list[str] = []
        self.depth = 1
        self.last_line: Any = None
        self.subs = 0          # tiles declared for parts of buffers

    def out(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def comment(self, s: Stmt) -> None:
        sp = getattr(s, "span", None)
        if sp is None or (sp.file, sp.line) == self.last_line:
            return
        self.last_line = (sp.file, sp.line)
        src = linecache.getline(sp.file, sp.line).strip()
        self.out(f"// {sp.file.rsplit('/', 1)[-1]}:{sp.line}  {src}")

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
            base = f"0x{self.offsets[b]:x} + {c_expr(r.starts[0])} * {per}"
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
        self.out(f"TASSIGN({name}, {base} + {c_expr(r0)} * {C * b.dtype.itemsize});")
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
            return f"0x{self.offsets[b]:x} + {c_expr(r.starts[0])} * {per}"
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
        off = " + ".join(f"{c_expr(s)} * {c_expr(st)}" if not (isinstance(st, int) and st == 1)
                         else c_expr(s) for s, st in zip(r.starts, strides))
        ext = [e for e in r.extents]
        rows = ext[-2] if len(ext) >= 2 else 1
        t = C_TYPES.get(b.dtype.name, b.dtype.name)
        rs = c_expr(strides[-2]) if len(strides) >= 2 else "1"
        return (f"GlobalTensor<{t}, Shape<1, 1, 1, {c_expr(rows)}, {c_expr(ext[-1])}>, Stride<1, 1, 1, {rs}, 1>>"
                f"({b.name} + {off})")

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, CoreScope):
            if s.kind == self.kind:
                self.stmt(s.body)
        elif isinstance(s, LetStmt):
            self.out(f"int32_t {s.var.name} = {c_expr(s.value)};")
        elif isinstance(s, For) and s.kind == "parallel":
            op = parallel_as_vec(s)
            if op is None:
                raise UnsupportedError(f"the {self.LANG} emitter prints a T.Parallel loop only when its "
                                       "body is one elementwise operation on whole UB tiles", s.span,
                                       hint="use T.tile.* vector operations, or target='ascend-emu'")
            self.comment(s)
            self.vec(op)
        elif isinstance(s, For):
            v, start = s.var.name, c_expr(s.start)
            stop = c_expr(s.extent) if start == "0" and s.step == 1 else \
                f"{start} + {c_expr(s.extent)} * {s.step}"
            inc = f"++{v}" if s.step == 1 else f"{v} += {s.step}"
            self.out(f"for (int32_t {v} = {start}; {v} < {stop}; {inc}) {{")
            self.depth += 1
            self.stmt(s.body)
            self.depth -= 1
            self.out("}")
        elif isinstance(s, IfThenElse):
            self.out(f"if {c_expr(s.cond)} {{")
            self.depth += 1
            self.stmt(s.then)
            self.depth -= 1
            if s.else_ is not None:
                self.out("} else {")
                self.depth += 1
                self.stmt(s.else_)
                self.depth -= 1
            self.out("}")
        else:
            self.comment(s)
            self.leaf(s)

    def leaf(self, s: Stmt) -> None:
        if isinstance(s, SetFlag):
            self.out(f"set_flag(PIPE_{s.src}, PIPE_{s.dst}, EVENT_ID{c_expr(s.id)});"
                     if isinstance(s.id, E.Const) else
                     f"set_flag(PIPE_{s.src}, PIPE_{s.dst}, (event_t){c_expr(s.id)});")
        elif isinstance(s, WaitFlag):
            self.out(f"wait_flag(PIPE_{s.src}, PIPE_{s.dst}, EVENT_ID{c_expr(s.id)});"
                     if isinstance(s.id, E.Const) else
                     f"wait_flag(PIPE_{s.src}, PIPE_{s.dst}, (event_t){c_expr(s.id)});")
        elif isinstance(s, PipeBarrier):
            self.out(f"pipe_barrier(PIPE_{s.pipe});")
        elif isinstance(s, BarrierAll):
            self.out("pipe_barrier(PIPE_ALL);")
        elif isinstance(s, SetCrossFlag):
            self.out(f"ffts_cross_core_sync(PIPE_{s.pipe}, getFFTSMsg({s.mode}, {c_expr(s.flag)}));")
        elif isinstance(s, WaitCrossFlag):
            self.out(f"wait_flag_dev({c_expr(s.flag)});")
        elif isinstance(s, Copy):
            self.copy(s)
        elif isinstance(s, Mma) and s.transpose_B:  # B^T was loaded into L0B: its K x N view
            rt = self.transposed(s.B.buffer, "Right")
            self.out(f"{{ {rt} bT; TASSIGN(bT, {self.address(s.B)});")
            self.depth += 1
            self.leaf(dataclasses.replace(s, B=_Named("bT", s.B), transpose_B=False))
            self.depth -= 1
            self.out("}")
        elif isinstance(s, Mma):
            a, b, c = self.tile(s.A), self.tile(s.B), self.tile(s.C)
            if s.init is True:
                self.out(f"TMATMUL({c}, {a}, {b});")
            elif s.init is False:
                self.out(f"TMATMUL_ACC({c}, {c}, {a}, {b});")
            else:
                self.out(f"if {c_expr(s.init)} TMATMUL({c}, {a}, {b}); else TMATMUL_ACC({c}, {c}, {a}, {b});")
        elif isinstance(s, VecOp):
            self.vec(s)
        elif isinstance(s, Reduce):
            self.reduce(s)
        elif isinstance(s, Fill):
            self.out(f"TEXPANDS({self.tile(s.dst)}, {c_expr(s.value)});")
        else:
            raise UnsupportedError(f"the {self.LANG} emitter cannot print {type(s).__name__} yet", s.span,
                                   hint="run it on target='ascend-emu' instead")

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
            lt, rt = self.transposed(s.src.buffer, "Mat"), self.transposed(s.dst.buffer, "Right")
            self.out(f"{{ {lt} srcT; TASSIGN(srcT, {self.address(s.src)}); {rt} dstT; "
                     f"TASSIGN(dstT, {self.address(s.dst)}); TEXTRACT(dstT, srcT, 0, 0); }}")
        elif src == "l1" and dst in ("l0a", "l0b"):
            self.out(f"TEXTRACT({self.tile(s.dst)}, {self.tile(s.src)}, 0, 0);")
        else:
            self.out(f"TMOV({self.tile(s.dst)}, {self.tile(s.src)});")

    def vec(self, s: VecOp) -> None:
        dst = self.tile(s.dst)
        ops = [self.tile(x) if isinstance(x, BufferRegion) else c_expr(x) for x in s.srcs]
        if s.op == "fill":
            self.out(f"TEXPANDS({dst}, {ops[0]});")
        elif s.op == "cast":
            wide = s.dst.dtype.itemsize > s.srcs[0].dtype.itemsize
            self.out(f"TCVT({dst}, {ops[0]}, RoundMode::{'CAST_NONE' if wide else 'CAST_RINT'});")
        elif s.op in _VEC_UNARY:
            self.out(f"{_VEC_UNARY[s.op]}({dst}, {ops[0]});")
        elif s.op in _VEC_TT:
            b = s.srcs[1]
            if not isinstance(b, BufferRegion):
                self.out(f"{_VEC_TT[s.op]}S({dst}, {ops[0]}, {ops[1]});")
            elif b.tile_shape() != s.dst.tile_shape():
                self.out(f"TROWEXPAND{s.op.upper()}({dst}, {ops[0]}, {self.column(b)});")
            else:
                self.out(f"{_VEC_TT[s.op]}({dst}, {ops[0]}, {ops[1]});")
        elif s.op == "axpy":
            self.out(f"TAXPY({dst}, {ops[0]}, {ops[1]});")
        else:
            self.out(f"TLRELU({dst}, {ops[0]}, {ops[1]});")


def emit(func: PrimFunc, target: Any) -> str:
    """PTO C++ for lowered ``func`` (see the module docstring)."""
    m = machine(target.arch)
    kernels: list = []
    post_order_visit(func.body, lambda n: kernels.append(n) if isinstance(n, NpuKernel) else None)
    params = ", ".join([f"__gm__ {C_TYPES.get(p.dtype.name, p.dtype.name)} *{p.name}"
                        if hasattr(p, "shape") else f"int32_t {p.name}" for p in func.params]
                       + [f"int32_t {v.name}" for v in func.dynamic_vars()])
    out = [f"// PTO C++ generated by tegula for {target} from '{func.name}'",
           "#include <pto/pto-inst.hpp>", "using namespace pto;", ""]
    for n, k in enumerate(kernels):
        out.append(f"extern \"C\" __global__ AICORE void {func.name}_kernel{n if n else ''}({params}) {{")
        for kind, macro in (("C", "__DAV_CUBE__"), ("V", "__DAV_VEC__")):
            em = _Emitter(k, m, kind)
            em.out(f"int32_t {k.block_vars[0].name} = get_block_idx();")
            if kind == "V":
                em.out(f"int32_t {k.sub_var.name} = get_subblockid();")
            else:
                em.out(f"int32_t {k.sub_var.name} = 0;")
            em.declare()
            em.stmt(k.body)
            out.append(f"#if defined({macro})")
            out.extend(em.lines)
            out.append("#endif")
        out.append("}")
    return "\n".join(out) + "\n"
