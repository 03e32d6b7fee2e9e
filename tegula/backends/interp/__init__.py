"""The tile-level interpreter (``target="cpu"``): executing it defines what a kernel means.

``execute(func, args)`` runs a :class:`~tegula.ir.stmt.PrimFunc` on numpy arrays. The IR is
compiled once per function into a tree of closures (one rule per node class, in the registry of
:mod:`.context`, which starts from the rules shared with the emulator in
:mod:`tegula.backends.closure`); running walks that tree with a flat list of variable values.

Semantics
---------
- **Arguments** follow ``func.params``: numpy arrays for buffers (written in place) and Python
  scalars for scalar vars. Vars in parameter shapes (dynamic dims) bind from the arrays' shapes.
- **Kernel**: the body runs once per block, for every block index of the grid, one block after
  another (so atomics are exact). Where that cannot change the result, up to
  ``config.settings.interp_batch`` blocks run side by side along a leading batch axis, with the
  same memory afterwards bit for bit and the same errors (:mod:`.batch` states the rule). ``threads`` plays no part, except that an element atomic outside
  ``T.Parallel`` is made once per thread of the block (every thread runs block-level code, as in
  TileLang). Allocated buffers are fresh per block: shared / fragment / local memory starts as poison (NaN for floats, ``-0x5A5A5A5A``
  clipped to the range for signed ints, the maximum for unsigned ints, True for bool), so
  reading unwritten memory shows; ``local.var`` buffers start at their ``alloc_inits`` value, else 0.
  The float poison is a NaN of its own (:func:`tegula.backends.closure.unwritten`): *using* a
  fragment or local element never written (an element load by an active lane inside an
  expression, a ``T.gemm`` operand or the C it accumulates into, a reduction's source or its
  ``clear=False`` destination) is an :class:`~tegula.errors.UninitializedReadError` at that line,
  as the emulator reports such register reads; moves (``T.copy``, ``x[i] = f[j]``) carry the
  poison along, so it shows as NaN where it lands.
- **Expressions** evaluate to numpy values of the node's dtype, by the operator table
  (:mod:`tegula.ir.ops`). Narrow floats (float16,
  bfloat16, fp8) compute in float32 and round back after each operation. Integer ``div`` and
  ``truncdiv``/``truncmod`` truncate toward zero (C); ``floordiv``/``floormod`` floor (Python;
  for floats ``floor(a / b)`` and ``a - floor(a / b) * b``); integer overflow wraps. ``round`` is half-to-even, ``rsqrt`` is ``1/sqrt``. Casts from float to
  int truncate toward zero; conversions to narrow floats round to nearest even (ml_dtypes, which
  gives NaN for values beyond fp8 e4m3's range). ``Select`` evaluates both sides.
  ``T.max``/``T.min`` propagate NaN.
- **Loops**: serial, pipelined, unrolled and vectorized loops run in order (pipelining does not
  change meaning). A nest of ``parallel`` loops runs vectorized: each loop var is an index array
  along its own axis, and each statement of the body runs once over all lanes, statement after
  statement. Loads are views or fancy indexing; stores assign all lanes at once (where lanes
  collide, the last one wins). ``if`` on a lane-varying condition masks the stores of both
  branches; serial loops, lets and scalar stores nest inside parallel bodies. A serial loop
  whose trip count, or a while loop whose condition, varies over the lanes runs until no lane
  is left, each lane masked off once its own loop is done. ``break`` /
  ``continue`` inside a parallel body, and copies, gemms, reductions and fills there, are
  :class:`~tegula.errors.ScopeError`. Atomics there apply one update per active lane.
- **LetStmt** binds its var for the rest of the sequence; ``While`` loops while its condition
  holds; ``break``/``continue`` act on the innermost serial or while loop.
- **Copy**: element ``i`` of the source tile goes to element ``i`` of the destination tile (unit
  dims aside), converting dtype (narrow floats through float32). Out-of-bounds source elements
  read as 0 and out-of-bounds destination elements are dropped, in every scope.
- **Gemm**: ``C (+)= op(A) @ op(B)`` computed in float32 (float64 for a float64 accumulator;
  narrow accumulators round the sum back); integer operands multiply exactly (float64, exact
  below 2**53) and wrap into the integer accumulator.
- **Reduce** along ``dim`` of the source region, combining as its kind's row of
  :mod:`tegula.ir.combiners` says (sum, max, min, abssum, absmax, bitand, bitor, bitxor);
  ``clear=False`` combines with the destination (absmax: ``max(max|src|, dst)``). Accumulates in
  the destination's dtype (float32 for narrow floats). **CumSum** is the inclusive scan of its
  kind (``T.cumsum``: prefix sum, ``T.cummax``: running maximum; ``reverse``: from the end).
- **Fill** fills the region, clipped to the buffer. **Atomic** add/max/min on a region or one
  element, value an expression or a tile; out-of-bounds elements dropped; narrow float adds round
  at the destination dtype. **Print** writes the message, block index and value to stdout.
- Element loads and stores outside tile operations check bounds and raise
  :class:`~tegula.errors.OutOfBoundsError` naming the buffer, the index and the kernel line.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from tegula.errors import ArgumentError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.stmt import PrimFunc
from tegula.backends.interp import atomics, batch_tileops, exprs, parallel, stmts, tileops  # noqa: F401 (rules)
from tegula.backends import blas
from tegula.backends.closure import StmtFn, compile_stmt, np_scalar
from tegula.backends.interp.context import Ctx

__all__ = ["execute", "compile_func"]


@dataclass
class Program:
    """A compiled PrimFunc: ``body(env)`` runs it once ``env`` holds the arguments."""

    func: PrimFunc
    body: StmtFn
    nslots: int
    params: list  # (param, slot)
    dyn: list     # (buffer slot index in params, dim, var slot, var dtype)


_CACHE: "weakref.WeakKeyDictionary[PrimFunc, Program]" = weakref.WeakKeyDictionary()


def compile_func(func: PrimFunc) -> Program:
    """Compile ``func`` into closures (cached per PrimFunc object)."""
    prog = _CACHE.get(func)
    if prog is not None:
        return prog
    ctx = Ctx()
    params = []
    dyn = []
    for k, p in enumerate(func.params):
        params.append((p, ctx.slot(p)))
        if isinstance(p, Buffer):
            for d, n in enumerate(p.shape):
                if isinstance(n, Var) and n not in ctx.slots:
                    dyn.append((k, d, ctx.slot(n), n.dtype))
    body = compile_stmt(func.body, ctx)
    prog = Program(func, body, ctx.slots.size, params, dyn)
    _CACHE[func] = prog
    return prog


def _bind(prog: Program, args: Sequence[Any]) -> list:
    func = prog.func
    if len(args) != len(prog.params):
        raise ArgumentError(f"{func.name} takes {len(prog.params)} argument(s), got {len(args)}")
    env: list = [None] * prog.nslots
    for (p, slot), a in zip(prog.params, args):
        if isinstance(p, Buffer):
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"{func.name}: parameter '{p.name}' expects a numpy array, "
                                    f"got {type(a).__name__}")
            if a.ndim != len(p.shape):
                raise ArgumentError(f"{func.name}: parameter '{p.name}' expects {len(p.shape)} "
                                    f"dimension(s), got shape {a.shape}")
            if a.dtype != p.dtype.np:
                raise ArgumentError(f"{func.name}: parameter '{p.name}' expects dtype "
                                    f"{p.dtype.name}, got {a.dtype}")
            for n, m in zip(p.shape, a.shape):
                if isinstance(n, int) and n != m:
                    raise ArgumentError(f"{func.name}: parameter '{p.name}' expects shape "
                                        f"{tuple(p.shape)}, got {a.shape}")
            env[slot] = a
        else:
            env[slot] = np_scalar(p.dtype, a)
    for k, d, slot, dtype in prog.dyn:
        env[slot] = np_scalar(dtype, args[k].shape[d])
    return env


def execute(func: PrimFunc, args: Sequence[Any]) -> None:
    """Run ``func`` on ``args`` (numpy arrays for buffers, Python scalars for vars), writing the
    arrays in place.

    Raises :class:`~tegula.errors.ArgumentError` for arguments that do not fit the parameters,
    and other :class:`~tegula.errors.TegulaError` subclasses (with the kernel line) for errors
    found while running, e.g. :class:`~tegula.errors.OutOfBoundsError`.
    """
    prog = compile_func(func)
    env = _bind(prog, args)
    with np.errstate(all="ignore"), blas.kernel_threads():
        prog.body(env)
