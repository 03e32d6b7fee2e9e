"""Statement nodes of the tile-level IR, the tile operations and ``PrimFunc``.

A kernel is a ``PrimFunc`` whose body holds one (or more) ``Kernel`` launches. Inside a launch,
statements are loops, conditionals, element stores, let-bindings and tile operations
(``Copy``, ``Gemm``, ``Reduce``, ``CumSum``, ``Fill``, ``Atomic``, ``Print``). Tile operations act on
whole tiles given as :class:`~tegula.ir.buffer.BufferRegion`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union

from tegula.ir import hooks
from tegula.ir.buffer import Buffer, BufferRegion, Dim
from tegula.ir.combiners import COMBINERS
from tegula.ir.expr import Expr, Node, Var


@dataclass(frozen=True, eq=False)
class Stmt(Node):
    """Base of statements."""


@dataclass(frozen=True, eq=False)
class SeqStmt(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class Evaluate(Stmt):
    """An expression evaluated for nothing but its effect (kept for completeness; rarely used)."""

    value: Expr


LOOP_KINDS = ("serial", "parallel", "pipelined", "unroll", "vectorized")


@dataclass(frozen=True, eq=False)
class For(Stmt):
    """``for var in range(start, start + extent*step, step)`` of a given ``kind``.

    ``T.Parallel(M, N)`` becomes two nested ``parallel`` loops. ``annotations`` keeps loop options
    (``num_stages``, ``order``, ``stage``, ``group`` for pipelined loops).
    """

    var: Var
    start: Expr
    extent: Dim
    body: Stmt
    kind: str = "serial"
    step: int = 1
    annotations: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class While(Stmt):
    cond: Expr
    body: Stmt


@dataclass(frozen=True, eq=False)
class Break(Stmt):
    pass


@dataclass(frozen=True, eq=False)
class Continue(Stmt):
    pass


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    cond: Expr
    then: Stmt
    else_: Optional[Stmt] = None


@dataclass(frozen=True, eq=False)
class BufferStore(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, eq=False)
class AttrStmt(Stmt):
    """``body`` with an attribute attached, e.g. ``("tile_op", "T.copy")`` marking the code one
    tile operation was lowered to (passes after lowering treat it as one unit)."""

    key: str
    value: Any
    body: Stmt


# the key of a warp-specialized region (``with T.ws(i):``): AttrStmt(WARP_SPECIALIZE, (first thread,
# threads), body) at tile level; lowering adds the id of the region's named barrier to the value
WARP_SPECIALIZE = "warp_specialize"
WARPGROUP = 128  # threads of a warpgroup


@dataclass(frozen=True, eq=False)
class LetStmt(Stmt):
    """Binds ``var`` to ``value`` for the statements that follow it in the enclosing sequence."""

    var: Var
    value: Expr


# ---------------------------------------------------------------------------------------------
# Tile operations
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class TileOp(Stmt):
    """Base of tile-level operations. What each one means on each target is registered, keyed
    by its class, in :mod:`tegula.ir.tile_rules`."""

    @property
    def op_name(self) -> str:
        """The name users call it by (``T.copy``)."""
        return "T." + type(self).__name__.lower()


@dataclass(frozen=True, eq=False)
class Copy(TileOp):
    """``T.copy(src, dst)``: same tile shape (unit dims ignored); converts dtype; global reads
    out of bounds give zero and global writes out of bounds are dropped."""

    src: BufferRegion
    dst: BufferRegion
    annotations: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Gemm(TileOp):
    """``C += op(A) @ op(B)`` (``C = ...`` when ``clear_accum``), accumulating in C's dtype."""

    A: BufferRegion
    B: BufferRegion
    C: BufferRegion
    transpose_A: bool = False
    transpose_B: bool = False
    policy: str = "Square"
    clear_accum: bool = False
    k_pack: int = 1
    wg_wait: int = 0


REDUCE_KINDS = tuple(COMBINERS)  # one row each in tegula/ir/combiners.py


@dataclass(frozen=True, eq=False)
class Reduce(TileOp):
    """``T.reduce_<kind>(src, dst, dim, clear)``; dst has src's shape without ``dim``. How
    ``kind`` combines elements is its row in :mod:`tegula.ir.combiners`."""

    kind: str
    src: BufferRegion
    dst: BufferRegion
    dim: int
    clear: bool = True

    @property
    def op_name(self) -> str:
        return f"T.reduce_{self.kind}"


@dataclass(frozen=True, eq=False)
class CumSum(TileOp):
    """``T.cum<kind>(src, dst, dim, reverse)``: the inclusive scan along ``dim`` (``reverse``:
    from the end), combining as the ``kind`` row of :mod:`tegula.ir.combiners` says
    (``T.cumsum``: "sum", ``T.cummax``: "max")."""

    src: BufferRegion
    dst: BufferRegion
    dim: int
    reverse: bool = False
    kind: str = "sum"

    @property
    def op_name(self) -> str:
        return f"T.cum{self.kind}"


@dataclass(frozen=True, eq=False)
class Fill(TileOp):
    """``T.fill(dst, value)`` / ``T.clear(dst)``."""

    dst: BufferRegion
    value: Expr


ATOMIC_KINDS = ("add", "max", "min")


@dataclass(frozen=True, eq=False)
class Atomic(TileOp):
    """``T.atomic_<kind>(dst, value)``: ``dst`` is a region (one element for the element form);
    ``value`` is an expression or a region of the same tile shape. Out-of-bounds elements of a
    global ``dst`` are dropped."""

    kind: str
    dst: BufferRegion
    value: Union[Expr, BufferRegion]

    @property
    def op_name(self) -> str:
        return f"T.atomic_{self.kind}"


@dataclass(frozen=True, eq=False)
class Print(TileOp):
    """``T.print(obj, msg)``: ``obj`` is an expression or a region."""

    obj: Union[Expr, BufferRegion]
    msg: str = ""


# ---------------------------------------------------------------------------------------------
# Kernel launch and function
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Kernel(Stmt):
    """A launch over ``grid`` blocks of ``threads`` threads.

    ``block_vars`` are the block indices (one per grid dimension); ``allocs`` the buffers the
    body allocates (shared, fragment, local, var), with ``alloc_inits`` giving the initial value
    of ``T.alloc_var(..., init=)``. ``annotations`` holds ``layout_map`` (buffer -> layout, from
    ``T.annotate_layout``) and ``swizzle`` (``(panel_size, order)`` from ``T.use_swizzle``;
    ``swizzle_disabled`` holds them for ``T.use_swizzle(..., enable=False)``: launch order).
    """

    grid: tuple[Dim, ...]
    threads: tuple[int, ...]
    block_vars: tuple[Var, ...]
    allocs: tuple[Buffer, ...]
    body: Stmt
    alloc_inits: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    thread_var: Optional[Var] = None  # set by lowering: the thread index inside the block

    @property
    def num_threads(self) -> int:
        n = 1
        for t in self.threads:
            n *= t
        return n


@dataclass(frozen=True, eq=False)
class PrimFunc(Node):
    """A kernel function: ``params`` are global buffers and scalar ``Var``s, in call order.

    ``attrs["workspaces"]`` (when set) says how many trailing params are scratch tensors
    (``T.alloc_global``) that the runtime allocates for each call and never returns.
    """

    name: str
    params: tuple[Union[Buffer, Var], ...]
    body: Stmt
    attrs: dict = field(default_factory=dict)

    @property
    def num_workspaces(self) -> int:
        return int(self.attrs.get("workspaces", 0))

    def user_params(self) -> tuple:
        """The parameters a caller sees: all but the trailing workspaces."""
        return self.params[:len(self.params) - self.num_workspaces]

    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    def dynamic_vars(self) -> list[Var]:
        """Symbolic dimensions appearing in parameter shapes, in order of first appearance."""
        seen: list[Var] = []
        for p in self.params:
            if isinstance(p, Buffer):
                for d in p.shape:
                    if isinstance(d, Var) and all(d is not s for s in seen):
                        seen.append(d)
        return seen

    def script(self) -> str:
        """The function printed back as T-script."""
        return hooks.script(self)

    def __str__(self) -> str:
        return self.script()

    def with_body(self, body: Stmt) -> "PrimFunc":
        return PrimFunc(self.name, self.params, body, dict(self.attrs), span=self.span)


def parallel_nest(loop: "For") -> tuple[list[Var], list[Any], Stmt]:
    """The variables, extents and innermost body of the directly nested ``parallel`` loops
    starting at ``loop`` (what ``T.Parallel(M, N)`` became)."""
    vars_, exts, body = [loop.var], [loop.extent], loop.body
    while isinstance(body, For) and body.kind == "parallel":
        vars_.append(body.var)
        exts.append(body.extent)
        body = body.body
    return vars_, exts, body


def seq(*stmts: Any) -> Stmt:
    """A sequence, flattened; a single statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, (list, tuple)):
            s = seq(*s)
            if isinstance(s, SeqStmt) and not s.stmts:
                continue
        if isinstance(s, SeqStmt):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    if len(flat) == 1:
        return flat[0]
    return SeqStmt(tuple(flat))
