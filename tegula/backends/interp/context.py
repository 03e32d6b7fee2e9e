"""Compile-time state of the interpreter: its rule registry and what a rule knows of its place.

The interpreter turns IR into a tree of closures once (:mod:`tegula.backends.closure` has the
registry, the env slots and the rules shared with the emulator). Slot ``MASK`` of ``env`` holds
the active store mask inside ``T.Parallel`` bodies (``None`` when every lane is active); other
slots hold variable values and buffer arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional

from tegula.errors import OutOfBoundsError
from tegula.backends.closure import COMMON, Env, Rules, Slots, compile_expr
from tegula.backends.memo import Memo, new_memo

RULES = Rules("cpu", base=COMMON)
expr_rule = RULES.expr_rule
stmt_rule = RULES.stmt_rule


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

    rules: ClassVar[Rules] = RULES
    slots: Slots = field(default_factory=lambda: Slots(1))  # slot 0 is MASK
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
    lane_vars: dict = field(default_factory=dict)   # id(local.var buffer) -> its per-lane slot
    threads: int = 1                                # threads of the block that runs the code
    memo: Optional[Memo] = field(default_factory=lambda: new_memo(fixed_lanes))  # kept subexpressions
    batch: Any = None                               # a BatchInfo when blocks run side by side

    def slot(self, node: Any) -> int:
        """The env slot of a var or buffer, allocating one the first time."""
        return self.slots.slot(node)

    def made_tensor(self, buf: Any) -> tuple:
        """The slot of ``T.make_tensor`` buffer ``buf`` and how its host array is held (as is)."""
        return self.slot(buf), lambda a: a

    def child(self, **changes: Any) -> "Ctx":
        """A copy sharing the slot tables, with some fields changed."""
        c = Ctx(self.slots, self.buffers, dict(self.par_vars), set(self.vec_vars),
                self.in_parallel, self.ndim, self.depth, self.masked, self.loop_ok, self.flags,
                self.lane_vars, self.threads, self.memo, self.batch)
        for k, v in changes.items():
            setattr(c, k, v)
        return c


def fixed_lanes(v: Any, ctx: "Ctx") -> Any:
    """For a ``T.Parallel`` variable of constant start and extent here (its index array is the
    same at every run of the nest), what that array is made of; else None."""
    p = ctx.par_vars.get(id(v))
    if p is None or p.start is None or p.extent is None:
        return None
    return (p.axis, ctx.ndim, p.start, p.extent, p.step)


def dim_value(d: Any, ctx: Ctx) -> Callable[[Env], int]:
    """A shape entry (int or expression) as a function of env giving a Python int."""
    if isinstance(d, int):
        return lambda env: d
    f = compile_expr(d, ctx).fn
    return lambda env: int(f(env))


def out_of_bounds(node: Any, buffer: Any, index: Any, shape: Any) -> OutOfBoundsError:
    """The located error of an access at ``index`` outside ``buffer`` (of ``shape``)."""
    idx = ", ".join(str(int(i)) for i in index)
    return OutOfBoundsError(
        f"index [{idx}] is out of bounds of buffer '{buffer.name}' with shape {tuple(shape)}",
        node.span)
