"""What each operation reads and writes, where it runs, and whether it is asynchronous: one query.

Every pass that orders, stages or binds memory asks :func:`effects` instead of knowing operand
names: ``InsertBarriers`` and shared-memory liveness (which shared buffers a statement reads and
writes, which writes land later, which builtins are synchronization themselves), the batched
interpreter (which global buffers a kernel reads and writes), pipeline staging (which tiles a loop
body writes) and argument binding (which parameters a kernel may write).

Tile operations declare their effects as the ``effects`` aspect of :mod:`tegula.ir.tile_rules`,
next to the node classes: the core ops below, the NPU dialect's in :mod:`tegula.ir.npu`. A rule
is ``node -> Effects``::

    @tile_rule(Copy, "effects")
    def _copy(n: Copy) -> Effects:
        return Effects(reads=(n.src,), writes=(n.dst,), unit="copy")

Thread-level builtins (``tl::ldmatrix``, ``tl::tma_load``, ...) declare theirs as rows of
:data:`BUILTINS`: which argument positions (each an ``address_of`` a buffer element) the call
reads and writes, its unit, whether the write lands after the call returns, and whether an
mbarrier orders it instead of the threads' barriers. A builtin without a row reads and writes
every buffer it is handed (the safe assumption).

The NPU passes (``InsertSync``, cross-core sync, the scheduler, the cost model, the emulator's
trace) can ask the same query: ``effects(op).reads`` / ``.writes`` are the regions their
``region_accesses`` lists today, and ``.unit`` the pipe.

Adding a read to a tile op is one change of its rule here; every pass above sees it
(``tests/ir/test_effects.py``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import Builtin, BufferLoad
from tegula.ir.stmt import Atomic, Copy, CumSum, Evaluate, Fill, Gemm, Print, Reduce, TileOp
from tegula.ir.tile_rules import TILE_RULES, tile_rule

Touched = Union[BufferRegion, Buffer]

# units an operation runs on (NPU ops name their pipe: "MTE2", "V", "M", ...)
THREADS = "threads"          # the block's threads, in order with their other code
COPY = "copy"                # a tile copy (threads, cp.async or TMA once lowered)
TENSOR_CORE = "tensor_core"  # mma.sync / wgmma
ASYNC_COPY = "async_copy"    # cp.async: the write lands at cp_async_wait
COPY_ENGINE = "copy_engine"  # TMA: the write lands when its mbarrier completes
MBARRIER = "mbarrier"        # mbarrier operations
HOST = "host"                # printing


def _buffer(t: Touched) -> Buffer:
    return t.buffer if isinstance(t, BufferRegion) else t


@dataclass(frozen=True)
class Effects:
    """What one operation does to memory.

    ``reads`` / ``writes``: the regions (or whole buffers) it reads and writes; ``unit``: where it
    runs; ``is_async``: its writes land after it returns (a later wait completes them);
    ``barrier``: it synchronizes (an mbarrier operation, a barrier); ``atomic``: its writes are
    atomic read-modify-writes (``T.atomic_*``), which other blocks' atomics of the same kind do
    not race with.
    """

    reads: tuple = ()
    writes: tuple = ()
    unit: str = THREADS
    is_async: bool = False
    barrier: bool = False
    atomic: bool = False

    @property
    def read_buffers(self) -> list:
        """The buffers of :attr:`reads`, in order, without repeats."""
        return list(dict.fromkeys(_buffer(t) for t in self.reads))

    @property
    def written_buffers(self) -> list:
        """The buffers of :attr:`writes`, in order, without repeats."""
        return list(dict.fromkeys(_buffer(t) for t in self.writes))


@dataclass(frozen=True)
class BuiltinEffects:
    """A builtin's declaration: the argument positions it reads and writes through (None: every
    buffer argument, both ways), its unit, ``is_async`` (its writes land after it returns),
    ``mbarrier_ordered`` (an mbarrier orders it: the threads' barriers need not), ``barrier``."""

    reads: Optional[tuple[int, ...]] = None
    writes: Optional[tuple[int, ...]] = None
    unit: str = THREADS
    is_async: bool = False
    mbarrier_ordered: bool = False
    barrier: bool = False

    def reads_arg(self, pos: int) -> bool:
        """Whether the call reads the buffer its argument ``pos`` points into."""
        return self.reads is None or pos in self.reads

    def writes_arg(self, pos: int) -> bool:
        """Whether the call writes the buffer its argument ``pos`` points into."""
        return self.writes is None or pos in self.writes


# (name, declaration): ``address_of`` arguments by position
BUILTINS: dict[str, BuiltinEffects] = {
    "tl::ldmatrix": BuiltinEffects(reads=(1,), writes=(0,)),
    "tl::copy_vec": BuiltinEffects(reads=(1,), writes=(0,)),
    "tl::cp_async_zfill": BuiltinEffects(reads=(1,), writes=(0,), unit=ASYNC_COPY, is_async=True),
    "tl::wgmma_desc": BuiltinEffects(reads=(0,), writes=(), unit=TENSOR_CORE),
    "tl::tma_store": BuiltinEffects(reads=(1,), writes=(), unit=COPY_ENGINE),
    # TMA loads: the copy engine's writes, ordered by their mbarrier (arg 0 the tile, 2 the
    # mbarrier); every shared operand counts as the load's target for shared-memory liveness
    "tl::tma_load": BuiltinEffects(unit=COPY_ENGINE, is_async=True, mbarrier_ordered=True),
    "tl::tma_load_multicast": BuiltinEffects(unit=COPY_ENGINE, is_async=True, mbarrier_ordered=True),
}
# declarations shared by every builtin whose name starts so
BUILTIN_PREFIXES: dict[str, BuiltinEffects] = {
    "tl::mbarrier_": BuiltinEffects(unit=MBARRIER, mbarrier_ordered=True, barrier=True),
}
UNDECLARED = BuiltinEffects()


def builtin_effects(name: str) -> BuiltinEffects:
    """The declaration of builtin ``name`` (:data:`UNDECLARED`: reads and writes every buffer
    argument, when it has none)."""
    decl = BUILTINS.get(name)
    if decl is not None:
        return decl
    for prefix, d in BUILTIN_PREFIXES.items():
        if name.startswith(prefix):
            return d
    return UNDECLARED


def pointed_buffer(arg: Any) -> Optional[BufferLoad]:
    """The element ``arg`` points at when it is ``address_of(buf[...])``, else None."""
    if isinstance(arg, Builtin) and arg.name == "address_of" and isinstance(arg.args[0], BufferLoad):
        return arg.args[0]
    return None


def _builtin(n: Builtin) -> Effects:
    decl = builtin_effects(n.name)
    reads, writes = [], []
    for pos, a in enumerate(n.args):
        load = pointed_buffer(a)
        if load is None:
            continue
        if decl.reads_arg(pos):
            reads.append(load.buffer)
        if decl.writes_arg(pos):
            writes.append(load.buffer)
    return Effects(tuple(reads), tuple(writes), decl.unit, decl.is_async, decl.barrier)


def _fields(n: TileOp) -> tuple:
    return tuple(v for v in vars(n).values() if isinstance(v, BufferRegion))


def effects(node: Any) -> Effects:
    """What ``node`` reads and writes: a tile op by its ``effects`` rule (one with no rule reads
    and writes each region it holds), a builtin call (or ``Evaluate`` of one) by its row of
    :data:`BUILTINS`. Other nodes have no effects of their own (their loads and stores are
    :class:`~tegula.ir.expr.BufferLoad` / :class:`~tegula.ir.stmt.BufferStore` nodes)."""
    if isinstance(node, Evaluate):
        node = node.value
    if isinstance(node, Builtin):
        return _builtin(node)
    if isinstance(node, TileOp):
        rule = TILE_RULES.get(type(node), "effects")
        if rule is None:
            regions = _fields(node)
            return Effects(regions, regions)
        return rule(node)
    return Effects()


# ---------------------------------------------------------------------------------------------
# The core tile ops
# ---------------------------------------------------------------------------------------------

@tile_rule(Copy, "effects")
def _copy(n: Copy) -> Effects:
    return Effects(reads=(n.src,), writes=(n.dst,), unit=COPY)


@tile_rule(Gemm, "effects")
def _gemm(n: Gemm) -> Effects:
    acc = () if n.clear_accum else (n.C,)
    return Effects(reads=(n.A, n.B) + acc, writes=(n.C,), unit=TENSOR_CORE)


@tile_rule(Reduce, "effects")
def _reduce(n: Reduce) -> Effects:
    return Effects(reads=(n.src,) + (() if n.clear else (n.dst,)), writes=(n.dst,))


@tile_rule(CumSum, "effects")
def _cumsum(n: CumSum) -> Effects:
    return Effects(reads=(n.src,), writes=(n.dst,))


@tile_rule(Fill, "effects")
def _fill(n: Fill) -> Effects:
    return Effects(writes=(n.dst,))


@tile_rule(Atomic, "effects")
def _atomic(n: Atomic) -> Effects:
    value = (n.value,) if isinstance(n.value, BufferRegion) else ()
    return Effects(reads=value, writes=(n.dst,), atomic=True)


@tile_rule(Print, "effects")
def _print(n: Print) -> Effects:
    return Effects(reads=(n.obj,) if isinstance(n.obj, BufferRegion) else (), unit=HOST)
