"""How reductions and scans combine elements: one row per kind.

``T.reduce_<kind>`` (a :class:`~tegula.ir.stmt.Reduce`) and ``T.cum<kind>`` (a
:class:`~tegula.ir.stmt.CumSum` of that kind) take their whole meaning from the row of their
kind, on every target: the interpreter combines with the row's numpy ufunc, the CUDA lowering
with its IR form, starting from its identity. A new reduction is a new row (and its ``T.*``
name in ``language/primitives.py``).

===========  ===========================  =====================================================
field        used by                      meaning
===========  ===========================  =====================================================
``ufunc``    interpreter                  combines two arrays (``reduce`` / ``accumulate``)
``combine``  CUDA lowering                the same on IR expressions
``identity`` both                         the result of combining nothing, for a dtype
``absolute`` both                         combine ``|x|`` instead of ``x`` (abssum, absmax)
``widen``    interpreter                  read the source in the accumulator's dtype first
``ints``     semantic check               integer (and bool) dtypes only
===========  ===========================  =====================================================
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from tegula.ir import expr as E
from tegula.ir.dtype import DType


def _lowest(t: DType) -> Any:
    if t.is_float:
        return -math.inf
    return -(2 ** (t.bits - 1)) if t.kind == "int" else 0


def _highest(t: DType) -> Any:
    if t.is_float:
        return math.inf
    return 2 ** (t.bits - 1) - 1 if t.kind == "int" else 2 ** t.bits - 1


def _all_ones(t: DType) -> Any:
    if t.kind == "int":
        return -1
    return True if t.kind == "bool" else 2 ** t.bits - 1


@dataclass(frozen=True)
class Combiner:
    """One kind of reduction or scan (see the module docstring)."""

    kind: str
    ufunc: np.ufunc
    combine: Callable[[E.Expr, E.Expr], E.Expr]
    identity: Callable[[DType], Any]
    absolute: bool = False
    widen: bool = False
    ints: bool = False


COMBINERS: dict[str, Combiner] = {c.kind: c for c in (
    Combiner("sum", np.add, lambda a, b: a + b, lambda t: 0, widen=True),
    Combiner("abssum", np.add, lambda a, b: a + b, lambda t: 0, absolute=True, widen=True),
    Combiner("max", np.maximum, E.maximum, _lowest),
    Combiner("min", np.minimum, E.minimum, _highest),
    Combiner("absmax", np.maximum, E.maximum, lambda t: 0, absolute=True),
    Combiner("bitand", np.bitwise_and, lambda a, b: E.binary("bitand", a, b), _all_ones, ints=True),
    Combiner("bitor", np.bitwise_or, lambda a, b: E.binary("bitor", a, b), lambda t: 0, ints=True),
    Combiner("bitxor", np.bitwise_xor, lambda a, b: E.binary("bitxor", a, b), lambda t: 0,
             ints=True),
)}
