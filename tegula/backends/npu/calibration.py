"""The cost model against published figures: the profiled single-instruction cycle counts of
``ascend-instr-cycles.tsv`` and the published end-to-end times (``benchmarks/ascend_calibration.py``
prints both; BENCHMARKS.md has the result).

A case name such as ``TAdd.float_64x64`` or ``TDivS.case1_tile_scalar_float_32x64`` gives the
instruction, dtype and shape; :func:`model_cycles` prices it with :mod:`tegula.backends.npu.cost`.
Precision is the reference's: ``1 - |profiled - model| / profiled`` (floored at 0).
"""
from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Optional

from tegula.backends.npu import cost
from tegula.backends.npu.machine import machine

_DTYPES = {"float": 4, "f": 4, "f32": 4, "int32": 4, "I32": 4, "U32": 4, "half": 2, "f16": 2,
           "int16": 2, "I16": 2, "U16": 2, "uint8": 1, "int8": 1}
# instruction -> (model op, source tiles); TMatmul / TLoad / TMov are priced separately
_VEC = {"TAdd": ("add", 2), "TSub": ("sub", 2), "TMul": ("mul", 2), "TDiv": ("div", 2),
        "TMax": ("max", 2), "TMin": ("min", 2), "TAddS": ("add", 1), "TMulS": ("mul", 1),
        "TSubS": ("sub", 1), "TDivS": ("div", 1), "TMaxS": ("max", 1), "TMins": ("min", 1),
        "TAbs": ("abs", 1), "TExp": ("exp", 1), "TSqrt": ("sqrt", 1), "TRsqrt": ("rsqrt", 1),
        "TRecip": ("reciprocal", 1), "TNeg": ("mul", 1), "TSel": ("max", 2),
        "TRowSum": ("reduce_sum", 1), "TRowMax": ("reduce_max", 1), "TRowMin": ("reduce_min", 1),
        "TColSum": ("reduce_sum", 1), "TColMax": ("reduce_max", 1), "TColMin": ("reduce_min", 1),
        "TRowExpand": ("copy", 1), "TTrans": ("copy", 1), "TCvt": ("cast", 1),
        "TSort32": ("max", 1), "TExtract": ("copy", 1), "TGather": ("copy", 1)}


@dataclass
class Case:
    name: str
    profiled: int
    public_model: int
    model: Optional[int]

    @property
    def family(self) -> str:
        return self.name.split(".")[0]


def precision(profiled: float, model: float) -> float:
    """The reference's precision: 1 - |profiled - model| / profiled, at least 0."""
    return max(0.0, 1.0 - abs(profiled - model) / profiled)


def _dtype_shape(rest: str) -> tuple:
    item, shape = None, None
    for tok in rest.split("_"):
        if item is None and tok in _DTYPES:
            item = _DTYPES[tok]
        m = re.fullmatch(r"(\d+)x(\d+)(?:x(\d+))?", tok)
        if m and shape is None:
            shape = tuple(int(g) for g in m.groups() if g)
    return item, shape


def model_cycles(name: str, arch: str = "a2a3") -> Optional[int]:
    """This model's cycles for one tsv case, or None when the name gives no dtype and shape."""
    m = machine(arch)
    fam, rest = name.split(".", 1)
    item, shape = _dtype_shape(rest)
    if fam == "TMatmul":   # the case names an M x K x N product; split-K repeats are separate runs
        if shape is None or item is None:
            return None
        mm, kk, nn = shape
        return cost.mmad_cost(m, mm, nn, kk, type("D", (), {"bits": item * 8})).latency
    if fam == "TLoad":
        if shape is None or item is None:
            return None
        rows, cols = shape
        if "_dn_" in rest:
            rows, cols = cols, rows
        return cost.copy_cost(m, "global", "ub", rows * cols * item, rows, cols * item).latency
    if fam == "TMov":
        sh = [int(x) for x in rest.split("_")[2:6]]
        return cost.copy_cost(m, "ub", "ub", sh[0] * sh[1] * 4, sh[0], sh[1] * 4).latency
    if fam == "TLoadConv":
        return None
    if fam not in _VEC or item is None or shape is None:
        return None
    op, srcs = _VEC[fam]
    if fam.startswith("TCol"):  # a column reduction walks the rows one repeat each
        r, c = shape
        return cost.vector_cost(m, "add", (r, c), item, 1).latency * 2
    return cost.vector_cost(m, op, shape, item, srcs).latency


def load_cases(path: str) -> list:
    """The tsv's cases with a profiled count (> 0), each priced by this model."""
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("case\t") or not line.strip():
                continue
            name, prof, pub, _ = line.rstrip("\n").split("\t")
            if int(prof) > 0:
                out.append(Case(name, int(prof), int(pub), model_cycles(name)))
    return out


def summary(cases: list) -> dict:
    """Median precision of this model and of the public one, overall and per instruction."""
    fams: dict = {}
    for c in cases:
        fams.setdefault(c.family, []).append(c)

    def med(cs: list, attr: str) -> float:
        vals = [precision(c.profiled, getattr(c, attr)) for c in cs if getattr(c, attr) is not None]
        return statistics.median(vals) if vals else float("nan")
    priced = [c for c in cases if c.model is not None]
    return {
        "cases": len(cases), "priced": len(priced),
        "median_precision": med(priced, "model"),
        "median_precision_public": med(priced, "public_model"),
        "within_25pct": sum(precision(c.profiled, c.model) >= 0.75 for c in priced),
        "families": {f: (len(cs), med(cs, "model"), med(cs, "public_model"))
                     for f, cs in sorted(fams.items())},
    }


def tflops(flops: float, cycles: float, clock_ghz: float) -> float:
    return flops / (cycles / (clock_ghz * 1e9)) / 1e12


__all__ = ["Case", "load_cases", "model_cycles", "precision", "summary", "tflops", "math"]
