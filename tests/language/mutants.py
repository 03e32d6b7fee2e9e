"""Random mutations of good kernels, for the mutation tests (``test_mutants.py``).

A mutant is a good kernel of :data:`SEEDS` with one to three AST edits (a constant, a dtype, a
name, a ``T.*`` primitive or an operator replaced; a statement dropped or two swapped). Building
and running it must give a tegula error or a result, never another exception; where both ``cpu``
and ``cuda-emu`` run it, their results must agree.
"""
from __future__ import annotations

import ast
import copy
import importlib.util
import os
import random
import warnings
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

import tegula
from tegula.errors import TegulaError
from tegula.ir.stmt import PrimFunc

HEADER = "import tegula\nimport tegula.language as T\n\n"

SEEDS = {
    "scale": '''
@T.prim_func
def main(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
    with T.Kernel(2, threads=64) as bx:
        t = T.alloc_fragment((32, 32), "float32")
        T.copy(A[bx * 32, 0], t)
        for i, j in T.Parallel(32, 32):
            t[i, j] = t[i, j] * 2.0 + 1.0
        T.copy(t, B[bx * 32, 0])
''',
    "row_softmax": '''
@T.prim_func
def main(X: T.Tensor((32, 64), "float32"), Y: T.Tensor((32, 64), "float32")):
    with T.Kernel(2, threads=64) as bx:
        x = T.alloc_fragment((16, 64), "float32")
        m = T.alloc_fragment((16,), "float32")
        s = T.alloc_fragment((16,), "float32")
        T.copy(X[bx * 16, 0], x)
        T.reduce_max(x, m, dim=1)
        for i, j in T.Parallel(16, 64):
            x[i, j] = T.exp(x[i, j] - m[i])
        T.reduce_sum(x, s, dim=1)
        for i, j in T.Parallel(16, 64):
            Y[bx * 16 + i, j] = x[i, j] / s[i]
''',
    "shared_transpose": '''
@T.prim_func
def main(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((32, 32), "float32")
        T.copy(A, s)
        for i, j in T.Parallel(32, 32):
            B[i, j] = s[j, i] + 0.5
''',
    "guarded_tail": '''
@T.prim_func
def main(A: T.Tensor((50,), "float32"), B: T.Tensor((50,), "float32"), C: T.Tensor((50,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(32):
            if bx * 32 + i < 50:
                C[bx * 32 + i] = T.max(A[bx * 32 + i], B[bx * 32 + i]) - 1.0
''',
    "serial_accumulate": '''
@T.prim_func
def main(A: T.Tensor((16, 8), "float32"), B: T.Tensor((16,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        acc = T.alloc_fragment((16,), "float32")
        T.clear(acc)
        for k in T.serial(8):
            for i in T.Parallel(16):
                acc[i] = acc[i] + A[i, k] * 0.5
        T.copy(acc, B)
''',
    "gemm": '''
@T.prim_func
def main(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, 1, threads=128) as (bx, by):
        a = T.alloc_shared((32, 32), "float16")
        b = T.alloc_shared((32, 32), "float16")
        c = T.alloc_fragment((32, 32), "float32")
        T.clear(c)
        for k in T.Pipelined(1, num_stages=1):
            T.copy(A[0, k * 32], a)
            T.copy(B[k * 32, 0], b)
            T.gemm(a, b, c)
        T.copy(c, C)
''',
    "local_and_var": '''
@T.prim_func
def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        l = T.alloc_local((4,), "float32")
        T.copy(A[0:4], l)
        for i in T.Parallel(64):
            B[i] = A[i] * l[i % 4]
''',
}

INTS = [0, 1, -1, 2, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 128]
FLOATS = [0.0, -1.5, 0.5, 3.0, 1e30, -1e-30]
# no unsigned ints yet: converting a negative float to one is wrap-around on the interpreter and
# the emulator but saturation in CUDA's cvt, which is being made one rule on every target
DTYPES = ["float16", "float32", "float64", "bfloat16", "int8", "int32", "int64", "bool",
          "float8_e4m3", "float8_e5m2", "floaty"]
PRIMS = ["copy", "fill", "clear", "gemm", "reduce_sum", "reduce_max", "reduce_min", "cumsum", "exp",
         "log", "sqrt", "max", "min", "abs", "Parallel", "serial", "Pipelined", "unroll",
         "alloc_shared", "alloc_fragment", "alloc_local", "alloc_var", "atomic_add", "print",
         "ceildiv", "Cast", "if_then_else", "use_swizzle", "annotate_layout", "Kernel"]
BINOPS = [ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd]
CMPOPS = [ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq]


def _mutate_once(tree: ast.Module, rnd: random.Random) -> None:
    nodes = list(ast.walk(tree))
    names = sorted({n.id for n in nodes if isinstance(n, ast.Name)})
    kind = rnd.choice(["int", "float", "dtype", "name", "prim", "binop", "cmp", "drop", "swap"])
    if kind == "int":
        cands = [n for n in nodes if isinstance(n, ast.Constant) and type(n.value) is int]
        if cands:
            rnd.choice(cands).value = rnd.choice(INTS)
    elif kind == "float":
        cands = [n for n in nodes if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
        if cands:
            rnd.choice(cands).value = rnd.choice(FLOATS)
    elif kind == "dtype":
        cands = [n for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        if cands:
            rnd.choice(cands).value = rnd.choice(DTYPES)
    elif kind == "name":
        cands = [n for n in nodes if isinstance(n, ast.Name) and n.id != "T"]
        if cands:
            rnd.choice(cands).id = rnd.choice([x for x in names if x != "T"] or ["T"])
    elif kind == "prim":
        # not the decorator or the annotations: Python evaluates those itself when the def runs
        decorators = {id(d) for f in nodes if isinstance(f, ast.FunctionDef)
                      for top in f.decorator_list + [a.annotation for a in f.args.args]
                      for d in ast.walk(top)}
        cands = [n for n in nodes if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                 and n.value.id == "T" and id(n) not in decorators]
        if cands:
            rnd.choice(cands).attr = rnd.choice(PRIMS)
    elif kind == "binop":
        cands = [n for n in nodes if isinstance(n, ast.BinOp)]
        if cands:
            rnd.choice(cands).op = rnd.choice(BINOPS)()
    elif kind == "cmp":
        cands = [n for n in nodes if isinstance(n, ast.Compare)]
        if cands:
            rnd.choice(cands).ops = [rnd.choice(CMPOPS)()]
    else:
        bodies = [n.body for n in nodes if isinstance(n, (ast.For, ast.With, ast.If)) and n.body]
        if not bodies:
            return
        body = rnd.choice(bodies)
        if kind == "drop":
            body[rnd.randrange(len(body))] = ast.Pass()
        elif len(body) > 1:
            i, j = rnd.sample(range(len(body)), 2)
            body[i], body[j] = body[j], body[i]


def mutant(seed_name: str, rnd: random.Random, edits: int) -> str:
    """The source of a mutant of seed ``seed_name`` with ``edits`` random edits."""
    tree = copy.deepcopy(ast.parse(SEEDS[seed_name]))
    for _ in range(edits):
        _mutate_once(tree, rnd)
    return HEADER + ast.unparse(ast.fix_missing_locations(tree)) + "\n"


@dataclass
class Outcome:
    """What building and running a mutant gave on one target."""

    error: Optional[TegulaError] = None
    outputs: Optional[list] = None


def _inputs(func: Any, rng: np.random.Generator) -> list:
    from tegula.ir.buffer import Buffer

    args = []
    for p in func.params:
        if isinstance(p, Buffer):
            if not all(isinstance(d, int) for d in p.shape):
                raise _Skip()
            d = p.dtype
            if d.is_float:
                a = rng.standard_normal(p.shape).astype(np.float32).astype(d.np)
            elif d.is_bool:
                a = rng.random(p.shape) < 0.5
            else:
                a = rng.integers(0, 8, p.shape).astype(d.np)
            args.append(a)
        else:
            args.append(1 if p.dtype.is_int else 1.0)
    return args


class _Skip(Exception):
    """A mutant this test cannot call (dynamic shapes)."""


def load(source: str, folder: str, name: str) -> Any:
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def run_everywhere(source: str, folder: str, name: str, targets=("cpu", "cuda-emu")) -> dict:
    """``{target: Outcome}`` for a mutant; raises any exception that is not a TegulaError."""
    try:
        func = load(source, folder, name)
    except TegulaError as e:
        return {t: Outcome(error=e) for t in targets}
    if not isinstance(func, PrimFunc):
        return {}
    try:
        base = _inputs(func, np.random.default_rng())
    except _Skip:
        return {}
    out = {}
    for t in targets:
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in base]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tegula.compile(func, target=t)(*args)
            out[t] = Outcome(outputs=args)
        except TegulaError as e:
            out[t] = Outcome(error=e)
    return out


def agree(a: list, b: list) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, np.ndarray):
            xf = x.astype(np.float64) if x.dtype.kind in "fiub" else x.astype(np.float32).astype(np.float64)
            yf = y.astype(np.float64) if y.dtype.kind in "fiub" else y.astype(np.float32).astype(np.float64)
            if not np.allclose(xf, yf, rtol=2e-2, atol=2e-2, equal_nan=True):
                return False
    return True


__all__ = ["SEEDS", "mutant", "run_everywhere", "agree", "Outcome"]
