"""The Ascend A2/A3 dialect of the ``T`` namespace (TileLang-Ascend's names).

::

    with T.Kernel(n, is_npu=True) as (cid, vid):     # cid: block (AI core group), vid: AIV 0/1
        a_ub = T.alloc_ub((64, 128), "float16")
        with T.Scope("V"):
            T.copy(A[cid * 128 + vid * 64, 0], a_ub)
            T.tile.exp(a_ub, a_ub)
            T.copy(a_ub, B[cid * 128 + vid * 64, 0])

Memories: ``alloc_L1 / alloc_L0A / alloc_L0B / alloc_L0C`` (cube core) and ``alloc_ub`` (each
vector core). ``T.Scope("C")`` / ``T.Scope("V")`` say which cores run a block of code; tile ops
outside a scope run on the cores that own their buffers. Sync is by hand (``set_flag`` ...
``wait_cross_flag``) or inserted with ``pass_configs={"tl.ascend_auto_sync": True}``. What the
operations mean is the interpreter's (``tegula/backends/npu/interp_rules.py``); which copy paths
exist and how big the memories are is the machine model's (``tegula/backends/npu/machine.py``).
"""
from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass
from typing import Any, Optional

from tegula.errors import KernelSyntaxError, KernelTypeError, ScopeError, ShapeError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import vecops
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.npu import (CORE_KINDS, HARD_EVENTS, BarrierAll, CoreScope, Mma, NpuKernel,
                           PipeBarrier, SetCrossFlag, SetFlag, VecOp, WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import Copy, Stmt, seq
from tegula.ir.visitor import post_order_visit
from tegula.language import semantic
from tegula.language.builder import DIALECT, KernelFrame, current, new_var
from tegula.language.primitives import _alloc, _emit_tile

__all__ = ["alloc_L1", "alloc_L0A", "alloc_L0B", "alloc_L0C", "alloc_ub", "Scope", "gemm_v0",
           "mma", "tile", "set_flag", "wait_flag", "pipe_barrier", "barrier_all",
           "set_cross_flag", "wait_cross_flag"]


# -- launch ------------------------------------------------------------------------------------

def enter_kernel(parser: Any, item: ast.withitem, body: list, grid: tuple) -> None:
    """``with T.Kernel(n, is_npu=True) as (cid, vid):`` — build an :class:`NpuKernel`."""
    b = parser.b
    if len(grid) != 1:
        raise KernelTypeError(f"T.Kernel(..., is_npu=True) takes one grid extent (the number of "
                              f"AI core groups), got {len(grid)}")
    tv = item.optional_vars
    names = ["cid", "vid"]
    if isinstance(tv, ast.Name):
        names = [tv.id, "vid"]
    elif isinstance(tv, (ast.Tuple, ast.List)) and len(tv.elts) == 2 \
            and all(isinstance(e, ast.Name) for e in tv.elts):
        names = [e.id for e in tv.elts]  # type: ignore[attr-defined]
    elif tv is not None:
        raise KernelSyntaxError("bind the NPU kernel's indices to plain names: `as (cid, vid)`")
    cid, vid = new_var(names[0]), new_var(names[1])
    frame = KernelFrame()
    frame.names.update(b.param_names)
    for n, v in zip(names, (cid, vid)):
        parser.locals[n] = v
        parser.bound_depth[n] = 0
    b.kernel = frame
    try:
        with b.frame() as stmts:
            parser.visit_body(body)
    finally:
        b.kernel = None
    b.emit(NpuKernel(grid, (1,), (cid,), tuple(frame.allocs), seq(stmts), frame.alloc_inits,
                     {"dialect": "a2a3", **frame.annotations}, sub_var=vid))


# -- memories ----------------------------------------------------------------------------------

def alloc_L1(shape: Any, dtype: Any) -> Buffer:
    """A tile in the cube core's L1 buffer."""
    return _alloc(shape, dtype, "l1", "T.alloc_L1")


def alloc_L0A(shape: Any, dtype: Any) -> Buffer:
    """A tile in L0A (the cube's left operand)."""
    return _alloc(shape, dtype, "l0a", "T.alloc_L0A")


def alloc_L0B(shape: Any, dtype: Any) -> Buffer:
    """A tile in L0B (the cube's right operand)."""
    return _alloc(shape, dtype, "l0b", "T.alloc_L0B")


def alloc_L0C(shape: Any, dtype: Any) -> Buffer:
    """A tile in L0C (the cube's accumulator)."""
    return _alloc(shape, dtype, "l0c", "T.alloc_L0C")


def alloc_ub(shape: Any, dtype: Any) -> Buffer:
    """A tile in the unified buffer of each vector core (one copy per AIV)."""
    return _alloc(shape, dtype, "ub", "T.alloc_ub")


# -- scopes ------------------------------------------------------------------------------------

@dataclass
class Scope:
    """``with T.Scope("C")`` (cube core) or ``T.Scope("V")`` (vector cores)."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in CORE_KINDS:
            raise KernelTypeError(f'T.Scope takes "C" (cube) or "V" (vector), got {self.kind!r}')

    def tegula_with(self, parser: Any, item: ast.withitem, body: list) -> None:
        b = parser.b
        k = b.kernel
        if k is None:
            raise KernelSyntaxError("T.Scope can only be used inside `with T.Kernel(..., is_npu=True)`")
        if getattr(b, "npu_scope", None) is not None:
            raise ScopeError(f'T.Scope("{self.kind}") cannot be nested in T.Scope("{b.npu_scope}")')
        b.npu_scope = self.kind
        try:
            with b.frame() as stmts:
                parser.visit_body(body)
        finally:
            b.npu_scope = None
        b.emit(CoreScope(self.kind, seq(stmts)))


# -- developer mode: memories inferred from use ------------------------------------------------
#
# In an NPU kernel, ``T.alloc_shared`` / ``T.alloc_fragment`` tiles have no NPU memory yet: each
# use by an operation that needs one (``T.tile.*``: UB, ``T.gemm_v0``: L1 / L0C, ``T.mma``: L0A /
# L0B / L0C) is recorded in the kernel annotation SCOPE_USES, and AssignNpuScopes gives the buffer
# that memory (a buffer claimed for two memories is an error naming both uses).

UNASSIGNED_SCOPES = ("shared", "shared.dyn", "local.fragment")
SCOPE_USES = "npu_scope_uses"  # kernel annotation: Buffer -> [(scope, what, span)]


def claim_scope(region: Any, want: str, what: str) -> bool:
    """True when ``region``'s buffer is in memory ``want``, or has no NPU memory yet (then the use
    is recorded for AssignNpuScopes); False when it is in another memory."""
    from tegula.ir.span import current_span

    buf = region.buffer if isinstance(region, BufferRegion) else region
    if buf.scope == want:
        return True
    if buf.scope not in UNASSIGNED_SCOPES:
        return False
    k = current(what).kernel
    if k is not None:
        k.annotations.setdefault(SCOPE_USES, {}).setdefault(buf, []).append((want, what, current_span()))
    return True


# -- T.copy's Ascend flags ---------------------------------------------------------------------

def _bool_flag(v: Any, name: str) -> bool:
    if isinstance(v, E.Const):
        v = v.value
    if not isinstance(v, (bool, int)) or isinstance(v, float):
        raise KernelTypeError(f"T.copy: {name} must be a Python bool, got {v!r}",
                              hint=f"write {name}=True or {name}=False")
    return bool(v)


def flagged_copy(src: Any, dst: Any, enable_relu: Any, transpose: Any) -> None:
    """``T.copy(src, dst, enable_relu=, transpose=)`` as TileLang-Ascend defines them:
    ``transpose=True`` moves an L1 tile into L0A / L0B transposed (``dst[j, i] = src[i, j]``, the
    L1 -> L0 load's transpose); ``enable_relu=True`` is the fixpipe's ReLU on the way out of L0C
    (``dst = max(src, 0)``). The flags are the copy's annotations ``"transpose_tile"`` / ``"relu"``."""
    relu, tr = _bool_flag(enable_relu, "enable_relu"), _bool_flag(transpose, "transpose")

    def make() -> Copy:
        if not tr:
            c = semantic.copy(src, dst)
        else:
            s_ = semantic.to_region(src, "T.copy source")
            d_ = semantic.to_region(dst, "T.copy destination")
            c = Copy(s_, d_)
            ss, ds = s_.tile_shape(), d_.tile_shape()
            if len(ss) != 2 or len(ds) != 2 or not semantic.same_shape(ss[::-1], ds):
                raise ShapeError(f"T.copy(transpose=True): the destination tile "
                                 f"{semantic.shape_str(ds)} of '{d_.buffer.name}' must be the "
                                 f"transpose of the 2-d source tile {semantic.shape_str(ss)} of "
                                 f"'{s_.buffer.name}'")
        if tr:
            if not claim_scope(c.src, "l1", "T.copy(transpose=True)") or \
                    c.dst.buffer.scope not in ("l0a", "l0b") + UNASSIGNED_SCOPES:
                raise ScopeError(f"T.copy(transpose=True) moves an L1 tile into L0A / L0B; got "
                                 f"{c.src.buffer.scope} '{c.src.buffer.name}' -> {c.dst.buffer.scope} "
                                 f"'{c.dst.buffer.name}'",
                                 hint="transpose on the L1 -> L0 load (T.alloc_L1 -> T.alloc_L0B)")
            if c.dst.buffer.scope in UNASSIGNED_SCOPES:
                claim_scope(c.dst, "l0b", "T.copy(transpose=True)")
        if relu and not claim_scope(c.src, "l0c", "T.copy(enable_relu=True)"):
            raise ScopeError(f"T.copy(enable_relu=True) is the fixpipe's ReLU on a copy out of L0C; "
                             f"the source '{c.src.buffer.name}' is in {c.src.buffer.scope}",
                             hint="apply T.tile.relu to a UB tile instead")
        ann = {"relu": True} if relu else {}
        if tr:  # "transpose": the emitters' L1 -> L0 load of a transposed operand
            ann.update({"transpose": True, "transpose_tile": True})
        return Copy(c.src, c.dst, ann, span=c.span) if ann else c
    _emit_tile("T.copy", make)


# -- cube --------------------------------------------------------------------------------------

def _regions(what: str, *xs: Any) -> list[BufferRegion]:
    return [semantic.to_region(x, f"{what} operand {n}") for x, n in zip(xs, "ABC")]


def _check_mma(what: str, a: BufferRegion, b: BufferRegion, c: BufferRegion, ta: bool, tb: bool,
               scopes: tuple) -> None:
    for r, want, n in zip((a, b, c), scopes, "ABC"):
        if not claim_scope(r, want, what):
            raise ScopeError(f"{what}: operand {n} ('{r.buffer.name}') is in {r.buffer.scope}; "
                             f"it must be in {want.upper()}",
                             hint=f"allocate it with T.alloc_{want.upper() if want != 'ub' else 'ub'}")
    sa, sb, sc = a.tile_shape(), b.tile_shape(), c.tile_shape()
    if len(sa) != 2 or len(sb) != 2 or len(sc) != 2:
        raise ShapeError(f"{what}: operands must be 2-d tiles")
    M, Ka = (sa[1], sa[0]) if ta else sa
    Kb, N = (sb[1], sb[0]) if tb else sb
    if not semantic.same_shape((Ka,), (Kb,)) or not semantic.same_shape((M, N), sc):
        raise ShapeError(f"{what}: op(A) {semantic.shape_str((M, Ka))} @ op(B) "
                         f"{semantic.shape_str((Kb, N))} does not give C {semantic.shape_str(sc)}")


def gemm_v0(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
            init: bool = False) -> None:
    """``C (+)= op(A) @ op(B)`` with A and B in L1 and C in L0C (moved through L0A/L0B)."""
    def make() -> Mma:
        a, b, c = _regions("T.gemm_v0", A, B, C)
        _check_mma("T.gemm_v0", a, b, c, transpose_A, transpose_B, ("l1", "l1", "l0c"))
        return Mma(a, b, c, bool(transpose_A), bool(transpose_B), _flag(init))
    _emit_tile("T.gemm_v0", make)


def mma(A: Any, B: Any, C: Any, init: bool = False) -> None:
    """``C (+)= A @ B`` with A in L0A, B in L0B and C in L0C."""
    def make() -> Mma:
        a, b, c = _regions("T.mma", A, B, C)
        _check_mma("T.mma", a, b, c, False, False, ("l0a", "l0b", "l0c"))
        return Mma(a, b, c, False, False, _flag(init))
    _emit_tile("T.mma", make)


def _flag(x: Any) -> Any:
    if isinstance(x, (bool, int)):
        return bool(x)
    return E.cast("bool", x)  # init=(k == 0): decided when the kernel runs


# -- vector library ----------------------------------------------------------------------------
#
# Every T.tile.<op> is a row of the vector-op table (tegula/ir/vecops.py): its parameters, its
# shape rule and its attributes come from there; this is the one function that builds them.

def _vec(op: str, args: tuple, kwargs: dict) -> None:
    row = vecops.VEC_OPS[op]
    what = f"T.tile.{op}"
    sig = _signature(row)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise KernelTypeError(f"{what}: {e}", hint=f"the signature is {row.signature()}") from None
    bound.apply_defaults()
    values = dict(bound.arguments)
    dst = values.pop("dst")

    def make() -> VecOp:
        d = semantic.to_region(dst, f"{what} destination")
        ops: list = []
        attrs: dict = {}
        for name, v in values.items():
            if name in row.ignore:
                continue
            if name in row.attrs or name == "count":
                if v is not None and not _is_default(v, sig.parameters[name].default):
                    attrs[name] = _attr(v, name, what)   # defaults stay implicit
                continue
            if name in row.scalars and isinstance(v, (Buffer, BufferRegion)) and _numel(v) == 1:
                r = semantic.to_region(v, f"{what} operand '{name}'")
                v = r.buffer[tuple(r.starts)]     # a one-element tile: its value
            if isinstance(v, (Buffer, BufferRegion)) and not (isinstance(v, Buffer) and v.scope == "local.var"):
                ops.append(semantic.to_region(v, f"{what} operand '{name}'"))
            elif v is None:
                if sig.parameters[name].default is None:
                    continue      # an optional operand left out
                raise KernelTypeError(f"{what}: '{name}' is missing", hint=f"the signature is {row.signature()}")
            else:
                # a scalar takes the dtype of the tile before it (compare's and select's values
                # are not the mask's), else the destination's; counts are int32
                tiles = [o for o in ops if isinstance(o, BufferRegion)]
                like = dt.int32 if name in row.counts else tiles[-1].dtype if tiles else d.dtype
                ops.append(E.as_expr(v, like=like))
        for r in [d] + [o for o in ops if isinstance(o, BufferRegion)]:
            if not claim_scope(r, "ub", what):
                raise ScopeError(f"{what}: '{r.buffer.name}' is in {r.buffer.scope}; the vector "
                                 "library works on UB tiles", hint="allocate it with T.alloc_ub")
        ds = d.tile_shape()
        if row.check is not None:
            shapes = [_const_shape(o.tile_shape()) if isinstance(o, BufferRegion) else None for o in ops]
            try:
                attrs = {**attrs, **row.check(_const_shape(ds), shapes, attrs)}
            except vecops.VecOpError as e:
                raise ShapeError(f"{what}: {e}", hint=e.hint or f"the signature is {row.signature()}") from None
        else:
            for r in ops:
                if not isinstance(r, BufferRegion):
                    continue
                rs = r.tile_shape()
                if not (semantic.same_shape(rs, ds) or _row_broadcast(rs, ds)):
                    raise ShapeError(f"{what}: operand '{r.buffer.name}' {semantic.shape_str(rs)} does not "
                                     f"match the destination '{d.buffer.name}' {semantic.shape_str(ds)}",
                                     hint="operands have the destination's shape, or one value per row")
        return VecOp(op, d, tuple(ops), attrs)
    _emit_tile(what, make)


def _signature(row: Any) -> inspect.Signature:
    ps = [inspect.Parameter("dst", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    defaults = row.defaults()
    for name in row.param_names():
        ps.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=defaults.get(name, inspect.Parameter.empty)))
    return inspect.Signature(ps)


def _attr(v: Any, name: str, what: str) -> Any:
    """An attribute value: a Python value, or a constant expression's value."""
    if isinstance(v, E.Const):
        return v.value
    if isinstance(v, E.Expr):
        raise KernelTypeError(f"{what}: '{name}' must be known when the kernel is built, got an "
                              "expression of the kernel's values")
    return v


def _is_default(v: Any, default: Any) -> bool:
    """A Python value equal to the parameter's default (an IR value never is)."""
    return v is default or (isinstance(v, (str, int, float)) and type(v) is type(default) and v == default)


def _numel(v: Any) -> Optional[int]:
    """The elements of a tile operand when known when the kernel is built."""
    shape = _const_shape(v.shape if isinstance(v, Buffer) else v.tile_shape())
    n = 1
    for e in shape:
        if not isinstance(e, int):
            return None
        n *= e
    return n


def _const_shape(shape: Any) -> tuple:
    out = []
    for e in shape:
        if isinstance(e, E.Const):
            e = int(e.value)
        out.append(e)
    return tuple(out)


def _row_broadcast(src: tuple, dst: tuple) -> bool:
    """A (R,) or (R, 1) operand broadcasts along the rows of an (R, C) destination."""
    return len(dst) == 2 and len(src) == 1 and semantic.same_shape(src, dst[:1])


def _make_tile_op(op: str) -> Any:
    def f(*args: Any, **kwargs: Any) -> None:
        _vec(op, args, kwargs)
    f.__name__ = op
    f.__doc__ = f"``{vecops.VEC_OPS[op].signature()}`` on UB tiles (tegula/ir/vecops.py)."
    return f


class _Tile:
    """``T.tile.*``: vector instructions on UB tiles, destination first; one per row of the
    vector-op table (:mod:`tegula.ir.vecops`). A tile operand has the destination's shape, or one
    value per row (broadcast along the row); a scalar operand is any expression."""

    def __getattr__(self, name: str) -> Any:
        if name in vecops.VEC_OPS:
            return _make_tile_op(name)
        raise KernelTypeError(f"T.tile has no operation '{name}'",
                              hint="available: " + ", ".join(sorted(vecops.VEC_OPS) + ["clear"]))

    @staticmethod
    def clear(dst: Any) -> None:
        _vec("fill", (dst, 0), {})


tile = _Tile()


# -- sync by hand ------------------------------------------------------------------------------

_PIPES = {"s": "S", "v": "V", "m": "M", "mte1": "MTE1", "mte2": "MTE2", "mte3": "MTE3", "fix": "FIX"}


def _pipe(p: Any, what: str) -> str:
    key = str(getattr(p, "value", p)).lower().removeprefix("pipe_")
    if key not in _PIPES:
        raise KernelTypeError(f"{what}: unknown pipe {p!r}; pipes are " + ", ".join(f'"{k}"' for k in _PIPES))
    return _PIPES[key]


def _sync(what: str, node: Any) -> None:
    b = current(what)
    b.require_kernel(what)
    b.emit(node)


def _event(src: Any, dst: Any, what: str) -> tuple[str, str]:
    s, d = _pipe(src, what), _pipe(dst, what)
    if (s, d) not in HARD_EVENTS:
        raise KernelTypeError(f"{what}: there is no HardEvent {s}_{d}",
                              hint="events connect two different pipes, e.g. (\"mte2\", \"v\")")
    return s, d


def set_flag(src: Any, dst: Any, event_id: Any = 0) -> None:
    """Signal pipe ``dst`` once every earlier instruction on pipe ``src`` is done."""
    s, d = _event(src, dst, "T.set_flag")
    _sync("T.set_flag", SetFlag(s, d, E.as_expr(event_id)))


def wait_flag(src: Any, dst: Any, event_id: Any = 0) -> None:
    """Make pipe ``dst`` wait for the matching ``set_flag``."""
    s, d = _event(src, dst, "T.wait_flag")
    _sync("T.wait_flag", WaitFlag(s, d, E.as_expr(event_id)))


def pipe_barrier(pipe: Any) -> None:
    """Later instructions of ``pipe`` wait for the earlier ones (``"all"``: every pipe)."""
    if str(getattr(pipe, "value", pipe)).lower().removeprefix("pipe_") == "all":
        _sync("T.pipe_barrier", BarrierAll())
        return
    _sync("T.pipe_barrier", PipeBarrier(_pipe(pipe, "T.pipe_barrier")))


def barrier_all() -> None:
    """Every pipe of this core drains before the code after it starts."""
    _sync("T.barrier_all", BarrierAll())


def set_cross_flag(pipe: Any, flag: Any, mode: int = 2) -> None:
    """After earlier work on ``pipe``, count one on cross-core ``flag`` of the partner cores."""
    if mode not in (1, 2):
        raise KernelTypeError(f"T.set_cross_flag: mode {mode!r} is not supported; use 2 (cube <-> "
                              "both vector cores) or 1 (between the two vector cores)")
    _sync("T.set_cross_flag", SetCrossFlag(_pipe(pipe, "T.set_cross_flag"), E.as_expr(flag), int(mode)))


def wait_cross_flag(flag: Any) -> None:
    """Wait until cross-core ``flag`` has been set, and take one count."""
    _sync("T.wait_cross_flag", WaitCrossFlag(E.as_expr(flag)))


# -- the 950 dialect (upstream TileLang's tilelang.ascend names) -------------------------------
#
#     with T.Kernel(num_blocks) as bx:
#         A_l1 = T.alloc_l1((128, 64), "float16")
#         with T.Cube():
#             ...
#         with T.Vector(vector=2) as sid:
#             ...
#
# A kernel whose body uses T.Cube or T.Vector is an NPU kernel; ``T.alloc_shared`` in it is UB.

_SUB_VAR = "npu_sub_var"
_DIALECT = DIALECT


def is_npu_frame(frame: KernelFrame) -> bool:
    """True when the kernel being built used the 950 dialect's core scopes."""
    return frame.annotations.get(_DIALECT) == "a5"


def finish_kernel(grid: tuple, block_vars: tuple, frame: KernelFrame, body: Any) -> NpuKernel:
    """The NpuKernel of a 950-dialect ``with T.Kernel(num_blocks) as bx`` block."""
    if len(grid) != 1:
        raise KernelTypeError(f"an Ascend 950 kernel takes one grid extent (T.Kernel(num_blocks)), "
                              f"got {len(grid)}")
    ann = dict(frame.annotations)
    sub = ann.pop(_SUB_VAR, None)
    if sub is None:
        sub = new_var("sid")
    return NpuKernel(grid, (1,), block_vars, tuple(frame.allocs), body, frame.alloc_inits, ann,
                     sub_var=sub)


def _mark_a5(parser: Any, what: str) -> KernelFrame:
    k = parser.b.kernel
    if k is None:
        raise KernelSyntaxError(f"{what} can only be used inside `with T.Kernel(...)`")
    k.annotations[_DIALECT] = "a5"
    return k


@dataclass
class _CoreBlock:
    kind: str
    what: str

    def tegula_with(self, parser: Any, item: ast.withitem, body: list) -> None:
        k = _mark_a5(parser, self.what)
        if item.optional_vars is not None:
            if not isinstance(item.optional_vars, ast.Name) or self.kind != "V":
                raise KernelSyntaxError(f"bind the vector-core index with `with {self.what} as sid:`")
            if _SUB_VAR not in k.annotations:
                k.annotations[_SUB_VAR] = new_var(item.optional_vars.id)
            sub = k.annotations[_SUB_VAR]
            parser.locals[item.optional_vars.id] = sub
            parser.bound_depth[item.optional_vars.id] = 0
        Scope(self.kind).tegula_with(parser, item, body)


def Cube() -> _CoreBlock:
    """``with T.Cube():`` code for the cube core (950 dialect)."""
    return _CoreBlock("C", "T.Cube()")


def Vector(vector: int = 2) -> _CoreBlock:
    """``with T.Vector(vector=2) as sid:`` code for each of the two vector cores (950 dialect)."""
    if vector != 2:
        raise KernelTypeError(f"T.Vector: vector={vector!r}; an AI core group has 2 vector cores")
    return _CoreBlock("V", "T.Vector()")


@dataclass
class _Inline:
    """A block that only annotates its body (``T.SimtVF``, ``T.SimdVF``, ``T.Task``, ``T.Stage``):
    its body is built in place. ``hint`` (T.Task's latency / ii, T.Stage's stage) is recorded in
    the kernel annotation ``schedule_hints`` under the source line of every statement of the
    body; AutoSchedule reads it."""

    what: str
    hint: Any = None

    def tegula_with(self, parser: Any, item: ast.withitem, body: list) -> None:
        if item.optional_vars is not None:
            raise KernelSyntaxError(f"{self.what} binds no name")
        if not self.hint:
            parser.visit_body(body)
            return
        b = parser.b
        k = b.require_kernel(self.what)
        with b.frame() as stmts:
            parser.visit_body(body)
        hints = k.annotations.setdefault(SCHEDULE_HINTS, {})
        for st in stmts:
            post_order_visit(st, lambda n: hints.setdefault(n.span.line, {}).update(self.hint)
                             if isinstance(n, Stmt) and getattr(n, "span", None) is not None else None)
        for st in stmts:
            b.emit(st)


SCHEDULE_HINTS = "schedule_hints"  # kernel annotation: source line -> {"latency", "ii", "stage"}


def _count(v: Any, what: str, name: str, low: int) -> Any:
    if v is None:
        return None
    if isinstance(v, E.Const):
        v = v.value
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise KernelTypeError(f"{what}: {name} must be an integer >= {low}, got {v!r}")
    return v


def SimtVF(threads: Any = None) -> _Inline:
    """``with T.SimtVF(threads=...):`` TileLang-Ascend: run the body (usually ``T.Parallel``
    loops) on the vector core in SIMT mode; ``threads`` is accepted as a hint. The body is
    built in place, so it computes the same on every target."""
    return _Inline("T.SimtVF")


def SimdVF() -> _Inline:
    """``with T.SimdVF():`` TileLang-Ascend: a vector-function region for raw ``T.simd.*``
    operations. The body is built in place, so it computes the same on every target."""
    return _Inline("T.SimdVF")


def Task(latency: Any = None, ii: Any = None) -> _Inline:
    """``with T.Task(latency=, ii=):`` the operations inside cost ``latency`` cycles to their
    result and hold their pipe ``ii`` cycles (overriding the cost model in AutoSchedule)."""
    hint = {}
    if _count(latency, "T.Task", "latency", 1) is not None:
        hint["latency"] = _count(latency, "T.Task", "latency", 1)
    if _count(ii, "T.Task", "ii", 1) is not None:
        hint["ii"] = _count(ii, "T.Task", "ii", 1)
    return _Inline("T.Task", hint)


def Stage(k: Any = 0) -> _Inline:
    """``with T.Stage(k):`` the operations inside run in pipeline stage ``k`` (start // II == k)
    of the modulo schedule AutoSchedule builds."""
    return _Inline("T.Stage", {"stage": _count(k, "T.Stage", "k", 0)})


alloc_l1, alloc_l0a, alloc_l0b, alloc_l0c = alloc_L1, alloc_L0A, alloc_L0B, alloc_L0C


def dual_copy(src: Any, dst: Any) -> None:
    """``T.dual_copy(src, dst)`` inside ``T.Vector``: a GM tile split by rows between the two
    vector cores. Vector core ``sid`` moves rows ``[sid * h, (sid + 1) * h)`` of the GM side, ``h``
    being the rows of its UB tile; the GM side is a start element (``C[row, col]``) or a region of
    ``2 * h`` rows. (L0C -> UB through the dual FixPipe is not built.)"""
    from tegula.ir.stmt import Copy

    what = "T.dual_copy"
    b = current(what)
    k = b.require_kernel(what)
    if getattr(b, "npu_scope", None) != "V" or k.annotations.get(_DIALECT) != "a5":
        raise ScopeError("T.dual_copy splits a tile between the two vector cores: use it inside "
                         "`with T.Vector(vector=2) as sid:`")

    def make() -> Copy:
        def scope(x: Any) -> str:
            if isinstance(x, Buffer):
                return x.scope
            return x.buffer.scope if isinstance(x, (BufferRegion, E.BufferLoad)) else ""
        s_ub = scope(src) != "global"
        ub = semantic.to_region(src if s_ub else dst, f"{what} UB operand")
        if ub.buffer.scope in ("global", "l0c", "l1", "l0a", "l0b"):
            raise ScopeError(f"{what} moves a tile between GM and the UB of each vector core; "
                             f"'{ub.buffer.name}' is in {ub.buffer.scope}",
                             hint="L0C -> UB through the dual FixPipe is not built yet; hand the tile "
                                  "over through a GM workspace")
        g_in = dst if s_ub else src
        shape = ub.tile_shape()
        if len(shape) != 2:
            raise ShapeError(f"{what}: the UB tile must be 2-d (rows split between the cores), got "
                             f"{semantic.shape_str(shape)}")
        h = shape[0]
        if isinstance(g_in, E.BufferLoad):
            g = semantic.to_region(g_in, what, like=ub)
        else:
            g = semantic.to_region(g_in, f"{what} GM operand")
            ext = list(g.extents)
            if not semantic.same_shape((ext[-2],), (h * 2,)):
                raise ShapeError(f"{what}: the GM region has {ext[-2]} rows; the two vector cores "
                                 f"take {h} each, so it needs {2 * h}")
            g = BufferRegion(g.buffer, g.ranges[:-2] + ((g.starts[-2], h), g.ranges[-1]))
        if g.buffer.scope != "global":
            raise ScopeError(f"{what}: '{g.buffer.name}' is not a GM tensor")
        if _SUB_VAR not in k.annotations:
            k.annotations[_SUB_VAR] = new_var("sid")
        sid = k.annotations[_SUB_VAR]
        ranges = list(g.ranges)
        ranges[-2] = (ranges[-2][0] + sid * h, ranges[-2][1])
        g = BufferRegion(g.buffer, tuple(ranges))
        return Copy(ub, g) if s_ub else Copy(g, ub)
    _emit_tile(what, make)


def annotate_buffer_versions(versions: dict) -> None:
    """How many versions each buffer gets (a hint for multi-buffering; recorded)."""
    k = current("T.annotate_buffer_versions").require_kernel("T.annotate_buffer_versions")
    if not isinstance(versions, dict) or not all(isinstance(b, Buffer) for b in versions):
        raise KernelTypeError("T.annotate_buffer_versions takes a dict {buffer: versions}")
    k.annotations.setdefault("buffer_versions", {}).update({b.name: int(n) for b, n in versions.items()})


def annotate_address(addresses: dict) -> None:
    """``T.annotate_address({buf: byte_offset})``: place NPU buffers at these byte offsets of
    their memory instead of PlanNpuMemory's; an offset that breaks the memory's alignment, or a
    buffer that then ends past its capacity, is an error at this line."""
    from tegula.ir.npu import NPU_SCOPES
    from tegula.ir.span import current_span

    k = current("T.annotate_address").require_kernel("T.annotate_address")
    if not isinstance(addresses, dict):
        raise KernelTypeError("T.annotate_address takes a dict {buffer: byte offset}")
    for b, off in addresses.items():
        if not isinstance(b, Buffer) or b.scope not in NPU_SCOPES:
            raise KernelTypeError(f"T.annotate_address: {getattr(b, 'name', b)!r} is not an NPU "
                                  "buffer (T.alloc_L1 / L0A / L0B / L0C / ub)")
        if isinstance(off, bool) or not isinstance(off, int) or off < 0:
            raise KernelTypeError(f"T.annotate_address: the offset of '{b.name}' must be a "
                                  f"non-negative Python int, got {off!r}")
        k.annotations.setdefault("addresses", {})[b.name] = (int(off), current_span())


def _event_name(event: Any, what: str) -> tuple[str, str]:
    parts = str(event).upper().split("_")
    if len(parts) != 2:
        raise KernelTypeError(f'{what}: expected an event like "MTE2_MTE1", got {event!r}')
    return _event(parts[0], parts[1], what)


def ascend_set_flag(event: Any, event_id: Any = 0) -> None:
    """``T.ascend_set_flag("MTE2_MTE1", id)`` (950 dialect spelling of T.set_flag)."""
    s, d = _event_name(event, "T.ascend_set_flag")
    _sync("T.ascend_set_flag", SetFlag(s, d, E.as_expr(event_id)))


def ascend_wait_flag(event: Any, event_id: Any = 0) -> None:
    """``T.ascend_wait_flag("MTE2_MTE1", id)``."""
    s, d = _event_name(event, "T.ascend_wait_flag")
    _sync("T.ascend_wait_flag", WaitFlag(s, d, E.as_expr(event_id)))


def ascend_pipe_barrier(pipe: Any) -> None:
    """``T.ascend_pipe_barrier("PIPE_MTE2")``."""
    pipe_barrier(pipe)


def ascend_cross_core_set_flag(mode: int, pipe: Any, flag: Any) -> None:
    """``T.ascend_cross_core_set_flag(mode, "PIPE_FIX", id)``."""
    set_cross_flag(pipe, flag, mode)


def ascend_cross_core_wait_flag(flag: Any) -> None:
    """``T.ascend_cross_core_wait_flag(id)``."""
    wait_cross_flag(flag)


__all__ += ["dual_copy", "Cube", "Vector", "SimtVF", "SimdVF", "Task", "Stage", "alloc_l1", "alloc_l0a",
            "alloc_l0b", "alloc_l0c", "annotate_buffer_versions", "annotate_address", "ascend_set_flag",
            "ascend_wait_flag", "ascend_pipe_barrier", "ascend_cross_core_set_flag",
            "ascend_cross_core_wait_flag"]
