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
from dataclasses import dataclass
from typing import Any

from tegula.errors import KernelSyntaxError, KernelTypeError, ScopeError, ShapeError
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.npu import (CORE_KINDS, HARD_EVENTS, BarrierAll, CoreScope, Mma, NpuKernel,
                           PipeBarrier, SetCrossFlag, SetFlag, VecOp, WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import seq
from tegula.language import semantic
from tegula.language.builder import KernelFrame, current, new_var
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


# -- cube --------------------------------------------------------------------------------------

def _regions(what: str, *xs: Any) -> list[BufferRegion]:
    return [semantic.to_region(x, f"{what} operand {n}") for x, n in zip(xs, "ABC")]


def _check_mma(what: str, a: BufferRegion, b: BufferRegion, c: BufferRegion, ta: bool, tb: bool,
               scopes: tuple) -> None:
    for r, want, n in zip((a, b, c), scopes, "ABC"):
        if r.buffer.scope != want:
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

_UNARY = ("exp", "ln", "abs", "reciprocal", "sqrt", "rsqrt", "relu", "sigmoid", "silu")
_BINARY = ("add", "sub", "mul", "div", "max", "min")


def _vec(op: str, dst: Any, *srcs: Any, **attrs: Any) -> None:
    what = f"T.tile.{op}"

    def make() -> VecOp:
        d = semantic.to_region(dst, f"{what} destination")
        ops: list = []
        for s in srcs:
            if isinstance(s, (Buffer, BufferRegion)) and not (isinstance(s, Buffer) and s.scope == "local.var"):
                r = semantic.to_region(s, f"{what} operand")
                rs, ds = r.tile_shape(), d.tile_shape()
                if not (semantic.same_shape(rs, ds) or _row_broadcast(rs, ds)):
                    raise ShapeError(f"{what}: operand '{r.buffer.name}' {semantic.shape_str(rs)} does not "
                                     f"match the destination '{d.buffer.name}' {semantic.shape_str(ds)}",
                                     hint="operands have the destination's shape, or one value per row")
                ops.append(r)
            else:
                ops.append(E.as_expr(s, like=d.dtype))
        for r in [d] + [o for o in ops if isinstance(o, BufferRegion)]:
            if r.buffer.scope != "ub":
                raise ScopeError(f"{what}: '{r.buffer.name}' is in {r.buffer.scope}; the vector "
                                 "library works on UB tiles", hint="allocate it with T.alloc_ub")
        return VecOp(op, d, tuple(ops), dict(attrs))
    _emit_tile(what, make)


def _row_broadcast(src: tuple, dst: tuple) -> bool:
    """A (R,) or (R, 1) operand broadcasts along the rows of an (R, C) destination."""
    return len(dst) == 2 and len(src) == 1 and semantic.same_shape(src, dst[:1])


class _Tile:
    """``T.tile.*``: vector instructions on UB tiles, destination first. A tile operand has the
    destination's shape, or one value per row (broadcast along the row); a scalar operand is
    any expression."""

    def __getattr__(self, name: str) -> Any:
        raise KernelTypeError(f"T.tile has no operation '{name}'",
                              hint="available: " + ", ".join(_UNARY + _BINARY + ("fill", "cast",
                                                                                "copy", "axpy")))

    @staticmethod
    def fill(dst: Any, value: Any) -> None:
        _vec("fill", dst, value)

    @staticmethod
    def clear(dst: Any) -> None:
        _vec("fill", dst, 0)

    @staticmethod
    def cast(dst: Any, src: Any, mode: str = "CAST_RINT", count: Any = None) -> None:
        _vec("cast", dst, src)

    @staticmethod
    def copy(dst: Any, src: Any) -> None:
        _vec("copy", dst, src)

    @staticmethod
    def axpy(dst: Any, src: Any, alpha: Any) -> None:
        """``dst += alpha * src``."""
        _vec("axpy", dst, src, alpha)

    @staticmethod
    def leaky_relu(dst: Any, src: Any, alpha: Any) -> None:
        _vec("leaky_relu", dst, src, alpha)


def _make_unary(op: str) -> Any:
    def f(dst: Any, src: Any) -> None:
        _vec(op, dst, src)
    f.__name__ = op
    f.__doc__ = f"``dst = {op}(src)`` elementwise on UB."
    return staticmethod(f)


def _make_binary(op: str) -> Any:
    def f(dst: Any, a: Any, b: Any) -> None:
        _vec(op, dst, a, b)
    f.__name__ = op
    f.__doc__ = f"``dst = {op}(a, b)`` elementwise on UB (b a tile, a per-row tile or a scalar)."
    return staticmethod(f)


for _op in _UNARY:
    setattr(_Tile, _op, _make_unary(_op))
for _op in _BINARY:
    setattr(_Tile, _op, _make_binary(_op))

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
