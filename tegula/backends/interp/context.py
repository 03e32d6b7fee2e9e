"""Compile-time state of the interpreter: variable slots, the rule registries, dtype helpers.

The interpreter turns IR into a tree of closures once; every closure takes ``env``, a flat list
of values. Slot 0 of ``env`` holds the active store mask inside ``T.Parallel`` bodies (``None``
when every lane is active); other slots hold variable values and buffer arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from tegula.errors import UnsupportedError
from tegula.ir.dtype import DType

Env = list
ExprFn = Callable[[Env], Any]
StmtFn = Callable[[Env], None]

MASK = 0  # env slot of the active lane mask inside a parallel body

F32 = np.dtype(np.float32)


class BreakSignal(Exception):
    """Raised by ``break``; caught by the innermost serial or while loop."""


class ContinueSignal(Exception):
    """Raised by ``continue``; caught by the innermost serial or while loop."""


@dataclass
class CExpr:
    """A compiled expression: ``fn(env)`` gives its value; ``vec`` says it varies over the lanes
    of the enclosing parallel nest (an array) rather than being one scalar."""

    fn: ExprFn
    vec: bool
    node: Any = None


@dataclass
class ParVar:
    """A parallel loop variable: its lane axis, and (start, extent) when both are constant."""

    axis: int
    start: Optional[int]
    extent: Optional[int]
    step: int


@dataclass
class Ctx:
    """What the compiler knows at a point of the IR."""

    slots: dict = field(default_factory=dict)      # id(var or buffer) -> env slot
    nslots: list = field(default_factory=lambda: [1])
    buffers: dict = field(default_factory=dict)    # id(buffer) -> buffer
    # parallel-nest state
    par_vars: dict = field(default_factory=dict)   # id(var) -> ParVar
    vec_vars: set = field(default_factory=set)     # ids of vars holding lane arrays
    in_parallel: bool = False
    ndim: int = 0                                   # number of lane axes of the nest
    depth: int = 0                                  # parallel loops entered so far
    masked: bool = False                            # inside an if on a lane-varying condition
    loop_ok: bool = False                           # a serial/while loop encloses us (break ok)
    flags: dict = field(default_factory=dict)       # loop-local: saw break/continue

    def slot(self, node: Any) -> int:
        """The env slot of a var or buffer, allocating one the first time."""
        key = id(node)
        s = self.slots.get(key)
        if s is None:
            s = self.nslots[0]
            self.nslots[0] += 1
            self.slots[key] = s
        return s

    def child(self, **changes: Any) -> "Ctx":
        """A copy sharing the slot tables, with some fields changed."""
        c = Ctx(self.slots, self.nslots, self.buffers, dict(self.par_vars), set(self.vec_vars),
                self.in_parallel, self.ndim, self.depth, self.masked, self.loop_ok, self.flags)
        for k, v in changes.items():
            setattr(c, k, v)
        return c


# -- rule registries (one rule per node class) -------------------------------------------------
EXPR_RULES: dict[type, Callable[[Any, Ctx], CExpr]] = {}
STMT_RULES: dict[type, Callable[[Any, Ctx], StmtFn]] = {}


def expr_rule(cls: type) -> Callable:
    def deco(fn: Callable) -> Callable:
        EXPR_RULES[cls] = fn
        return fn
    return deco


def stmt_rule(cls: type) -> Callable:
    def deco(fn: Callable) -> Callable:
        STMT_RULES[cls] = fn
        return fn
    return deco


def compile_expr(e: Any, ctx: Ctx) -> CExpr:
    rule = EXPR_RULES.get(type(e))
    if rule is None:
        raise UnsupportedError(f"unimplemented op {type(e).__name__} for target cpu",
                               getattr(e, "span", None))
    ce = rule(e, ctx)
    ce.node = e
    return ce


def compile_stmt(s: Any, ctx: Ctx) -> StmtFn:
    rule = STMT_RULES.get(type(s))
    if rule is None:
        raise UnsupportedError(f"unimplemented op {type(s).__name__} for target cpu",
                               getattr(s, "span", None))
    return rule(s, ctx)


# -- dtype helpers ---------------------------------------------------------------------------
def is_narrow(d: DType) -> bool:
    """Floats narrower than 32 bits: arithmetic runs in float32 and rounds back."""
    return d.is_float and d.bits < 32


def np_scalar(d: DType, value: Any) -> Any:
    """``value`` as a numpy scalar of dtype ``d``."""
    return np.array(value).astype(d.np)[()]


def poison(d: DType) -> Any:
    """The value fresh shared/fragment/local memory holds: NaN, or a recognizable integer."""
    if d.is_float:
        return np.nan
    if d.is_bool:
        return True
    info = np.iinfo(d.np)
    if d.kind == "uint":
        return info.max
    return max(info.min, -0x5A5A5A5A)


def dim_value(d: Any, ctx: Ctx) -> Callable[[Env], int]:
    """A shape entry (int or expression) as a function of env giving a Python int."""
    if isinstance(d, int):
        return lambda env: d
    f = compile_expr(d, ctx).fn
    return lambda env: int(f(env))
