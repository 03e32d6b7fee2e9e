"""IR nodes of the Ascend NPU dialects.

An NPU kernel is an :class:`NpuKernel` (a ``Kernel`` whose blocks are AI cores: one cube core,
AIC, and two vector cores, AIV, per block; ``sub_var`` is the AIV index 0/1). Inside it:

- :class:`CoreScope` ``with T.Scope("C" | "V")``: code that runs on the cube or the vector cores;
- tile operations: ``Copy`` (over the machine's legal paths), :class:`Mma` (``T.mma`` / ``T.gemm_v0``),
  :class:`VecOp` (``T.tile.*``), ``Reduce``, ``Fill``;
- sync: :class:`SetFlag` / :class:`WaitFlag` (between two pipes of one core, a HardEvent and an id),
  :class:`PipeBarrier`, :class:`BarrierAll`, :class:`SetCrossFlag` / :class:`WaitCrossFlag`
  (between cores). ``auto=True`` marks sync the compiler inserted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from tegula.ir.buffer import BufferRegion
from tegula.ir.effects import Effects
from tegula.ir.expr import BufferLoad, Expr, Var
from tegula.ir.stmt import Kernel, Stmt, TileOp
from tegula.ir.tile_rules import tile_rule
from tegula.ir.vecops import VEC_OPS
from tegula.ir.visitor import DEF_FIELDS, post_order_visit

CORE_KINDS = ("C", "V")
NPU_SCOPES = ("l1", "l0a", "l0b", "l0c", "ub")

# Pipes: each an in-order instruction queue on its core (the same on A2/A3 and 950).
PIPES = ("S", "V", "M", "MTE1", "MTE2", "MTE3", "FIX")
# Pipes whose instructions may complete out of issue order when they touch overlapping bytes, so
# a same-pipe dependence needs a barrier (S, V and M keep issue order).
BARRIER_PIPES = frozenset({"MTE1", "MTE2", "MTE3", "FIX"})
# The pipes each core kind has.
CORE_PIPES = {"C": ("S", "M", "MTE1", "MTE2", "FIX"), "V": ("S", "V", "MTE2", "MTE3")}
# HardEvents that exist (src, dst); a flag between any other pair is an error.
HARD_EVENTS = frozenset(tuple(e.split("_")) for e in (
    "MTE2_MTE1 MTE1_MTE2 MTE1_M M_MTE1 MTE2_V V_MTE2 MTE3_V V_MTE3 M_V V_M MTE3_MTE1 MTE1_MTE3 "
    "MTE1_V MTE2_M M_MTE2 V_MTE1 M_FIX FIX_M MTE3_MTE2 MTE2_MTE3 S_V V_S S_MTE2 MTE2_S S_MTE3 "
    "MTE3_S MTE2_FIX FIX_MTE2 FIX_S M_S FIX_MTE3").split())
FLAG_IDS = 8  # ids 0-7 per HardEvent


@dataclass(frozen=True, eq=False)
class NpuKernel(Kernel):
    """A launch over ``grid`` AI-core groups; ``sub_var`` is the vector-core index (0 or 1).

    ``annotations["npu"]`` holds compiler results: ``layouts`` (buffer -> fractal layout),
    ``offsets`` (buffer -> byte offset in its memory), ``dialect`` ("a2a3" or "a5").
    """

    sub_var: Optional[Var] = None


DEF_FIELDS["NpuKernel"] = ("block_vars", "thread_var", "allocs", "sub_var")


@dataclass(frozen=True, eq=False)
class CoreScope(Stmt):
    """``with T.Scope(kind)``: ``body`` runs on the cube core (``"C"``) or each vector core (``"V"``)."""

    kind: str
    body: Stmt


@dataclass(frozen=True, eq=False)
class Mma(TileOp):
    """``C (+)= A @ B`` on the cube (``init`` clears C first); A, B, C in L0A, L0B, L0C, or, for
    ``T.gemm_v0``, A and B in L1 (the compiler moves them to L0 on MTE1)."""

    A: BufferRegion
    B: BufferRegion
    C: BufferRegion
    transpose_A: bool = False
    transpose_B: bool = False
    init: bool = False


Operand = Union[BufferRegion, Expr]


@dataclass(frozen=True, eq=False)
class VecOp(TileOp):
    """``T.tile.<op>(dst, *srcs)`` on the vector pipe: srcs are UB regions or scalar expressions;
    ``attrs`` holds extra arguments (``dim`` of a broadcast, the compare mode, ...)."""

    op: str
    dst: BufferRegion
    srcs: tuple
    attrs: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class SetFlag(Stmt):
    """``set_flag(src, dst, id)``: fires once every earlier instruction on pipe ``src`` is done."""

    src: str
    dst: str
    id: Any
    auto: bool = False


@dataclass(frozen=True, eq=False)
class WaitFlag(Stmt):
    """``wait_flag(src, dst, id)``: pipe ``dst`` waits until the flag is set, and consumes it."""

    src: str
    dst: str
    id: Any
    auto: bool = False


@dataclass(frozen=True, eq=False)
class PipeBarrier(Stmt):
    """``pipe_barrier(pipe)``: later instructions of ``pipe`` start after earlier ones finish."""

    pipe: str
    auto: bool = False


@dataclass(frozen=True, eq=False)
class BarrierAll(Stmt):
    """``barrier_all()``: every pipe of this core drains before anything after it issues."""

    auto: bool = False


@dataclass(frozen=True, eq=False)
class SetCrossFlag(Stmt):
    """``set_cross_flag(pipe, flag, mode)``: after earlier work on ``pipe``, count one on the
    partner cores' ``flag`` (mode 2: AIC <-> both AIVs of the group; mode 1: AIV <-> AIV)."""

    pipe: str
    flag: Any
    mode: int = 2
    auto: bool = False


@dataclass(frozen=True, eq=False)
class WaitCrossFlag(Stmt):
    """``wait_cross_flag(flag)``: this core waits while ``flag``'s count is 0, then takes one."""

    flag: Any
    auto: bool = False


SYNC_NODES = (SetFlag, WaitFlag, PipeBarrier, BarrierAll, SetCrossFlag, WaitCrossFlag)


# what the NPU ops read and write (tegula.ir.effects: one query for every pass that orders memory)
@tile_rule(Mma, "effects")
def _mma_effects(n: Mma) -> Effects:
    acc = () if n.init is True else (n.C,)
    return Effects(reads=(n.A, n.B) + acc, writes=(n.C,), unit="M")


@tile_rule(VecOp, "effects")
def _vec_effects(n: VecOp) -> Effects:
    """Its tile sources, its destination where its row of the vector-op table reads it (axpy,
    mul_add_dst), and the tiles its scalar operands load elements of (``s_ub[i]``)."""
    srcs = tuple(x for x in n.srcs if isinstance(x, BufferRegion))
    row = VEC_OPS.get(n.op)
    loads: dict = {}
    for x in n.srcs:
        if not isinstance(x, BufferRegion):
            post_order_visit(x, lambda e: loads.setdefault(e.buffer, 1) if isinstance(e, BufferLoad)
                             and e.buffer.scope not in ("global", "local.var") else None)
    dst = (n.dst,) if row is not None and row.reads_dst else ()
    return Effects(reads=srcs + dst + tuple(loads), writes=(n.dst,), unit=row.pipe if row else "V")


def _register_printers() -> None:
    """T-script spellings of the nodes above (the printer dispatches on ``stmt_<Class>``; tile
    ops on their "print" rule in tegula.ir.tile_rules)."""
    from tegula.ir import printer

    ScriptPrinter = printer.ScriptPrinter
    printer._ALLOC_CALL.update({"l1": "T.alloc_L1", "l0a": "T.alloc_L0A", "l0b": "T.alloc_L0B",
                                "l0c": "T.alloc_L0C", "ub": "T.alloc_ub"})

    def p_kernel(self: Any, k: NpuKernel, depth: int) -> None:
        self.push()
        names = [self.define(v) for v in k.block_vars]
        if k.sub_var is not None:
            names.append(self.define(k.sub_var))
        grid = ", ".join(self.dim(g) for g in k.grid)
        self.line(f"with T.Kernel({grid}, is_npu=True) as ({', '.join(names)}):", depth)
        for buf in k.allocs:
            self.line(f"{self.define(buf)} = {self.alloc(buf, k.alloc_inits)}", depth + 1)
        per_buf = {key: v for key, v in k.annotations.items() if isinstance(v, dict)}
        for buf in k.allocs:
            facts = [f"{key}={per_buf[key][buf]}" for key in per_buf if buf in per_buf[key]]
            if facts:
                self.line(f"# {self.name_of(buf)}: {', '.join(facts)}", depth + 1)
        for key, value in k.annotations.items():
            if key not in per_buf:
                self.line(f"# annotation {key} = {printer.value_str(value)}", depth + 1)
        self.stmt(k.body, depth + 1)
        self.pop()

    def auto(s: Any) -> str:
        return "  # inserted" if getattr(s, "auto", False) else ""

    def p_scope(self: Any, s: CoreScope, depth: int) -> None:
        self.line(f'with T.Scope("{s.kind}"):', depth)
        self.block(s.body, depth + 1)

    @tile_rule(Mma, "print")
    def p_mma(self: Any, s: Mma) -> str:
        args = [self.e(s.A), self.e(s.B), self.e(s.C)]
        for k in ("transpose_A", "transpose_B"):
            if getattr(s, k):
                args.append(f"{k}=True")
        if isinstance(s.init, Expr):
            args.append(f"init={self.e(s.init)}")
        elif s.init:
            args.append("init=True")
        return f"T.mma({', '.join(args)})"

    @tile_rule(VecOp, "print")
    def p_vec(self: Any, s: VecOp) -> str:
        args = [self.e(s.dst)] + [self.e(x) for x in s.srcs]
        args += [f"{k}={self.e(v) if isinstance(v, Expr) else repr(v)}" for k, v in s.attrs.items()]
        return f"T.tile.{s.op}({', '.join(args)})"

    def p_set(self: Any, s: SetFlag, depth: int) -> None:
        self.line(f'T.set_flag("{s.src.lower()}", "{s.dst.lower()}", {self.e(s.id)}){auto(s)}', depth)

    def p_wait(self: Any, s: WaitFlag, depth: int) -> None:
        self.line(f'T.wait_flag("{s.src.lower()}", "{s.dst.lower()}", {self.e(s.id)}){auto(s)}', depth)

    def p_bar(self: Any, s: PipeBarrier, depth: int) -> None:
        self.line(f'T.pipe_barrier("{s.pipe.lower()}"){auto(s)}', depth)

    def p_all(self: Any, s: BarrierAll, depth: int) -> None:
        self.line(f"T.barrier_all(){auto(s)}", depth)

    def p_xset(self: Any, s: SetCrossFlag, depth: int) -> None:
        self.line(f'T.set_cross_flag("{s.pipe.lower()}", {self.e(s.flag)}, mode={s.mode}){auto(s)}',
                  depth)

    def p_xwait(self: Any, s: WaitCrossFlag, depth: int) -> None:
        self.line(f"T.wait_cross_flag({self.e(s.flag)}){auto(s)}", depth)

    for cls, fn in ((NpuKernel, p_kernel), (CoreScope, p_scope), (SetFlag, p_set),
                    (WaitFlag, p_wait), (PipeBarrier, p_bar), (BarrierAll, p_all),
                    (SetCrossFlag, p_xset), (WaitCrossFlag, p_xwait)):
        setattr(ScriptPrinter, f"stmt_{cls.__name__}", fn)


_register_printers()
