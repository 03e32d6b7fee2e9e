"""Compile-time state of the emulator: buffers, access sites, the rule registries.

The emulator turns thread-level IR into a tree of closures once per kernel
(:mod:`tegula.backends.closure` has the registry, the env slots and the rules shared with the
interpreter). Slot ``MASK`` holds the active lane mask (``None`` when every thread of the block is
active, else a bool array of length ``nthreads``); slot ``STATE`` holds the
:class:`~tegula.backends.emu.memory.BlockState` of the block being run. Values are numpy scalars
(the same for every thread) or arrays of length ``nthreads`` (one value per thread).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Optional

import numpy as np

from tegula.errors import UnsupportedError
from tegula.ir.buffer import Buffer
from tegula.ir.span import Span
from tegula.backends.closure import COMMON, CExpr, Rules, Slots, StmtFn
from tegula.backends.memo import Memo

STATE = 1  # env slot of the BlockState (slot 0 is MASK)


class EmuRules(Rules):
    """The emulator's rules: a statement is compiled under its own span (for race reports)."""

    def compile_stmt(self, s: Any, ctx: "Ctx") -> StmtFn:
        span = getattr(s, "span", None)
        if span is not None and span is not ctx.span:
            ctx = ctx.child(span=span)
        return super().compile_stmt(s, ctx)


RULES = EmuRules("cuda-emu", base=COMMON, stmt_hint="tile operations must be lowered first")
expr_rule = RULES.expr_rule
stmt_rule = RULES.stmt_rule


@dataclass
class BufInfo:
    """What the emulator knows about one buffer of a kernel."""

    buffer: Buffer
    slot: int                 # env slot: flat array (global, shared), (numel, T) array (local)
    scope: str                # "global", "shared", "local", "local.var"
    index: int                # small integer id (race reports, aliasing)
    offset: int = 0           # byte offset in the shared pool
    numel: Optional[int] = None

    @property
    def name(self) -> str:
        return self.buffer.name

    @property
    def itemsize(self) -> int:
        return self.buffer.dtype.itemsize

    @property
    def np(self) -> np.dtype:
        return self.buffer.dtype.np


@dataclass
class Site:
    """A place in the kernel source that touches shared memory (for race reports)."""

    span: Optional[Span]
    buffer: Optional[BufInfo]
    what: str  # "T.copy", "ldmatrix", "store", ...

    def where(self) -> str:
        return where(self.span)


def where(span: Optional[Span]) -> str:
    """``file.py:LINE  source`` of a span, for reports."""
    if span is None or not getattr(span, "file", None):
        return "<unknown line>"
    src = span.source_line().strip()
    return f"{span.short()}  {src}" if src else span.short()


@dataclass
class Ctx:
    """What the compiler knows at a point of the IR (one kernel)."""

    rules: ClassVar[Rules] = RULES
    nthreads: int
    slots: Slots = field(default_factory=lambda: Slots(2))  # slots 0, 1 are MASK, STATE
    bufs: dict = field(default_factory=dict)        # id(buffer) -> BufInfo
    vec_vars: set = field(default_factory=set)      # ids of vars holding per-thread arrays
    sites: list = field(default_factory=list)       # Site table, shared by the whole kernel
    span: Optional[Span] = None                      # the innermost statement span
    tile_op: str = ""                                # the tile op being emulated ("T.copy")
    loop_ok: bool = False
    info: dict = field(default_factory=dict)        # kernel facts: "tma_maps", "wgmma_regs"
    memo: Optional[Memo] = None                      # kept subexpressions (the kernel's, see memo.py)

    def slot(self, node: Any) -> int:
        """The env slot of a var or buffer, allocating one the first time."""
        return self.slots.slot(node)

    def child(self, **changes: Any) -> "Ctx":
        """A copy sharing the slot, buffer, site and per-thread-variable tables (a let binds its
        variable for the statements compiled after it), with some fields changed."""
        c = Ctx(self.nthreads, self.slots, self.bufs, self.vec_vars, self.sites,
                self.span, self.tile_op, self.loop_ok, self.info, self.memo)
        for k, v in changes.items():
            setattr(c, k, v)
        return c

    def site(self, buf: Optional[BufInfo], what: str, span: Optional[Span] = None) -> int:
        """Register an access site at the current span; returns its id."""
        self.sites.append(Site(span or self.span, buf, self.tile_op or what))
        return len(self.sites) - 1

    def made_tensor(self, b: Buffer) -> tuple:
        """The slot of ``T.make_tensor`` buffer ``b`` and how its host array is held (flat)."""
        slot = self.slot(b)
        self.bufs[id(b)] = BufInfo(b, slot, "global", len(self.bufs))
        return slot, lambda a: a.reshape(-1)

    def buf(self, b: Buffer, node: Any = None) -> BufInfo:
        info = self.bufs.get(id(b))
        if info is None:
            raise UnsupportedError(f"buffer '{b.name}' is used in a kernel but is neither a parameter "
                                   "nor allocated there", getattr(node, "span", None))
        return info


# -- builtins, one rule per name (``E.Builtin`` dispatches on it) --------------------------------
BUILTIN_RULES: dict[str, Callable[[Any, Ctx], CExpr]] = {}


def builtin_rule(*names: str) -> Callable:
    def deco(fn: Callable) -> Callable:
        for n in names:
            BUILTIN_RULES[n] = fn
        return fn
    return deco


# -- masks --------------------------------------------------------------------------------------
def lanes_of(mask: Optional[np.ndarray], n: int) -> np.ndarray:
    """Indices of the active threads."""
    return np.arange(n) if mask is None else np.flatnonzero(mask)


def and_mask(mask: Optional[np.ndarray], cond: Any, n: int) -> Optional[np.ndarray]:
    """``mask & cond`` as a bool array, or None when every thread stays active."""
    c = np.broadcast_to(np.asarray(cond, dtype=bool), (n,))
    m = c if mask is None else (mask & c)
    if mask is None and m.all():
        return None
    return m


def as_lanes(v: Any, n: int) -> np.ndarray:
    """A value as an array with one entry per thread."""
    a = np.asarray(v)
    return a if a.ndim == 1 and a.shape[0] == n else np.broadcast_to(a, (n,))


def lanes_text(lanes: np.ndarray) -> str:
    """``threads 0-127 (warpgroup 0)`` for a set of lanes."""
    lanes = np.asarray(lanes)
    if len(lanes) == 0:
        return "no thread"
    lo, hi = int(lanes.min()), int(lanes.max())
    if len(lanes) == 1:
        return f"thread {lo}"
    txt = f"threads {lo}-{hi}" if hi - lo + 1 == len(lanes) else f"{len(lanes)} threads from {lo} to {hi}"
    wgs = sorted({int(x) // 128 for x in lanes})
    return txt + f" (warpgroup{'s' if len(wgs) > 1 else ''} {', '.join(map(str, wgs))})"
