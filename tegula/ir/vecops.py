"""The vector-op table: what every NPU vector instruction (``T.tile.<op>``) means, in one place.

One row per op gives its parameters (``T.tile.<op>(dst, ...)``), its numpy semantics, its PTO and
Ascend C spellings, its pipe and its cost row, and the ``T.Parallel`` body it is (ParallelToVec).
The frontend (``language/ascend.py``), the interpreter and the NPU emulator
(``backends/npu/semantics.py``), InsertSync and the scheduler (what it reads and writes), the cost
model (``backends/npu/cost.py``), the ParallelToVec pass and both emitters read it, so a new
``T.tile`` op is one row here plus its tests. Like :mod:`tegula.ir.ops` (the scalar operator
table) it sits on the IR floor: it imports numpy and the operator table only.

Operands. A :class:`~tegula.ir.npu.VecOp` holds the destination region and ``srcs``: UB regions
or scalar expressions, in the row's parameter order; parameters named in ``attrs`` are Python
values kept on the node (``mode``, ``axis``). The *form* of an op is one letter per source:
``t`` a tile of the destination's shape (or any tile, for ``raw`` rows), ``r`` a tile of one value
per row (broadcast along the row), ``s`` a scalar. The spellings are keyed by form.

Semantics. ``elementwise`` rows compute ``fn(*operands)`` with operands broadcast to the
destination's shape (narrow floats widened to float32, the result rounded to the destination's
dtype once, as one vector instruction does); ``reads_dst`` rows get the destination's old value
first. A ``count`` parameter (upstream's element count) limits the op to the first ``count``
elements of the destination (row-major); the rest keep their value. ``raw`` rows compute
``fn(dst, srcs, attrs)`` on whole arrays (masks, gathers, index vectors).

Spellings are ``str.format`` templates: ``{d}`` the destination, ``{0}``, ``{1}``, ... the sources
(tiles by name, scalars as C expressions; a per-row tile as PTO's column tile), ``{n}`` the
element count, ``{T}`` / ``{ST}`` the C type of the destination / first source, and the node's
attributes by name. A form with no spelling is an UnsupportedError of the emitter, naming the op.

Masks. ``compare`` writes one bit per element (bit ``i % 8`` of byte ``i // 8``, LSB first) into
the bytes of its destination, as Ascend's ``Compare`` does; ``select`` reads them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from tegula.ir import ops
from tegula.ir.buffer import BufferRegion

F32 = np.dtype(np.float32)


class VecOpError(Exception):
    """An operand of ``T.tile.<op>`` that does not fit the row (the frontend reports it)."""

    def __init__(self, msg: str, hint: str = ""):
        super().__init__(msg)
        self.hint = hint


@dataclass(frozen=True)
class VecRow:
    """One vector op. See the module docstring for the fields' meaning."""

    name: str
    params: tuple                     # parameter names after dst; "name=default" for defaults
    fn: Callable                      # numpy semantics (elementwise or raw)
    pto: dict = field(default_factory=dict)       # form -> template
    ascendc: dict = field(default_factory=dict)   # form -> template
    cost: tuple = (256, 1, 6)         # a2a3: bytes per cycle, cycles per repeat, delay
    slow: bool = False                # a5: half throughput (transcendental)
    raw: bool = False                 # fn(dst, srcs, attrs) instead of elementwise
    reads_dst: bool = False           # the old destination is an operand
    attrs: tuple = ()                 # parameters kept as Python values on the node
    ignore: tuple = ()                # parameters accepted and not used
    check: Optional[Callable] = None  # (dst shape, src shapes or None, attrs) -> attrs; VecOpError
    parallel: Optional[str] = None    # the T.Parallel body it is: "binop:add", "call:exp", ...
    commutes: bool = False
    pipe: str = "V"
    fields: Optional[Callable] = None  # (node) -> extra template fields
    scalars: tuple = ()               # parameters that are values: a one-element tile is read as one
    counts: tuple = ()                # scalar parameters that are element counts (int32)

    def signature(self) -> str:
        return f"T.tile.{self.name}(dst, {', '.join(self.params)})"

    def param_names(self) -> list:
        return [p.split("=")[0] for p in self.params]

    def defaults(self) -> dict:
        """The parameters with a default, and its value (``None``, an int, or a string)."""
        out = {}
        for p in self.params:
            name, sep, default = p.partition("=")
            if sep:
                out[name] = None if default == "None" else \
                    int(default) if default.lstrip("-").isdigit() else default
        return out


# -- semantics helpers -----------------------------------------------------------------------
def _relu(x: Any) -> Any:
    return np.maximum(x, 0)


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _compare(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    a, b = srcs
    a = np.asarray(a).reshape(-1)
    b = np.asarray(b).reshape(-1) if np.ndim(b) else b
    bits = np.asarray(ops.COMPARE[attrs["mode"].lower()].np(a, b), bool)
    packed = np.packbits(bits, bitorder="little")
    out = np.ascontiguousarray(dst).copy()
    flat = out.reshape(-1).view(np.uint8)
    if packed.size > flat.size:
        raise VecOpError(f"the mask of {a.size} elements needs {packed.size} bytes; the destination "
                         f"has {flat.size}")
    flat[:packed.size] = packed
    return out


def _mask_bits(mask: np.ndarray, n: int) -> np.ndarray:
    m = np.ascontiguousarray(mask).reshape(-1).view(np.uint8)
    return np.unpackbits(m, bitorder="little")[:n].astype(bool)


def _select(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    mask, a, b = srcs
    bits = _mask_bits(mask, dst.size).reshape(dst.shape)
    a = np.asarray(a).reshape(dst.shape)
    b = np.asarray(b).reshape(dst.shape) if np.ndim(b) else b
    return np.where(bits, a, b).astype(dst.dtype)


def _broadcast(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    src = np.asarray(srcs[0])
    if dst.ndim == 2:
        src = src.reshape((1, -1) if attrs.get("axis") == 0 else (-1, 1)) if src.ndim == 1 else src
    return np.broadcast_to(src, dst.shape).astype(dst.dtype)


def _check_broadcast(dst: tuple, srcs: list, attrs: dict) -> dict:
    src = srcs[0]
    axis = attrs.get("axis")
    if src is None:
        raise VecOpError("the source must be a UB tile")
    if len(dst) == 1:
        if tuple(src)[-1:] not in ((1,), tuple(dst)):
            raise VecOpError(f"cannot broadcast {tuple(src)} to {tuple(dst)}")
        return {"axis": 0}
    if len(dst) != 2 or len(src) not in (1, 2):
        raise VecOpError("broadcast takes 1-d or 2-d tiles")
    if len(src) == 1:
        if axis == 0 or (axis is None and src[0] == dst[1]):
            src, axis = (1, src[0]), 0
        elif axis == 1 or (axis is None and src[0] == dst[0]):
            src, axis = (src[0], 1), 1
        else:
            raise VecOpError(f"cannot broadcast {tuple(srcs[0])} to {tuple(dst)} (axis={axis})")
    if axis is None:
        axis = 0 if src[0] == 1 and dst[0] != 1 else 1 if src[1] == 1 and dst[1] != 1 else 0
    if axis not in (0, 1):
        raise VecOpError(f"axis must be 0 or 1, got {axis!r}")
    if src[axis] != 1 and tuple(src) != tuple(dst) or src[1 - axis] != dst[1 - axis]:
        raise VecOpError(f"cannot broadcast {tuple(srcs[0])} to {tuple(dst)} along axis {axis}")
    return {"axis": axis}


def _check_compare(dst: tuple, srcs: list, attrs: dict) -> dict:
    mode = str(attrs.get("mode", "")).upper()
    if mode not in ("EQ", "NE", "GT", "GE", "LT", "LE"):
        raise VecOpError(f"unknown compare mode {attrs.get('mode')!r}",
                         hint='modes are "EQ", "NE", "GT", "GE", "LT", "LE"')
    if srcs[0] is None:
        raise VecOpError("the first operand must be a UB tile")
    if srcs[1] is not None and tuple(srcs[1]) != tuple(srcs[0]):
        raise VecOpError(f"the operands' shapes differ: {tuple(srcs[0])} and {tuple(srcs[1])}")
    return {"mode": mode}


_SEL_MODES = ("VSEL_CMPMASK_SPR", "VSEL_TENSOR_SCALAR_MODE", "VSEL_TENSOR_TENSOR_MODE")


def _check_select(dst: tuple, srcs: list, attrs: dict) -> dict:
    mode = attrs.get("mode")
    if mode not in _SEL_MODES:
        raise VecOpError(f"unknown select mode {mode!r}", hint="modes are " + ", ".join(_SEL_MODES))
    if srcs[0] is None:
        raise VecOpError("the mask must be a UB tile")
    for s in srcs[1:]:
        if s is not None and int(np.prod(s)) != int(np.prod(dst)):
            raise VecOpError(f"operand {tuple(s)} does not match the destination {tuple(dst)}")
    if srcs[1] is None:
        raise VecOpError("the first value operand must be a UB tile")
    if (srcs[2] is None) != (mode == "VSEL_TENSOR_SCALAR_MODE"):
        raise VecOpError(f"{mode} takes a {'scalar' if mode == 'VSEL_TENSOR_SCALAR_MODE' else 'tile'} "
                         "second operand",
                         hint="VSEL_TENSOR_SCALAR_MODE selects between a tile and a scalar")
    return {"mode": mode}


def _check_any(dst: tuple, srcs: list, attrs: dict) -> dict:
    return attrs


def _gather(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    src, offs = srcs
    src = np.asarray(src).reshape(-1)
    idx = (np.asarray(offs).reshape(-1).astype(np.int64) - int(attrs.get("base", 0))) // src.dtype.itemsize
    n = min(dst.size, idx.size)
    if idx[:n].size and (idx[:n].min() < 0 or idx[:n].max() >= src.size):
        raise VecOpError(f"a gather offset reads past the source's {src.size} elements")
    out = dst.copy().reshape(-1)
    out[:n] = src[idx[:n]]
    return out.reshape(dst.shape)


def _vec_index(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    first = srcs[0]
    step = srcs[1] if len(srcs) > 1 else 1
    n = min(dst.size, int(attrs.get("count") or dst.size))
    out = dst.copy().reshape(-1)
    out[:n] = (np.asarray(first, np.float64) + np.arange(n) * np.asarray(step, np.float64)).astype(dst.dtype)
    return out.reshape(dst.shape)


def _transpose(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    return np.asarray(srcs[0]).reshape(dst.shape[::-1]).T.astype(dst.dtype)


def _check_transpose(dst: tuple, srcs: list, attrs: dict) -> dict:
    if srcs[0] is None or len(dst) != 2 or tuple(srcs[0]) != tuple(dst)[::-1]:
        raise VecOpError(f"transpose takes an (R, C) tile into a (C, R) destination, got "
                         f"{srcs[0] and tuple(srcs[0])} -> {tuple(dst)}")
    return attrs


def _pairs(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(value, index) pairs, descending by value (ties: lower index first), interleaved flat."""
    order = np.lexsort((index, -values.astype(np.float64)))
    out = np.empty(2 * values.size, np.float64)
    out[0::2], out[1::2] = values[order], index[order]
    return out


def _sort(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    src, n = np.asarray(srcs[0]).reshape(-1), int(srcs[1])
    aligned = -(-n // 32) * 32
    vals = np.full(aligned, -np.inf)
    vals[:min(n, src.size)] = src[:min(n, aligned)]
    pairs = _pairs(vals, np.arange(aligned, dtype=np.float64))
    k = int(srcs[2]) if len(srcs) > 2 else aligned
    out = dst.copy().reshape(-1)
    m = min(out.size, 2 * k)
    out[:m] = pairs[:m]
    return out.reshape(dst.shape)


def _topk(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    src, k, n = srcs
    return _sort(dst, [src, n, k], attrs)


def _merge_sort(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    pairs = np.concatenate([np.asarray(x, np.float64).reshape(-1, 2) for x in srcs])
    merged = _pairs(pairs[:, 0], np.arange(len(pairs)))
    # the index slot carries the sources' own indices
    order = np.lexsort((np.arange(len(pairs)), -pairs[:, 0]))
    merged[1::2] = pairs[order, 1]
    out = dst.copy().reshape(-1)
    m = min(out.size, merged.size)
    out[:m] = merged[:m]
    return out.reshape(dst.shape)


_GATHER_PATTERNS = {"P0101": (0, 2), "P1010": (1, 2), "P0001": (0, 4), "P0010": (1, 4), "P0100": (2, 4),
                    "P1000": (3, 4), "P1111": (0, 1)}


def _check_gather_mask(dst: tuple, srcs: list, attrs: dict) -> dict:
    if attrs.get("pattern") not in _GATHER_PATTERNS:
        raise VecOpError(f"gather_mask pattern {attrs.get('pattern')!r} is not a built-in pattern",
                         hint="patterns: " + ", ".join(_GATHER_PATTERNS) + " (a custom pattern tile is "
                              "not supported yet)")
    return attrs


def _gather_mask(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    start, step = _GATHER_PATTERNS[attrs["pattern"]]
    src = np.asarray(srcs[0]).reshape(-1)[start::step]
    out = dst.copy().reshape(-1)
    m = min(out.size, src.size)
    out[:m] = src[:m]
    return out.reshape(dst.shape)


def _reduce_sum_count(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    src = np.asarray(srcs[0]).reshape(-1)
    n = int(attrs.get("count") or src.size)
    out = dst.copy().reshape(-1)
    out[0] = src[:n].astype(np.float64).sum()
    return out.reshape(dst.shape)


def _check_row_expand(dst: tuple, srcs: list, attrs: dict) -> dict:
    if len(dst) != 2 or srcs[0] is None or tuple(srcs[0]) != tuple(dst):
        raise VecOpError(f"the destination and the first operand are one 2-d shape, got {tuple(dst)} "
                         f"and {srcs[0] and tuple(srcs[0])}")
    if srcs[1] is None or int(np.prod(srcs[1])) != dst[0] or len(srcs[1]) > 2:
        raise VecOpError(f"the second operand holds one value per row ({dst[0]},), (1, {dst[0]}) or "
                         f"({dst[0]}, 1), got {srcs[1] and tuple(srcs[1])}")
    return attrs


def _brcb(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    """Each of the first ``repeat_times * 8`` source elements fills one 32-byte block of dst; block
    ``j`` of repeat ``r`` starts at block ``r * dst_repeat_stride + j * dst_blk_stride``."""
    src = np.asarray(srcs[0]).reshape(-1)
    per = max(1, 32 // dst.dtype.itemsize)
    rep, bs, rs = int(attrs["repeat_times"]), int(attrs["dst_blk_stride"]), int(attrs["dst_repeat_stride"])
    if src.size < rep * 8:
        raise VecOpError(f"brcb reads {rep * 8} source elements; the source has {src.size}")
    out = dst.copy().reshape(-1)
    for r in range(rep):
        for j in range(8):
            at = (r * rs + j * bs) * per
            if at + per > out.size:
                raise VecOpError(f"brcb writes block {r * rs + j * bs} past the destination's "
                                 f"{out.size // per} blocks")
            out[at:at + per] = src[r * 8 + j]
    return out.reshape(dst.shape)


def _gatherb(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    """32-byte blocks gathered by byte offset: block ``j`` of repeat ``r`` of dst (at block
    ``r * dst_rep_stride + j * dst_blk_stride``) is the source block at ``offset[r * 8 + j]``."""
    src = np.ascontiguousarray(srcs[0]).reshape(-1).view(np.uint8)
    offs = np.asarray(srcs[1]).reshape(-1).astype(np.int64)
    rep, bs, rs = int(attrs["repeat_time"]), int(attrs["dst_blk_stride"]), int(attrs["dst_rep_stride"])
    out = np.ascontiguousarray(dst).copy()
    raw = out.reshape(-1).view(np.uint8)
    for r in range(rep):
        for j in range(8):
            o, at = int(offs[r * 8 + j]), (r * rs + j * bs) * 32
            if o < 0 or o + 32 > src.size or at + 32 > raw.size:
                raise VecOpError(f"gatherb block {r * 8 + j} (source byte {o}, destination byte {at}) "
                                 "is out of range")
            raw[at:at + 32] = src[o:o + 32]
    return out


# -- spelling helpers ---------------------------------------------------------------------------
def _unary(pto: Optional[str], asc: Optional[str]) -> dict:
    return {"pto": {"t": f"{pto}({{d}}, {{0}});"} if pto else {},
            "ascendc": {"t": f"{asc}({{d}}, {{0}}, {{n}});"} if asc else {}}


def _binary(pto: Optional[str], asc: Optional[str], asc_s: Optional[str] = None, *,
            row: bool = True) -> dict:
    p = {}
    if pto:
        p = {"tt": f"{pto}({{d}}, {{0}}, {{1}});", "ts": f"{pto}S({{d}}, {{0}}, {{1}});"}
        if row:
            p["tr"] = f"TROWEXPAND{pto[1:]}({{d}}, {{0}}, {{1}});"
    a = {}
    if asc:
        a["tt"] = f"{asc}({{d}}, {{0}}, {{1}}, {{n}});"
    if asc_s:
        a["ts"] = asc_s
    return {"pto": p, "ascendc": a}


def _cast_fields(s: Any) -> dict:
    wide = s.dst.dtype.itemsize > s.srcs[0].dtype.itemsize
    return {"round": s.attrs.get("mode") or ("CAST_NONE" if wide else "CAST_RINT")}


# how a conversion to an integer rounds, by Ascend's RoundMode (to a float: to nearest even)
ROUNDING = {"CAST_NONE": np.rint, "CAST_RINT": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil,
            "CAST_TRUNC": np.trunc, "CAST_ROUND": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5),
            "CAST_ODD": np.rint}


def _check_cast(dst: tuple, srcs: list, attrs: dict) -> dict:
    if attrs.get("mode", "CAST_RINT") not in ROUNDING:
        raise VecOpError(f"unknown rounding mode {attrs.get('mode')!r}", hint="modes: " + ", ".join(ROUNDING))
    if srcs[0] is None or int(np.prod(srcs[0])) != int(np.prod(dst)):
        raise VecOpError(f"the source {srcs[0] and tuple(srcs[0])} does not match the destination {tuple(dst)}")
    return attrs


def _cast(dst: np.ndarray, srcs: list, attrs: dict) -> np.ndarray:
    """A conversion: to an integer rounded by the mode and saturated to the type's range."""
    x = np.asarray(srcs[0]).reshape(dst.shape)
    if dst.dtype.kind in "iu" and x.dtype.kind == "f":
        info = np.iinfo(dst.dtype)
        x = np.clip(np.nan_to_num(ROUNDING[attrs.get("mode", "CAST_RINT")](x.astype(np.float64))),
                    info.min, info.max)
    out = x.astype(dst.dtype)
    count = attrs.get("count")
    if count is not None and int(count) < dst.size:
        keep = dst.copy().reshape(-1)
        keep[:int(count)] = out.reshape(-1)[:int(count)]
        return keep.reshape(dst.shape)
    return out


def _shape_fields(s: Any) -> dict:
    d = [int(x) for x in s.dst.tile_shape()]
    src = [int(x) for x in s.srcs[0].tile_shape()]
    d2 = d if len(d) == 2 else [1] + d
    s2 = src if len(src) == 2 else ([1] + src if s.attrs.get("axis", 0) == 0 else src + [1])
    return {"R": d2[0], "C": d2[1], "sR": s2[0], "sC": s2[1], "dim": len(d)}


def _src_count(s: Any) -> dict:
    n = 1
    for e in s.srcs[0].tile_shape():
        n *= int(e)
    return {"n": n}


def _row(name: str, params: str, fn: Callable, spell: Optional[dict] = None, **kw: Any) -> VecRow:
    spell = spell or {}
    return VecRow(name, tuple(p.strip() for p in params.split(",") if p.strip()), fn,
                  spell.get("pto", {}), spell.get("ascendc", {}), **kw)


def _ts(asc: str) -> str:
    return f"{asc}({{d}}, {{0}}, ({{T}})({{1}}), {{n}});"


_ROWS = [
    # -- moves and conversions
    _row("fill", "value", lambda v: v,
         {"pto": {"s": "TEXPANDS({d}, {0});"}, "ascendc": {"s": "Duplicate({d}, ({T}){0}, {n});"}},
         scalars=("value",)),
    _row("copy", "src", lambda x: x,
         {"pto": {"t": "TMOV({d}, {0});"}, "ascendc": {"t": "DataCopy({d}, {0}, {n});"}},
         parallel="load"),
    _row("cast", "src, mode=CAST_RINT, count=None", _cast,
         {"pto": {"t": "TCVT({d}, {0}, RoundMode::{round});"},
          "ascendc": {"t": "Cast({d}, {0}, RoundMode::{round}, {n});"}},
         cost=(256, 1, 7), raw=True, attrs=("mode",), check=_check_cast, fields=_cast_fields,
         parallel="cast"),
    _row("round", "src, count=None", np.rint,
         {"pto": {"t": "TCVT({d}, {0}, RoundMode::CAST_RINT);"},
          "ascendc": {"t": "Cast({d}, {0}, RoundMode::CAST_RINT, {n});"}}, cost=(256, 1, 7)),
    # -- unary
    _row("exp", "src", np.exp, _unary("TEXP", "Exp"), cost=(128, 1, 12), slow=True,
         parallel="call:exp"),
    _row("ln", "src", np.log, _unary("TLOG", "Ln"), cost=(128, 1, 12), slow=True,
         parallel="call:log"),
    _row("abs", "src", np.abs, _unary("TABS", "Abs"), parallel="call:abs"),
    _row("reciprocal", "src", lambda x: 1 / x, _unary("TRECIP", "Reciprocal"), cost=(128, 1, 13),
         slow=True),
    _row("sqrt", "src", np.sqrt, _unary("TSQRT", "Sqrt"), cost=(128, 1, 12), slow=True,
         parallel="call:sqrt"),
    _row("rsqrt", "src", lambda x: 1 / np.sqrt(x), _unary("TRSQRT", "Rsqrt"), cost=(128, 1, 13),
         slow=True, parallel="call:rsqrt"),
    _row("relu", "src", _relu, _unary("TRELU", "Relu")),
    _row("sigmoid", "src", _sigmoid, _unary("TSIGMOID", "Sigmoid"), cost=(128, 2, 12)),
    _row("silu", "src", lambda x: x * _sigmoid(x), _unary("TSILU", "Silu"), cost=(128, 2, 12)),
    _row("sin", "src", np.sin, _unary(None, "Sin"), cost=(128, 2, 12), slow=True),
    _row("cos", "src", np.cos, _unary(None, "Cos"), cost=(128, 2, 12), slow=True),
    _row("bitwise_not", "src", np.invert, _unary("TNOT", "Not")),
    # -- binary (a tile, a per-row tile or a scalar second operand)
    _row("add", "src0, src1", np.add, _binary("TADD", "Add", _ts("Adds")), parallel="binop:add",
         commutes=True),
    _row("sub", "src0, src1", np.subtract,
         _binary("TSUB", "Sub", "Adds({d}, {0}, ({T})(-({1})), {n});"), parallel="binop:sub"),
    _row("mul", "src0, src1", np.multiply, _binary("TMUL", "Mul", _ts("Muls")), cost=(256, 1, 7),
         parallel="binop:mul", commutes=True),
    _row("div", "src0, src1", np.divide,
         _binary("TDIV", "Div", "Muls({d}, {0}, ({T})(1.0f / ({1})), {n});"), cost=(128, 1, 13),
         slow=True, parallel="binop:div"),
    _row("max", "src0, src1", np.maximum, _binary("TMAX", "Max", _ts("Maxs")), parallel="binop:max",
         commutes=True),
    _row("min", "src0, src1", np.minimum, _binary("TMIN", "Min", _ts("Mins")), parallel="binop:min",
         commutes=True),
    _row("pow", "src0, src1", np.power, _binary(None, "Power", _ts("Power")), cost=(128, 2, 13),
         slow=True),
    _row("bitwise_and", "src0, src1", np.bitwise_and, _binary("TAND", "And", row=False)),
    _row("bitwise_or", "src0, src1", np.bitwise_or, _binary("TOR", "Or", row=False)),
    _row("bitwise_xor", "src0, src1", np.bitwise_xor, _binary("TXOR", "Xor", row=False)),
    _row("bitwise_lshift", "src, shift", np.left_shift,
         {"pto": {"ts": "TSHLS({d}, {0}, {1});"}, "ascendc": {"ts": _ts("ShiftLeft")}}),
    _row("bitwise_rshift", "src, shift", np.right_shift,
         {"pto": {"ts": "TSHRS({d}, {0}, {1});"}, "ascendc": {"ts": _ts("ShiftRight")}}),
    _row("row_expand_mul", "src0, src1", np.multiply,
         {"pto": {"tr": "TROWEXPANDMUL({d}, {0}, {1});"}}, cost=(256, 1, 7)),
    # -- with a scalar
    _row("axpy", "src, alpha", lambda d, x, a: d + a * x,
         {"pto": {"ts": "TAXPY({d}, {0}, {1});"}, "ascendc": {"ts": "Axpy({d}, {0}, {1}, {n});"}},
         cost=(256, 1, 7), reads_dst=True),
    _row("leaky_relu", "src, alpha", lambda x, a: np.where(x >= 0, x, x * a),
         {"pto": {"ts": "TLRELU({d}, {0}, {1});"}, "ascendc": {"ts": "LeakyRelu({d}, {0}, {1}, {n});"}},
         cost=(256, 1, 7)),
    _row("mul_add_dst", "src0, src1", lambda d, a, b: a * b + d,
         {"ascendc": {"tt": "MulAddDst({d}, {0}, {1}, {n});"}}, cost=(256, 1, 7), reads_dst=True),
    _row("clamp_max", "src, value, count=None", np.minimum,
         {"pto": {"ts": "TMINS({d}, {0}, {1});"}, "ascendc": {"ts": _ts("Mins")}}),
    _row("clamp_min", "src, value, count=None", np.maximum,
         {"pto": {"ts": "TMAXS({d}, {0}, {1});"}, "ascendc": {"ts": _ts("Maxs")}}),
    _row("clamp", "src, lo, hi, count=None", lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi),
         {"pto": {"tss": "TMAXS({d}, {0}, {1}); TMINS({d}, {d}, {2});"},
          "ascendc": {"tss": "Maxs({d}, {0}, ({T})({1}), {n}); Mins({d}, {d}, ({T})({2}), {n});"}},
         cost=(128, 1, 12)),
    # -- masks, selection, data movement inside UB
    _row("compare", "src0, src1, mode", _compare,
         {"pto": {"tt": "TCMP({d}, {0}, {1}, CmpMode::{mode});",
                  "ts": "TCMPS({d}, {0}, {1}, CmpMode::{mode});"},
          "ascendc": {"tt": "Compare({d}, {0}, {1}, CMPMODE::{mode}, {n});",
                      "ts": "CompareScalar({d}, {0}, ({ST})({1}), CMPMODE::{mode}, {n});"}},
         raw=True, attrs=("mode",), check=_check_compare, fields=_src_count),
    _row("select", "mask, src0, src1, mode", _select,
         {"pto": {"ttt": "TSEL({d}, {0}, {1}, {2});", "tts": "TSELS({d}, {0}, {1}, {2});"},
          "ascendc": {"ttt": "Select({d}, {0}, {1}, {2}, SELMODE::{mode}, {n});",
                      "tts": "Select({d}, {0}, {1}, ({T})({2}), SELMODE::{mode}, {n});"}},
         raw=True, attrs=("mode",), check=_check_select, cost=(256, 1, 7)),
    _row("broadcast", "src, axis=None", _broadcast,
         {"pto": {"t": "TCOLEXPAND({d}, {0});", "r": "TROWEXPAND({d}, {0});"},
          "ascendc": {"t": "{{ uint32_t ds[{dim}] = {{{R}, {C}}}; uint32_t ss[{dim}] = {{{sR}, {sC}}}; "
                           "Broadcast<{T}, {dim}, {axis}, false>({d}, {0}, ds, ss); }}"}},
         raw=True, attrs=("axis",), check=_check_broadcast, fields=_shape_fields),
    _row("gather", "src, offset, base=0", _gather,
         {"ascendc": {"tt": "Gather({d}, {0}, {1}, (uint32_t){base}, {n});"}},
         raw=True, attrs=("base",), check=_check_any, cost=(128, 2, 12)),
    _row("createvecindex", "first", _vec_index,
         {"pto": {"s": "TCI({d}, {0});"}, "ascendc": {"s": "CreateVecIndex({d}, ({T})({0}), {n});"}},
         raw=True, check=_check_any),
    _row("arith_progression", "first, diff, count", _vec_index,
         {"ascendc": {"ss": "ArithProgression<{T}>({d}, ({T})({0}), ({T})({1}), {n});"}},
         raw=True, check=_check_any, pipe="V"),
    _row("transpose", "src", _transpose,
         {"pto": {"t": "TTRANS({d}, {0});"}, "ascendc": {"t": "Transpose({d}, {0});"}},
         raw=True, check=_check_transpose),
    # -- sorting (pairs of (value, index) in the destination's dtype, descending)
    _row("sort", "src, actual_num", _sort, raw=True, check=_check_any, cost=(128, 4, 30),
         counts=("actual_num",)),
    _row("topk", "src, k, actual_num", _topk, raw=True, check=_check_any, cost=(128, 4, 30),
         counts=("k", "actual_num")),
    _row("merge_sort", "src0, src1, src2=None, src3=None", _merge_sort, raw=True, check=_check_any,
         cost=(128, 2, 20)),
    _row("gather_mask", "src, pattern", _gather_mask,
         {"ascendc": {"t": "{{ uint64_t cnt; GatherMask({d}, {0}, (uint8_t){pcode}, false, 0, "
                           "{{1, 1, 0, 0}}, cnt); }}"}},
         raw=True, attrs=("pattern",), check=_check_gather_mask,
         fields=lambda s: {"pcode": list(_GATHER_PATTERNS).index(s.attrs["pattern"]) + 1}),
    _row("brcb_experiment", "src, repeat_times, dst_blk_stride, dst_repeat_stride", _brcb,
         {"pto": {"r": "TROWEXPAND({d}, {0});"},
          "ascendc": {"r": "Brcb({d}, {0}, {repeat_times}, {{{dst_blk_stride}, {dst_repeat_stride}}});"}},
         raw=True, attrs=("repeat_times", "dst_blk_stride", "dst_repeat_stride"), check=_check_any),
    _row("gatherb", "src, offset, repeat_time, dst_blk_stride, dst_rep_stride", _gatherb,
         {"ascendc": {"tt": "Gatherb({d}, {0}, {1}, {repeat_time}, {{{dst_blk_stride}, {dst_rep_stride}}});"}},
         raw=True, attrs=("repeat_time", "dst_blk_stride", "dst_rep_stride"), check=_check_any,
         cost=(128, 2, 12)),
    # -- upstream's "experiment" spellings (a count of elements, a per-row operand)
    _row("sub_experiment", "src0, src1, count", np.subtract,
         {"ascendc": {"tt": "Sub({d}, {0}, {1}, {n});"}}),
    _row("abs_experiment", "src, count", np.abs, {"ascendc": {"t": "Abs({d}, {0}, {n});"}}),
    _row("mins_experiment", "src, value, count", np.minimum, {"ascendc": {"ts": _ts("Mins")}}),
    _row("reduce_sum_experiment", "src, count", _reduce_sum_count, raw=True, check=_check_any,
         cost=(256, 1, 20)),
    *[_row(f"row_expand_{op}_experiment", "src0, src1, tmp=None", fn,
           {"pto": {"tr": f"TROWEXPAND{op.upper()}({{d}}, {{0}}, {{1}});"}}, ignore=("tmp",),
           check=_check_row_expand, cost=cost)
      for op, fn, cost in (("mul", np.multiply, (256, 1, 7)), ("sub", np.subtract, (256, 1, 6)),
                           ("div", np.divide, (128, 1, 13)))],
]

VEC_OPS: dict[str, VecRow] = {r.name: r for r in _ROWS}

# the T.Parallel bodies ParallelToVec turns into vector ops: "binop:add" -> the add row
PARALLEL_FORMS: dict[str, VecRow] = {r.parallel: r for r in _ROWS if r.parallel}


def row(name: str) -> VecRow:
    """The row of vector op ``name`` (KeyError for an unknown op)."""
    return VEC_OPS[name]


def form(srcs: tuple, dst_shape: tuple) -> str:
    """The operand form of a VecOp's sources (``t`` tile, ``r`` per-row tile, ``s`` scalar)."""
    out = []
    for x in srcs:
        if not isinstance(x, BufferRegion):
            out.append("s")
        elif len(dst_shape) == 2 and tuple(x.tile_shape()) != tuple(dst_shape) and \
                _numel(x.tile_shape()) == _numel(dst_shape[:1]):
            out.append("r")
        else:
            out.append("t")
    return "".join(out)


def _numel(shape: Any) -> int:
    n = 1
    for e in shape:
        n *= int(e) if isinstance(e, int) else int(getattr(e, "value", 1))
    return n


def _operand(x: Any, shape: tuple) -> Any:
    if isinstance(x, np.ndarray):
        v = x.astype(F32) if x.dtype.kind == "f" and x.dtype.itemsize < 4 else x
        rows = int(np.prod(shape[:-1]))
        if len(shape) >= 2 and v.size == rows and v.size != int(np.prod(shape)):
            return v.reshape(tuple(shape[:-1]) + (1,))
        return v.reshape(shape)
    return np.float32(x) if isinstance(x, float) else x


def compute(op: str, dst: np.ndarray, srcs: list, attrs: Optional[dict] = None) -> np.ndarray:
    """The value ``T.tile.<op>`` writes into ``dst`` (a new array of dst's shape and dtype);
    ``srcs``: numpy tiles or scalars, in the node's order."""
    r = VEC_OPS[op]
    attrs = attrs or {}
    if r.raw:
        return np.asarray(r.fn(dst, srcs, attrs)).astype(dst.dtype).reshape(dst.shape)
    shape = dst.shape
    xs = [_operand(s, shape) for s in srcs]
    count = attrs.get("count")
    if r.reads_dst:
        xs = [_operand(dst, shape)] + xs
    if r.name == "fill":
        val = np.broadcast_to(np.asarray(xs[0], dtype=F32 if dst.dtype.kind == "f" else dst.dtype), shape)
    else:
        val = r.fn(*xs)
    out = np.broadcast_to(np.asarray(val), shape).astype(dst.dtype)
    if count is not None and int(count) < dst.size:
        keep = dst.copy().reshape(-1)
        keep[:int(count)] = out.reshape(-1)[:int(count)]
        return keep.reshape(shape)
    return out


__all__ = ["VecRow", "VEC_OPS", "PARALLEL_FORMS", "VecOpError", "row", "form", "compute"]
