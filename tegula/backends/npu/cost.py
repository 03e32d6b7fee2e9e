"""The NPU cost model: latency and initiation interval (II) of every tile operation, per machine,
pipe, dtype and shape. AutoSchedule and the emulator's timing model read these numbers and
nothing else; every result they produce is a *model* quantity, labelled with ``MODEL_VERSION``.

An operation occupies its pipe for ``ii`` cycles and its result is ready ``latency`` cycles after
it starts (``ii <= latency``: DMA engines overlap the memory round trip of one transfer with the
next; the vector unit and the cube are not overlapped here, ``ii == latency``).

Where each figure comes from (``SOURCES``; the facts are collected in ``shared/reference/ascend.md``):

- ``a2a3-pipe-model``: a published per-instruction pipe model of A2/A3 (1.85 GHz): GM read latency
  347 cycles, write 203, GM bandwidth 87 B/cycle per core, L1 write 256 B/cycle, L0A write 256,
  L0B write 128, L0C read 128, UB read/write 128, load2d +9, DMA +9; MMAD steps
  ``ceil(m/16) * ceil(n/16) * ceil(k/k0)``; vector ``ceil(repeats * 256 / bytes_per_cycle) *
  throughput + delay + 15`` with (bytes/cycle, throughput, delay) per instruction.
- ``a2a3-tsv-fit``: constants fitted here to the profiled single-instruction cycle counts of
  ``ascend-instr-cycles.tsv`` (GM -> UB loads: 265 cycles + 128 B/cycle + 14 cycles per row past
  128; an MMAD is its steps + 6 cycles; tile-tile vector operations read each source tile at
  256 B/cycle, one repeat per 256 bytes of each row; row reductions about 7 cycles per row).
  In-sample: BENCHMARKS.md says so.
- ``a5-calibrated``: the 950 path costs of upstream TileLang's calibrated model (base cycles and
  bytes/cycle per path; cube base 8, one MMAD per cycle; vector ``max(ops / throughput, bytes /
  256)``).
- ``assumed``: no published figure (cross-core flag latency, scalar issue); named in BENCHMARKS.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional

from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import Const
from tegula.ir.npu import Mma, VecOp
from tegula.ir.tile_rules import TILE_RULES, add_aspect, tile_rule
from tegula.ir.vecops import VEC_OPS
from tegula.ir.stmt import Copy, Fill, For, Reduce, Stmt
from tegula.backends.npu.access import region_accesses

MODEL_VERSION = "tegula-npu-cost/1"

SOURCES = {
    "a2a3-pipe-model": "published A2/A3 per-instruction pipe model (1.85 GHz), shared/reference/ascend.md",
    "a2a3-tsv-fit": "fitted to the profiled counts of shared/reference/ascend-instr-cycles.tsv",
    "a5-calibrated": "upstream TileLang 950 calibrated path costs, shared/reference/ascend.md",
    "assumed": "no published figure; an assumption of this model",
}


@dataclass(frozen=True)
class Cost:
    """What one operation costs: cycles to its result, cycles it holds its pipe, and why."""

    latency: int
    ii: int
    source: str


@dataclass(frozen=True)
class _Path:
    base: int          # cycles before the first byte lands
    bw: float          # bytes per cycle
    min_ii: int = 1
    row_after: int = 0     # rows past this many cost row_cost cycles each (0: none)
    row_cost: float = 0.0
    narrow_bw: float = 0.0  # bytes per cycle when rows are narrower than 128 bytes (0: same)
    source: str = "a2a3-pipe-model"


# (src scope, dst scope) -> cost of one transfer
_A2A3_PATHS = {
    ("global", "l1"): _Path(347 + 9, 87, 64),
    ("global", "ub"): _Path(265, 128, 64, row_after=128, row_cost=14, source="a2a3-tsv-fit"),
    ("l1", "l0a"): _Path(9, 256),
    ("l1", "l0b"): _Path(9, 128),
    ("l0c", "global"): _Path(203, 128, 32),
    ("l0c", "l1"): _Path(20, 128),
    ("ub", "global"): _Path(203, 128, 32),
    ("ub", "l1"): _Path(9 + 20, 128),
    ("ub", "ub"): _Path(15, 256),
}
_A5_PATHS = {
    ("global", "l1"): _Path(190, 100, 64, source="a5-calibrated"),
    ("global", "ub"): _Path(90, 100, 32, narrow_bw=50, source="a5-calibrated"),
    ("ub", "global"): _Path(180, 115, 32, source="a5-calibrated"),
    ("ub", "l1"): _Path(43, 256, source="a5-calibrated"),
    ("l1", "l0a"): _Path(5, 256, source="a5-calibrated"),
    ("l1", "l0b"): _Path(5, 256, source="a5-calibrated"),
    ("l0c", "ub"): _Path(58, 128, source="a5-calibrated"),
    ("l0c", "global"): _Path(200, 128, 32, source="a5-calibrated"),
    ("l0c", "l1"): _Path(58, 128, source="a5-calibrated"),
    ("l1", "ub"): _Path(43, 256, source="a5-calibrated"),
    ("ub", "ub"): _Path(8, 256, source="a5-calibrated"),
}

# vector instructions on A2/A3: (bytes per cycle, cycles per repeat, delay), a2a3-pipe-model
# (VADD, VMUL, VEXP, VDIV, VCADD, VCMAX): each T.tile op's row of the vector-op table
# (tegula/ir/vecops.py, ``cost``) gives it, the others taking their closest relative's; here only
# the row reductions, which are not vector-table ops.
_A2A3_REDUCE = {"reduce_sum": (256, 1, 20), "reduce_max": (256, 1, 8), "reduce_min": (256, 1, 8)}
VEC_FIXED = 15           # every vector instruction (a2a3-pipe-model)
REDUCE_ROW = 7           # cycles per row of a row reduction (a2a3-tsv-fit, TRowSum / TRowMax 64x64)
MMAD_STATE = 6           # a2a3-tsv-fit: the four TMatmul cases are steps + 6 exactly (the pipe
#                          model's "cube state +20" overestimates them)
A5_CUBE_BASE = 8         # a5-calibrated
A5_VEC_BASE = 16         # assumed: the 950 table gives no per-instruction base for vectors
CROSS_FLAG_LATENCY = 100  # assumed: a cross-core flag travels through GM-level sync hardware
SCALAR_ISSUE = 2         # a2a3-pipe-model: scalar ALU 2 cycles; the issue of one instruction
FLAG_LATENCY = 1         # assumed: an intra-core flag is seen by its pipe the next cycle


def k0(dtype: Any) -> int:
    """K elements per cube step: 16 for fp16/bf16, 32 for int8, 4 for fp32, 64 for int4."""
    bits = dtype.bits
    return {16: 16, 8: 32, 32: 4, 4: 64}.get(bits, 16)


def copy_cost(machine: Any, src: str, dst: str, nbytes: int, rows: int, row_bytes: int) -> Cost:
    """A transfer of ``nbytes`` (``rows`` rows of ``row_bytes``) from scope ``src`` to ``dst``."""
    table = _A5_PATHS if machine.name == "a5" else _A2A3_PATHS
    p = table.get((src, dst)) or _Path(347, 87, 64, source="a2a3-pipe-model")
    bw = p.narrow_bw if p.narrow_bw and row_bytes < 128 else p.bw
    transfer = nbytes / bw + (p.row_cost * max(0, rows - p.row_after) if p.row_after else 0.0)
    ii = max(p.min_ii, int(math.ceil(transfer)))
    return Cost(int(math.ceil(p.base + transfer)), ii, p.source)


def mmad_cost(machine: Any, m: int, n: int, k: int, dtype: Any) -> Cost:
    """One MMAD of an m x k by k x n tile (``dtype``: the operands')."""
    steps = math.ceil(m / 16) * math.ceil(n / 16) * math.ceil(k / k0(dtype))
    if machine.name == "a5":
        return Cost(steps + A5_CUBE_BASE, steps, "a5-calibrated")
    return Cost(steps + MMAD_STATE, steps + MMAD_STATE, "a2a3-tsv-fit")


def _repeats(shape: tuple, itemsize: int) -> int:
    """Vector repeats of one operand: each row takes whole 256-byte repeats."""
    if not shape:
        return 1
    rows = int(math.prod(shape[:-1])) if len(shape) > 1 else 1
    return rows * max(1, math.ceil(shape[-1] * itemsize / 256))


def vector_cost(machine: Any, op: str, shape: tuple, itemsize: int, tile_srcs: int) -> Cost:
    """A ``T.tile.<op>`` (or ``reduce_<kind>``) on a tile of ``shape``; ``tile_srcs`` source tiles."""
    nbytes = int(math.prod(shape)) * itemsize if shape else itemsize
    row = VEC_OPS.get(op)
    if machine.name == "a5":
        ops = int(math.prod(shape)) if shape else 1
        thr = 128 // itemsize if row is not None and row.slow else 256 // itemsize
        c = int(math.ceil(max(ops / thr, nbytes / 256))) + A5_VEC_BASE
        return Cost(c, c, "a5-calibrated")
    bpc, thr, delay = row.cost if row is not None else _A2A3_REDUCE.get(op, (256, 1, 6))
    reps = _repeats(shape, itemsize)
    if op.startswith("reduce_"):
        rows = int(math.prod(shape[:-1])) if len(shape) > 1 else 1
        c = int(math.ceil(reps * 256 / bpc)) * thr + rows * REDUCE_ROW + delay + VEC_FIXED
        return Cost(c, c, "a2a3-tsv-fit")
    per = max(1, tile_srcs) * int(math.ceil(reps * 256 / bpc)) * thr
    c = per + delay + VEC_FIXED
    return Cost(c, c, "a2a3-pipe-model" if tile_srcs <= 1 else "a2a3-tsv-fit")


# -- tile operations of the IR -----------------------------------------------------------------
def _extents(r: BufferRegion, env: Optional[dict]) -> tuple:
    out = []
    for e in r.extents:
        if isinstance(e, int):
            out.append(e)
        elif isinstance(e, Const):
            out.append(int(e.value))
        elif env is not None and e in env:
            out.append(int(env[e]))
        else:
            out.append(1)
    # leading unit dimensions (a buffer version) do not change the cost
    while len(out) > 1 and out[0] == 1:
        out.pop(0)
    return tuple(out)


COST = add_aspect("npu.cost", "ascend-emu")


def op_cost(s: Stmt, machine: Any, pipe: str, env: Optional[dict] = None) -> Cost:
    """The cost of tile operation ``s`` on ``pipe`` of ``machine``: its ``npu.cost`` rule."""
    rule = TILE_RULES.get(type(s), COST)
    return rule(s, machine, pipe, env) if rule is not None else Cost(1, 1, "assumed")


@tile_rule(Copy, COST)
def _copy_cost(s: Copy, machine: Any, pipe: str, env: Optional[dict]) -> Cost:
    dst, src = s.dst, s.src
    onchip = dst if dst.buffer.scope != "global" else src
    shape = _extents(onchip, env)
    item = onchip.buffer.dtype.itemsize
    nbytes = int(math.prod(shape)) * item
    rows = int(math.prod(shape[:-1])) if len(shape) > 1 else 1
    return copy_cost(machine, src.buffer.scope, dst.buffer.scope, nbytes, rows, shape[-1] * item)


@tile_rule(Mma, COST)
def _mma_cost(s: Mma, machine: Any, pipe: str, env: Optional[dict]) -> Cost:
    a, c = _extents(s.A, env), _extents(s.C, env)
    kdim = a[-2] if s.transpose_A else a[-1]
    return mmad_cost(machine, c[-2], c[-1], kdim, s.A.buffer.dtype)


@tile_rule(VecOp, COST)
def _vec_cost(s: VecOp, machine: Any, pipe: str, env: Optional[dict]) -> Cost:
    shape = _extents(s.dst, env)
    srcs = [x for x in s.srcs if isinstance(x, BufferRegion)]
    item = max([s.dst.buffer.dtype.itemsize] + [x.buffer.dtype.itemsize for x in srcs])
    full = [x for x in srcs if int(math.prod(_extents(x, env))) == int(math.prod(shape))]
    return vector_cost(machine, s.op, shape, item, len(full))


@tile_rule(Reduce, COST)
def _reduce_cost(s: Reduce, machine: Any, pipe: str, env: Optional[dict]) -> Cost:
    shape = _extents(s.src, env)
    return vector_cost(machine, "reduce_" + s.kind.replace("abs", ""), shape, s.src.buffer.dtype.itemsize, 1)


@tile_rule(Fill, COST)
def _fill_cost(s: Fill, machine: Any, pipe: str, env: Optional[dict]) -> Cost:
    shape = _extents(s.dst, env)
    if pipe == "M":  # clearing L0C on the cube: one pass over the accumulator
        return Cost(int(math.prod(shape)) // 256 + MMAD_STATE, int(math.prod(shape)) // 256 + 1, "assumed")
    return vector_cost(machine, "fill", shape, s.dst.buffer.dtype.itemsize, 0)


@tile_rule(For, COST)
def _parallel_cost(s: For, machine: Any, pipe: str, env: Optional[dict]) -> Cost:
    """A T.Parallel nest ParallelToVec left: one vector pass per buffer it touches."""
    regions = region_accesses(s)
    shape = tuple(int(d) if isinstance(d, int) else 1 for d in regions[0][0].buffer.shape) \
        if regions else (1,)
    item = max([r.buffer.dtype.itemsize for r, _ in regions] or [4])
    return vector_cost(machine, "add", shape, item, max(1, len([r for r, w in regions if not w])))


def describe() -> str:
    """The model's version and sources, one line each (for reports)."""
    return "\n".join([f"cost model {MODEL_VERSION}"] + [f"  {k}: {v}" for k, v in SOURCES.items()])
