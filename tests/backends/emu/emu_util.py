"""Helpers for the emulator tests: random arguments and a side-by-side run against the interpreter."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tegula.backends.cuda.pipeline import lower
from tegula.backends.emu import execute
from tegula.backends.interp import execute as interpret
from tegula.ir.expr import Var
from tegula.target import Target

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def ex(name: str) -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def random_args(func: Any, rng: np.random.Generator, dims: dict | None = None) -> list:
    """Fresh random arrays (never zeros) for every buffer parameter, scalars from ``dims``."""
    dims = dims or {}
    out = []
    for p in func.params:
        if isinstance(p, Var):
            out.append(dims[p.name])
            continue
        shape = tuple(d if isinstance(d, int) else dims[d.name] for d in p.shape)
        d = p.dtype
        if d.is_float:
            a = rng.standard_normal(shape).astype(d.np)
        elif d.is_bool:
            a = rng.integers(0, 2, shape).astype(bool)
        else:
            info = np.iinfo(d.np)
            a = rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(d.np)
        out.append(a)
    return out


def run_both(func: Any, args: list, pass_configs: dict | None = None, arch: str = "sm_80") -> tuple[list, list]:
    """Run ``func`` on the interpreter and, lowered, on the emulator; returns both argument lists."""
    ref = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    got = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    interpret(func, ref)
    lowered = lower(func, Target("cuda", arch), pass_configs or {})
    execute(lowered, got)
    return ref, got


def assert_match(ref: list, got: list, rtol: float = 0.0, atol: float = 0.0) -> None:
    """Every array agrees: bit for bit when rtol = atol = 0, else within the tolerances."""
    for r, g in zip(ref, got):
        if not isinstance(r, np.ndarray):
            continue
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g.astype(np.float64), r.astype(np.float64), rtol=rtol, atol=atol)
