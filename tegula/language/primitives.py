"""The ``T.*`` primitives users call inside kernels.

Each one either returns an expression or appends a statement to the active builder; the rules
(shapes, scopes, dtypes) live in :mod:`tegula.language.semantic`.
"""
from __future__ import annotations

import builtins
import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from tegula.errors import (DTypeError, KernelTypeError, LayoutError, ScopeError, ShapeError,
                           UnsupportedError)
from tegula.ir import expr as E
from tegula.ir.buffer import FRAGMENT, LOCAL, SHARED, SHARED_DYN, Buffer, BufferRegion
from tegula.ir import dtype as dt
from tegula.ir.stmt import (Atomic, BufferStore, Copy, CumSum, Evaluate, Fill, Gemm,
                             IfThenElse, Print, Reduce, Stmt, seq)
from tegula.ir.tile_rules import TILE_RULES
from tegula.language import semantic
from tegula.language.semantic import shape_str
from tegula.language.builder import current

# the T.* names (``tegula.language`` exports exactly these)
__all__ = ["And", "Cast", "GemmWarpPolicy", "Kernel", "Not", "Or", "Parallel", "Pipelined",
           "Select", "Serial", "abs", "alloc_fragment", "alloc_local", "alloc_shared", "alloc_var",
           "annotate_layout", "annotate_min_blocks_per_sm", "atomic_add", "atomic_max", "atomic_min", "cast", "ceil", "ceildiv",
           "clamp", "clear", "copy", "cos", "cummax", "cumsum", "erf", "exp", "exp2", "exp10",
           "expm1", "fill", "floor", "floordiv", "floormod", "fmod", "gemm", "grid",
           "if_then_else", "infinity", "isinf", "isnan", "log", "log1p", "log2", "log10", "max",
           "max_value", "min", "min_value", "ninf", "pow", "print", "reduce_absmax",
           "reduce_abssum", "reduce_bitand", "reduce_bitor", "reduce_bitxor", "reduce_max",
           "reduce_min", "reduce_sum", "round", "rsqrt", "serial", "sigmoid", "sin", "sqrt",
           "sync_threads", "named_barrier_arrive", "tan", "tanh", "trunc", "truncdiv", "truncmod", "unroll", "use_swizzle",
           "vectorized", "alloc_barrier", "all_of", "annotate_safe_value", "any_of", "assume",
           "barrier_arrive", "barrier_wait", "get_thread_binding", "isfinite", "mbarrier_arrive",
           "mbarrier_expect_tx", "mbarrier_wait_parity", "pdl_sync", "pdl_trigger", "reinterpret",
           "shfl_xor"]


# ---------------------------------------------------------------------------------------------
# Launch, loops
# ---------------------------------------------------------------------------------------------

@dataclass
class KernelSpec:
    """``T.Kernel(*grid, threads=...)``: used as ``with T.Kernel(...) as (bx, by):``."""

    grid: tuple
    threads: tuple
    npu: bool = False  # T.Kernel(n, is_npu=True): Ascend AI core groups (tegula.language.ascend)
    cluster: Optional[tuple] = None  # T.Kernel(..., cluster_dims=): (cx, cy) blocks per cluster

    def __enter__(self) -> Any:
        raise KernelTypeError("T.Kernel can only be used in a `with` statement inside a kernel function")

    def __exit__(self, *a: Any) -> None:  # pragma: no cover - never entered
        pass


# blocks of a thread block cluster the GPU guarantees to co-schedule (sm_90's portable limit)
MAX_CLUSTER_BLOCKS = 8


def _cluster_dims(cluster_dims: Any, grid: list) -> Optional[tuple]:
    """``cluster_dims`` of ``T.Kernel`` as (cx, cy), or None for clusters of one block."""
    if cluster_dims is None:
        return None
    dims = [cluster_dims] if isinstance(cluster_dims, int) else cluster_dims
    if not (isinstance(dims, (tuple, list)) and 1 <= len(dims) <= 3
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)):
        raise KernelTypeError(f"T.Kernel: cluster_dims must be a positive int or a tuple of up to 3, "
                              f"got {cluster_dims!r}")
    dims = (list(dims) + [1, 1])[:3]
    if dims[2] != 1:
        raise KernelTypeError(f"T.Kernel: clusters along the grid's z dimension are not supported "
                              f"(cluster_dims={tuple(dims)})", hint="cluster along x and y")
    if dims[0] * dims[1] > MAX_CLUSTER_BLOCKS:
        raise KernelTypeError(f"T.Kernel: a cluster of {dims[0] * dims[1]} blocks is more than the "
                              f"{MAX_CLUSTER_BLOCKS} a GPU co-schedules", hint="use at most 8 blocks per cluster")
    for axis, (c, g) in enumerate(zip(dims, list(grid) + [1, 1])):
        if c > 1 and not isinstance(g, int):
            raise KernelTypeError(f"T.Kernel: grid dimension {axis} ({g}) must be a constant to be cut into "
                                  f"clusters of {c} blocks along it", hint="clusters need a static grid")
        if c > 1 and g % c:
            raise KernelTypeError(f"T.Kernel: grid dimension {axis} ({g}) is not a multiple of the cluster's "
                                  f"{c} blocks along it", hint="launch a whole number of clusters")
    return None if dims == [1, 1, 1] else (dims[0], dims[1])


def Kernel(*grid: Any, threads: Any = 128, prelude: Any = None, is_cpu: bool = False,
           is_npu: bool = False, cluster_dims: Any = None) -> KernelSpec:
    """``with T.Kernel(gx, gy, threads=..., cluster_dims=...) as (bx, by):`` launches a grid of
    blocks; ``cluster_dims`` (sm_90: an int or (cx, cy)) groups them into thread block clusters
    (``Kernel.annotations["cluster"]``). Raises KernelTypeError for bad extents, threads or
    cluster dimensions."""
    if not 1 <= len(grid) <= 3:
        raise KernelTypeError(f"T.Kernel takes 1 to 3 grid dimensions, got {len(grid)}")
    g = []
    for x in grid:
        if isinstance(x, float) or isinstance(x, bool):
            raise KernelTypeError(f"T.Kernel: grid extents must be integers, got {x!r}")
        e = E.as_expr(x)
        if not e.dtype.is_int:
            raise KernelTypeError(f"T.Kernel: grid extents must be integers, got {e.dtype}")
        if isinstance(e, E.Const) and int(e.value) <= 0:
            raise KernelTypeError(f"T.Kernel: grid extents must be positive, got {int(e.value)}",
                                  hint="a launch needs at least one block in every dimension")
        g.append(int(e.value) if isinstance(e, E.Const) else e)
    th = threads if isinstance(threads, (tuple, list)) else (threads,)
    if not all(isinstance(t, int) and not isinstance(t, bool) and t > 0 for t in th) or len(th) > 3:
        raise KernelTypeError(f"T.Kernel: threads must be a positive int or a tuple of up to 3 ints, "
                              f"got {threads!r}")
    return KernelSpec(tuple(g), tuple(th), bool(is_npu), _cluster_dims(cluster_dims, g))


@dataclass
class LoopSpec:
    """A loop the parser turns into ``For`` nodes: one per entry of ``extents``."""

    kind: str
    starts: tuple
    extents: tuple
    step: int = 1
    annotations: dict = field(default_factory=dict)

    def __iter__(self) -> Any:
        raise KernelTypeError(f"T.{self.kind} loops can only be used as `for ... in` inside a kernel")


def _extent(x: Any, what: str) -> Any:
    if isinstance(x, bool) or isinstance(x, float):
        raise KernelTypeError(f"{what}: loop bounds must be integers, got {x!r}")
    e = E.as_expr(x)
    if not e.dtype.is_int:
        raise KernelTypeError(f"{what}: loop bounds must be integers, got {e.dtype}")
    return int(e.value) if isinstance(e, E.Const) else e


def _range(what: str, args: Sequence[Any], step: Any = None) -> tuple[Any, Any, int]:
    if len(args) == 1:
        start, stop = 0, args[0]
    elif len(args) in (2, 3):
        start, stop = args[0], args[1]
        if len(args) == 3:
            step = args[2]
    else:
        raise KernelTypeError(f"{what} takes 1 to 3 arguments (stop | start, stop[, step]), got {len(args)}")
    step = 1 if step is None else step
    if not isinstance(step, int) or step == 0:
        raise KernelTypeError(f"{what}: step must be a non-zero Python int, got {step!r}")
    start, stop = _extent(start, what), _extent(stop, what)
    if step == 1 and not (isinstance(stop, int) and isinstance(start, int)):
        n = stop - start if not (isinstance(start, int) and start == 0) else stop
        return start, n, step
    if step > 0:
        n = (stop - start + step - 1) // step if not (isinstance(stop, int) and isinstance(start, int)) \
            else builtins.max(0, -(-(stop - start) // step))
    else:
        n = (start - stop + (-step) - 1) // (-step) if not (isinstance(stop, int) and isinstance(start, int)) \
            else builtins.max(0, -(-(start - stop) // (-step)))
    return start, n if isinstance(n, int) else _extent(n, what), step


def Parallel(*extents: Any, coalesced_width: Optional[int] = None, loop_layout: Any = None) -> LoopSpec:
    """``for i, j in T.Parallel(M, N):`` a tile-wide elementwise loop nest over compile-time
    extents; every iteration is independent and the compiler splits them over the block's
    threads (or vector lanes). ``coalesced_width`` / ``loop_layout`` are layout hints.
    All targets. Example::

        for i, j in T.Parallel(block_M, block_N):
            C_local[i, j] = T.max(C_local[i, j], 0)"""
    if not extents:
        raise KernelTypeError("T.Parallel needs at least one extent")
    ex = tuple(_extent(x, "T.Parallel") for x in extents)
    for x in ex:
        if not isinstance(x, int):
            raise ShapeError(f"T.Parallel: extents must be compile-time constants, but {x} is only "
                             "known when the kernel runs",
                             hint="use a constant tile extent and guard the tail with `if`, or T.serial(n)")
        if x <= 0:  # one meaning on every target: an error, never a loop that runs on some of them
            raise ShapeError(f"T.Parallel: extents must be positive, got {shape_str(ex)}",
                             hint="a parallel loop is a tile of elements; give it at least one")
    ann = {"coalesced_width": coalesced_width} if coalesced_width else {}
    return LoopSpec("parallel", (0,) * len(ex), ex, 1, ann)


def _int_list(x: Any, what: str) -> tuple:
    if not isinstance(x, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in x):
        raise KernelTypeError(f"T.Pipelined: {what} must be a list of Python ints, got {x!r}")
    return tuple(x)


def Pipelined(*args: Any, num_stages: int = 0, order: Optional[Sequence[int]] = None,
              stage: Optional[Sequence[int]] = None, sync: Any = None, group: Any = None,
              annotations: Optional[dict] = None, cross_interval: Any = None) -> LoopSpec:
    """``for k in T.Pipelined(n, num_stages=s):`` a serial loop (``range``-style: ``stop``,
    ``start, stop`` or ``start, stop, step``) whose copies are software-pipelined ``num_stages``
    deep so loads of iteration k+1.. overlap compute of k. ``order`` / ``stage`` / ``group``
    place the body's statements by hand; ``cross_interval`` and ``annotations`` are
    TileLang-Ascend scheduling hints. Same result as ``T.serial`` on every target."""
    if current("T.Pipelined").in_parallel:
        raise ScopeError("T.Pipelined cannot be used inside T.Parallel",
                         hint="pipeline the outer loop; the body of a T.Parallel loop is per element")
    if not isinstance(num_stages, int) or isinstance(num_stages, bool) or num_stages < 0:
        raise KernelTypeError(f"T.Pipelined: num_stages must be a non-negative Python int, got {num_stages!r}")
    start, n, step = _range("T.Pipelined", args)
    ann: dict = {"num_stages": num_stages}
    if cross_interval is not None:  # TileLang-Ascend: how far the cube runs ahead of the vectors (a hint)
        if not isinstance(cross_interval, int) or isinstance(cross_interval, bool) or cross_interval < 1:
            raise KernelTypeError(f"T.Pipelined: cross_interval must be a Python int >= 1, got {cross_interval!r}")
        ann["cross_interval"] = cross_interval
    if order is not None:
        ann["order"] = _int_list(order, "order")
        if sorted(ann["order"]) != list(range(len(ann["order"]))):
            raise KernelTypeError(f"T.Pipelined: order must be a permutation of 0..{len(ann['order']) - 1}, "
                                  f"got {list(order)}")
    if stage is not None:
        ann["stage"] = _int_list(stage, "stage")
        if any(v < 0 for v in ann["stage"]):
            raise KernelTypeError(f"T.Pipelined: stage numbers must be non-negative, got {list(stage)}")
    if order is not None and stage is not None and len(ann["order"]) != len(ann["stage"]):
        raise KernelTypeError(f"T.Pipelined: order has {len(ann['order'])} entries and stage "
                              f"{len(ann['stage'])}; give one of each per statement of the loop body")
    if group is not None:
        ann["group"] = tuple(tuple(g) for g in group)
    if annotations is not None:  # the NPU's {"enable_offset": True} (AutoSchedule reads it)
        if not isinstance(annotations, dict) or not all(isinstance(k, str) for k in annotations):
            raise KernelTypeError(f"T.Pipelined: annotations must be a dict with string keys, got "
                                  f"{annotations!r}")
        ann.update(annotations)
    return LoopSpec("pipelined", (start,), (n,), step, ann)


def serial(*args: Any, step: Any = None, annotations: Optional[dict] = None) -> LoopSpec:
    """``for i in T.serial(stop)`` / ``T.serial(start, stop[, step])``: a sequential loop, as
    ``range``; bounds may be runtime values. ``T.Serial`` is the same function. All targets."""
    start, n, st = _range("T.serial", args, step)
    return LoopSpec("serial", (start,), (n,), st, dict(annotations or {}))


Serial = serial


def unroll(*args: Any, step: Any = None, explicit: bool = False, unroll_factor: Any = None) -> LoopSpec:
    """``for i in T.unroll(stop)`` / ``T.unroll(start, stop[, step])``: a sequential loop the
    compiler unrolls (``explicit`` / ``unroll_factor`` are accepted hints). ``T.Unroll`` is the
    same function. All targets."""
    start, n, st = _range("T.unroll", args, step)
    return LoopSpec("unroll", (start,), (n,), st)


def vectorized(*args: Any) -> LoopSpec:
    """``for i in T.vectorized(stop)`` / ``T.vectorized(start, stop[, step])``: a loop whose
    iterations are emitted as one vector operation per thread. ``T.Vectorized`` is the same
    function. All targets."""
    start, n, st = _range("T.vectorized", args)
    return LoopSpec("vectorized", (start,), (n,), st)


def grid(*extents: Any) -> LoopSpec:
    """``for i, j in T.grid(M, N):`` a serial loop nest over the given extents (row-major
    order), the nested form of ``T.serial``. All targets."""
    ex = tuple(_extent(x, "T.grid") for x in extents)
    return LoopSpec("serial", (0,) * len(ex), ex)


# ---------------------------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------------------------

def _alloc(shape: Any, dtype: Any, scope: str, what: str) -> Buffer:
    b = current(what)
    k = b.require_kernel(what)
    shp = semantic.tile_shape_arg(shape, what)
    d = semantic.check_dtype(dtype, what)
    buf = Buffer(b.take_name({FRAGMENT: "frag", LOCAL: "local"}.get(scope, "shared")),
                 shp, d, scope)
    k.allocs.append(buf)
    return buf


def alloc_shared(shape: Any, dtype: Any, scope: str = SHARED_DYN) -> Buffer:
    """A tile in block-shared memory (``scope`` ``"shared.dyn"``, the default, or ``"shared"``),
    visible to every thread of the block; on the NPU it is the unified buffer / L1 the copy
    targets. All targets. Example: ``A_s = T.alloc_shared((block_M, block_K), "float16")``."""
    if scope not in SHARED:
        raise KernelTypeError(f"T.alloc_shared: scope must be 'shared' or 'shared.dyn', got {scope!r}")
    return _alloc(shape, dtype, scope, "T.alloc_shared")


def alloc_fragment(shape: Any, dtype: Any, scope: str = FRAGMENT) -> Buffer:
    """A block-wide register tile whose split over the threads the compiler infers; with
    ``scope="local"`` (TileLang's spelling for per-thread registers) the same as
    :func:`alloc_local`."""
    if scope not in (FRAGMENT, LOCAL):
        raise KernelTypeError(f"T.alloc_fragment: scope must be '{FRAGMENT}' or '{LOCAL}', got {scope!r}")
    return _alloc(shape, dtype, scope, "T.alloc_fragment")


def alloc_local(shape: Any, dtype: Any, scope: str = "local") -> Buffer:
    """A per-thread register buffer of ``shape`` and ``dtype`` (each thread has its own copy).
    All targets."""
    return _alloc(shape, dtype, "local", "T.alloc_local")


def alloc_var(dtype: Any, init: Any = None, scope: str = "local.var") -> Buffer:
    """A scalar variable (reading its name reads its value). Declared inside ``T.Parallel``,
    each iteration has its own; declared inside any loop (or initialized from a runtime value),
    ``init`` is applied where it is declared, each time control passes there."""
    b = current("T.alloc_var")
    k = b.require_kernel("T.alloc_var")
    d = semantic.check_dtype(dtype, "T.alloc_var")
    buf = Buffer(b.take_name("var"), (1,), d, "local.var")
    k.allocs.append(buf)
    if init is not None:
        value = E.cast(d, init)
        if b.loop_kinds or not isinstance(value, E.Const):
            # declared in a loop, or from a runtime value: initialized where it is declared
            b.emit(BufferStore(buf, (E.const(0),), value))
        else:
            k.alloc_inits[buf] = value
    return buf


# ---------------------------------------------------------------------------------------------
# Tile operations
# ---------------------------------------------------------------------------------------------

def _emit_tile(what: str, make: Any) -> None:
    """Check we are in a kernel (outside T.Parallel), then build the node with ``make()`` and emit it."""
    b = current(what)
    b.require_kernel(what)
    if b.in_parallel:
        raise ScopeError(f"{what} is a tile operation and cannot be used inside T.Parallel",
                         hint="move it out of the parallel loop")
    b.emit(make())


def _emit_op(what: str, op: type, *operands: Any) -> None:
    """``_emit_tile`` of the ``op`` node built from the operands by its ``check`` rule
    (:mod:`tegula.ir.tile_rules`)."""
    _emit_tile(what, lambda: TILE_RULES.require(op, "check", "the language")(*operands))


def copy(src: Any, dst: Any, coalesced_width: Optional[int] = None, disable_tma: bool = False,
         eviction_policy: Any = None, loop_layout: Any = None,
         annotations: Optional[dict] = None, enable_relu: bool = False, transpose: bool = False) -> None:
    """``T.copy(src, dst)``; ``annotations`` (hints such as ``{"coalesced_width": 4}``) are kept
    on the copy and do not change what it does. ``enable_relu`` / ``transpose`` are
    TileLang-Ascend's (``tegula.language.ascend.flagged_copy``)."""
    if enable_relu is not False or transpose is not False:
        # the Ascend dialect (and the NPU IR) loads on first use, as the parser loads it
        importlib.import_module("tegula.language.ascend").flagged_copy(src, dst, enable_relu, transpose)
        return
    if annotations is not None and not isinstance(annotations, dict):
        raise KernelTypeError(f"T.copy: annotations must be a dict, got {annotations!r}")
    if coalesced_width is not None and (not isinstance(coalesced_width, int) or isinstance(coalesced_width, bool)
                                        or coalesced_width <= 0):
        extra = isinstance(coalesced_width, (Buffer, BufferRegion, E.BufferLoad))
        raise KernelTypeError(
            "T.copy takes one source and one destination" if extra else
            f"T.copy: coalesced_width must be a positive Python int, got {coalesced_width!r}",
            hint="the third argument of T.copy is coalesced_width; copy one pair of tiles per call"
            if extra else None)
    if disable_tma:  # TMA pipelining leaves the loop to cp.async
        annotations = {**(annotations or {}), "disable_tma": True}
    if not annotations:
        _emit_op("T.copy", Copy, src, dst)
        return
    _emit_op("T.copy", Copy, src, dst)
    b = current("T.copy")
    c = b.stack[-1][-1]  # the copy just emitted, with the hints attached
    b.stack[-1][-1] = Copy(c.src, c.dst, {str(k): v for k, v in annotations.items()}, span=c.span)


class GemmWarpPolicy:
    """How the warps of a block split the M x N tile of a gemm."""

    Square = "Square"
    FullRow = "FullRow"
    FullCol = "FullCol"


def gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
         policy: Any = GemmWarpPolicy.Square, clear_accum: Any = False, k_pack: int = 1,
         wg_wait: int = 0, mbar: Any = None) -> None:
    """``T.gemm(A, B, C, ...)``: ``C += A @ B`` (``C = A @ B`` when ``clear_accum``). A
    ``clear_accum`` known only when the kernel runs (``clear_accum=k == 0``, as TileLang takes it)
    is ``if clear_accum: T.clear(C)`` before the product."""
    if isinstance(clear_accum, E.Const):
        clear_accum = bool(clear_accum.value)
    c_scope = getattr(getattr(C, "buffer", C), "scope", None)
    if isinstance(clear_accum, E.Expr) and c_scope != "l0c":  # the Ascend 950 form keeps it
        b = current("T.gemm")
        with b.frame() as then:
            clear(C)
        b.emit(IfThenElse(E.cast(dt.bool_, clear_accum), seq(*then)))
        clear_accum = False
    _emit_op("T.gemm", Gemm, A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack,
               wg_wait)


def _reducer(kind: str) -> Any:
    def reduce_op(src: Any, dst: Any, dim: int = -1, clear: bool = True,
                  nan_propagate: bool = True, real_shape: Any = None) -> None:
        if real_shape is not None:  # TileLang-Ascend's slice-buffer reduce: a corner of src
            src, dst = semantic.real_shape_regions(f"T.reduce_{kind}", src, dst, dim, real_shape)
        _emit_op(f"T.reduce_{kind}", Reduce, kind, src, dst, dim, clear)

    reduce_op.__name__ = f"reduce_{kind}"
    reduce_op.__doc__ = (f"``dst = {kind}(src, dim)`` (combined with dst when ``clear=False``). "
                         "NaN propagates on every target, whatever ``nan_propagate`` says.")
    return reduce_op


reduce_sum = _reducer("sum")
reduce_max = _reducer("max")
reduce_min = _reducer("min")
reduce_abssum = _reducer("abssum")
reduce_absmax = _reducer("absmax")
reduce_bitand = _reducer("bitand")
reduce_bitor = _reducer("bitor")
reduce_bitxor = _reducer("bitxor")


def cumsum(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False,
           annotations: Optional[dict] = None) -> None:
    """``dst = `` the inclusive prefix sum of ``src`` along ``dim`` (``reverse``: suffix sum);
    in place when ``dst`` is None. ``annotations`` (TileLang's lowering hints) change no result
    and are accepted."""
    _emit_op("T.cumsum", CumSum, src, dst, dim, reverse)


def cummax(src: Any, dst: Any = None, dim: int = 0, reverse: bool = False,
           annotations: Optional[dict] = None) -> None:
    """``dst = `` the running maximum of ``src`` along ``dim`` (``reverse``: from the end);
    in place when ``dst`` is None; ``annotations`` are accepted as for ``T.cumsum``."""
    _emit_op("T.cummax", CumSum, src, dst, dim, reverse, "max")


def fill(buffer: Any, value: Any) -> None:
    """``T.fill(buffer, value)``: set every element of a buffer or region to ``value`` (cast
    to its dtype). All targets."""
    _emit_op("T.fill", Fill, buffer, value)


def clear(buffer: Any) -> None:
    """``T.clear(buffer)``: set every element of a buffer or region to zero, the same as
    ``T.fill(buffer, 0)``. All targets."""
    _emit_op("T.clear", Fill, buffer, 0)


def _atomic(kind: str) -> Any:
    def atomic_op(dst: Any, value: Any, memory_order: Any = None, return_prev: bool = False,
                  use_tma: bool = False) -> None:
        """``T.atomic_add`` / ``T.atomic_max`` / ``T.atomic_min(dst, value)``: atomically update
        ``dst`` (an element, or a buffer / region updated elementwise by a same-shaped tile)
        with ``value`` so concurrent blocks / threads do not lose updates. ``return_prev=True`` (thread-level code,
        one element) returns the value before the update. ``memory_order`` / ``use_tma`` are
        accepted hints. All targets."""
        what = f"T.atomic_{kind}"
        b = current(what)
        k = b.require_kernel(what)
        if return_prev:
            return _atomic_prev(what, kind, k, dst, value)
        b.emit(TILE_RULES.require(Atomic, "check", "the language")(kind, dst, value))

    atomic_op.__name__ = f"atomic_{kind}"
    return atomic_op


def _atomic_prev(what: str, kind: str, k: Any, dst: Any, value: Any) -> E.Expr:
    """``T.atomic_add(X[i], v, return_prev=True)``: the update as an expression whose value is
    ``X[i]`` before it (thread-level code: each thread makes its own update)."""
    if k.thread_var is None or current().in_parallel:
        raise ScopeError(f"{what}(..., return_prev=True) returns each thread's previous value; it "
                         "needs thread-level code", hint="bind the thread index with T.get_thread_binding()")
    if not isinstance(dst, E.BufferLoad) or dst.buffer.scope not in ("global", "shared", "shared.dyn"):
        raise KernelTypeError(f"{what}(..., return_prev=True) takes one element of a global or shared "
                              f"buffer, got {semantic.describe(dst)}")
    semantic._atomic_dtype(what, dst.dtype)
    return E.Builtin(f"tl::atomic_{kind}", (E.Builtin("address_of", (dst,), dt.int64),
                                            E.cast(dst.dtype, value)), dst.dtype)


atomic_add = _atomic("add")
atomic_max = _atomic("max")
atomic_min = _atomic("min")


def print(obj: Any, msg: str = "", warp_group_id: int = 0, warp_id: int = 0) -> None:  # noqa: A001
    """``T.print(obj, msg="")``: print a scalar expression or a buffer (region) with the
    message ``msg`` when the kernel runs; for debugging. All targets."""
    b = current("T.print")
    b.require_kernel("T.print")
    if isinstance(obj, Buffer) and not obj.is_var:
        obj = obj.region()
    elif not isinstance(obj, BufferRegion):
        obj = E.as_expr(obj)
    b.emit(Print(obj, str(msg)))


def use_swizzle(panel_size: int, order: str = "row", enable: bool = True) -> None:
    """``T.use_swizzle(panel_size, order)``: launch the blocks of a 2-d grid in strips of
    ``panel_size`` columns (``"row"``) or rows (``"col"``) for L2 reuse. With ``enable=False``
    the kernel keeps launch order, and RasterBlocks does not choose an order for it either.
    Raises KernelTypeError for a bad order or panel size."""
    k = current("T.use_swizzle").require_kernel("T.use_swizzle")
    if order not in ("row", "col", "column"):
        raise KernelTypeError(f"T.use_swizzle: order must be 'row' or 'col', got {order!r}")
    if not isinstance(panel_size, int) or isinstance(panel_size, bool) or panel_size <= 0:
        raise KernelTypeError(f"T.use_swizzle: panel_size must be a positive Python int, got {panel_size!r}")
    key = "swizzle" if enable else "swizzle_disabled"
    k.annotations[key] = (int(panel_size), "col" if order == "column" else order)


def annotate_min_blocks_per_sm(n: int) -> None:
    """``T.annotate_min_blocks_per_sm(n)``: blocks of this kernel the CUDA compiler must leave
    room for on one SM (the second ``__launch_bounds__`` value: fewer registers per thread);
    it wins over the ``tegula.min_blocks_per_sm`` pass config. Other targets ignore it."""
    k = current("T.annotate_min_blocks_per_sm").require_kernel("T.annotate_min_blocks_per_sm")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise KernelTypeError(f"T.annotate_min_blocks_per_sm: n must be a positive Python int, got {n!r}")
    k.annotations["min_blocks_per_sm"] = int(n)


def annotate_layout(layout_map: dict) -> None:
    """``T.annotate_layout({buf: layout})``: the layouts the compiler must use. A ``T.Layout`` (or
    ``make_swizzled_layout``) on a shared tile is where its elements live; a fragment layout
    (``T.Fragment``, or one of :mod:`tegula.layout`) on a fragment is how it spreads over the
    threads. Layout inference starts from them, and an op that cannot work with one is a
    :class:`~tegula.errors.LayoutError` naming both lines. Layouts of global buffers are accepted
    and change nothing (global buffers stay row-major)."""
    from tegula.ir.span import current_span
    from tegula.layout.user import Fragment as UserFragment, Layout as UserLayout

    k = current("T.annotate_layout").require_kernel("T.annotate_layout")
    if not isinstance(layout_map, dict):
        raise KernelTypeError("T.annotate_layout takes a dict {buffer: layout}")
    out = {}
    for buf, lay in layout_map.items():
        if not isinstance(buf, Buffer):
            raise KernelTypeError(f"T.annotate_layout: keys must be buffers, got {buf!r}")
        if not (type(lay).__module__ or "").startswith("tegula") and not callable(lay):
            raise KernelTypeError(f"T.annotate_layout: the layout of '{buf.name}' must be a layout "
                                  f"(T.Layout, T.Fragment, make_swizzled_layout(...)), got {lay!r}")
        if isinstance(lay, UserLayout):
            if buf.is_fragment:
                raise LayoutError(f"T.annotate_layout: '{buf.name}' is a fragment; its layout must "
                                  f"say which thread holds each element (T.Fragment), got {lay.describe()}")
            if buf.is_shared:
                lay = lay.on_shared(buf)
        elif isinstance(lay, UserFragment) and buf.is_fragment:
            lay = lay.on_fragment(buf, math.prod(int(t) for t in k.threads))
        elif isinstance(lay, UserFragment):
            raise LayoutError(f"T.annotate_layout: '{buf.name}' is not a fragment; T.Fragment says how "
                              f"a fragment spreads over the threads, got {lay.describe()}",
                              hint="use T.Layout for shared tiles")
        out[buf] = lay
    k.annotations.setdefault("layout_map", {}).update(out)
    spans = k.annotations.setdefault("layout_spans", {})
    for buf in out:
        spans[buf] = current_span()


def annotate_safe_value(safe_value_map: dict) -> None:
    """``T.annotate_safe_value({A: v})``: out-of-bounds reads of global ``A`` in ``T.Parallel``
    give ``v`` instead of 0 (see :mod:`tegula.language.safe_access`)."""
    k = current("T.annotate_safe_value").require_kernel("T.annotate_safe_value")
    if not isinstance(safe_value_map, dict):
        raise KernelTypeError("T.annotate_safe_value takes a dict {buffer: value}")
    for buf, v in safe_value_map.items():
        if not isinstance(buf, Buffer) or buf.scope != "global":
            raise KernelTypeError(f"T.annotate_safe_value: keys must be global buffers, got {semantic.describe(buf)}")
        k.safe_values[buf] = E.cast(buf.dtype, v)


def _thread_var(k: Any) -> E.Var:
    """The kernel's thread index, created on first use (the kernel becomes thread-level code)."""
    if k.thread_var is None:
        k.thread_var = E.Var("tx")
    return k.thread_var


def _tl_call(name: str, *args: Any) -> Stmt:
    return Evaluate(E.Builtin(name, tuple(E.as_expr(a) for a in args), dt.bool_))


def _barrier_addr(bar: Any, what: str) -> E.Builtin:
    if isinstance(bar, Buffer):
        bar = bar[0] if bar.ndim == 1 else bar
    if not (isinstance(bar, E.BufferLoad) and bar.buffer.scope in ("shared", "shared.dyn")
            and bar.buffer.dtype == dt.uint64):
        raise KernelTypeError(f"{what}: expected a barrier from T.alloc_barrier (or one element of "
                              f"it), got {semantic.describe(bar)}")
    return E.Builtin("address_of", (bar,), dt.int64, (("ctype", "uint64_t"),))


def alloc_barrier(arrive_count: Any) -> Buffer:
    """``T.alloc_barrier(arrive_count)``: mbarriers in shared memory, one per entry of
    ``arrive_count`` (an int gives one), each completing a phase when that many threads have
    arrived. The kernel becomes thread-level code (see :func:`get_thread_binding`)."""
    b = current("T.alloc_barrier")
    k = b.require_kernel("T.alloc_barrier")
    if b.loop_kinds:
        raise ScopeError("T.alloc_barrier belongs at the top of the kernel, not inside a loop")
    counts = [arrive_count] if isinstance(arrive_count, int) else list(arrive_count)
    if not counts or not all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in counts):
        raise KernelTypeError(f"T.alloc_barrier: arrive_count must be a positive int or a list of "
                              f"them, got {arrive_count!r}")
    buf = Buffer(b.take_name("mbarrier"), (len(counts),), dt.uint64, "shared")
    k.allocs.append(buf)
    tx = _thread_var(k)
    inits = [_tl_call("tl::mbarrier_init", _barrier_addr(buf[i], "T.alloc_barrier"), c)
             for i, c in enumerate(counts)]
    # (made visible to the copy engine too: TMA completes on these barriers on sm_90)
    b.emit(IfThenElse(E.compare("eq", tx, 0), seq(*inits, _tl_call("tl::fence_barrier_init"))))
    b.emit(Evaluate(E.Builtin("sync_threads", (), dt.bool_)))
    return buf


def mbarrier_arrive(mbarrier: Any, cta_id: Any = None) -> None:
    """Every thread that runs it arrives once on ``mbarrier``."""
    if cta_id is not None:
        raise UnsupportedError("T.mbarrier_arrive(..., cta_id=) (cluster barriers) is not supported")
    current("T.mbarrier_arrive").require_kernel("T.mbarrier_arrive")
    current().emit(_tl_call("tl::mbarrier_arrive", _barrier_addr(mbarrier, "T.mbarrier_arrive")))


def mbarrier_expect_tx(mbarrier: Any, tx: Any) -> None:
    """Announce ``tx`` more bytes of asynchronous copies for the current phase (sm_90)."""
    current("T.mbarrier_expect_tx").require_kernel("T.mbarrier_expect_tx")
    current().emit(_tl_call("tl::mbarrier_expect_tx", _barrier_addr(mbarrier, "T.mbarrier_expect_tx"),
                            E.cast(dt.uint32, tx)))


def mbarrier_wait_parity(mbarrier: Any, parity: Any) -> None:
    """Wait until the phase of ``mbarrier`` with this parity (0 or 1) has completed."""
    current("T.mbarrier_wait_parity").require_kernel("T.mbarrier_wait_parity")
    current().emit(_tl_call("tl::mbarrier_wait", _barrier_addr(mbarrier, "T.mbarrier_wait_parity"),
                            E.cast(dt.int32, parity)))


def barrier_arrive(barrier_id: Any) -> None:
    """``T.barrier_arrive(bar)``: :func:`mbarrier_arrive` on a barrier from T.alloc_barrier."""
    mbarrier_arrive(barrier_id)


def barrier_wait(barrier_id: Any, parity: Any = 0) -> None:
    """``T.barrier_wait(bar, parity)``: :func:`mbarrier_wait_parity`."""
    mbarrier_wait_parity(barrier_id, parity)


def get_thread_binding(dim: int = 0) -> E.Expr:
    """``threadIdx.x`` (``dim=0``), ``.y`` or ``.z`` of the thread running this code.

    A kernel that asks for it is thread-level code: each thread runs the kernel body, and element
    stores and atomics that depend on the thread index are made by every thread (on the
    interpreter too, which runs such kernels one lane per thread; see docs/language.md).
    """
    k = current("T.get_thread_binding").require_kernel("T.get_thread_binding")
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < 3:
        raise KernelTypeError(f"T.get_thread_binding: dim must be 0, 1 or 2, got {dim!r}")
    _thread_var(k)
    dims = tuple(k.threads) + (1,) * (3 - len(k.threads))
    if dims[dim] == 1:
        return E.const(0)
    below = 1
    for d in dims[:dim]:
        below *= d
    t: E.Expr = k.thread_var if below == 1 else k.thread_var // below
    return t if all(d == 1 for d in dims[dim + 1:]) else t % dims[dim]


def sync_threads(barrier_id: Any = None, arrive_count: Any = None) -> None:
    """A block-wide barrier. Tile-level code needs none (the compiler inserts them), so there it
    is accepted and does nothing; in thread-level code (``T.get_thread_binding``) it is
    ``__syncthreads()``, or with ``barrier_id`` and ``arrive_count`` the named barrier ``bar.sync
    id, count`` for that many threads."""
    b = current("T.sync_threads")
    k = b.require_kernel("T.sync_threads")
    if k.thread_var is None:
        return
    if barrier_id is None:
        b.emit(Evaluate(E.Builtin("sync_threads", (), dt.bool_)))
        return
    n = k.threads[0] if arrive_count is None else arrive_count
    for x, what in ((barrier_id, "barrier_id"), (n, "arrive_count")):
        if not isinstance(x, int) or isinstance(x, bool):
            raise KernelTypeError(f"T.sync_threads: {what} must be a Python int, got {x!r}")
    if not 0 <= barrier_id < 16 or n <= 0 or n % 32:
        raise KernelTypeError(f"T.sync_threads: barrier_id must be 0..15 and arrive_count a positive "
                              f"multiple of 32, got {barrier_id}, {n}")
    b.emit(_tl_call("tl::named_barrier_sync", barrier_id, n))


def named_barrier_arrive(barrier_id: Any, thread_count: int) -> None:
    """``bar.arrive barrier_id, thread_count``: the calling threads arrive at named barrier
    ``barrier_id`` (0..15, an int or an expression, e.g. one per warpgroup) without waiting; the
    threads that wait there with ``T.sync_threads(barrier_id, thread_count)`` go on once
    ``thread_count`` threads have arrived, counting both."""
    b = current("T.named_barrier_arrive")
    b.require_kernel("T.named_barrier_arrive")
    if not isinstance(thread_count, int) or isinstance(thread_count, bool) or thread_count <= 0 or thread_count % 32:
        raise KernelTypeError(f"T.named_barrier_arrive: thread_count must be a positive multiple of 32, "
                              f"got {thread_count!r}")
    if isinstance(barrier_id, bool) or (isinstance(barrier_id, int) and not 0 <= barrier_id < 16):
        raise KernelTypeError(f"T.named_barrier_arrive: barrier_id must be 0..15, got {barrier_id!r}")
    b.emit(_tl_call("tl::named_barrier_arrive", barrier_id, thread_count))


def assume(cond: Any) -> None:
    """``T.assume(cond)``: a fact the compiler may use; accepted, and not used yet."""
    current("T.assume")


def pdl_trigger() -> None:
    """Programmatic dependent launch: let the next kernel start (sm_90; nothing elsewhere since
    kernels run in order there)."""
    current("T.pdl_trigger").require_kernel("T.pdl_trigger")
    current().emit(_tl_call("tl::pdl_trigger"))


def pdl_sync() -> None:
    """Programmatic dependent launch: wait for the previous kernel's memory (sm_90)."""
    current("T.pdl_sync").require_kernel("T.pdl_sync")
    current().emit(_tl_call("tl::pdl_sync"))


def shfl_xor(value: Any, lane_mask: Any, width: int = 32) -> E.Expr:
    """The ``value`` of the lane ``lane ^ lane_mask`` of this warp (thread-level code)."""
    k = current("T.shfl_xor").require_kernel("T.shfl_xor")
    if k.thread_var is None:
        raise ScopeError("T.shfl_xor exchanges values between the threads of a warp; it needs "
                         "thread-level code", hint="bind the thread index with T.get_thread_binding()")
    v = E.as_expr(value)
    return E.Builtin("shfl_xor", (v, E.as_expr(lane_mask), E.as_expr(width)), v.dtype)


# ---------------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------------

def _is_py(*xs: Any) -> bool:
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def if_then_else(cond: Any, then: Any, else_: Any) -> Any:
    """``T.if_then_else(cond, then, else_)``: the value ``then`` where ``cond`` holds, else
    ``else_`` (an expression, evaluated per element).
    Same as ``T.Select``. All targets."""
    return E.select(cond, then, else_)


class HostInt(int):
    """An int that ``T.min`` / ``T.max`` / ``T.ceildiv`` computed on the host from ints: a Python
    int that also has the ``.value`` and ``.dtype`` of the constant TileLang folds it to."""

    dtype = "int32"

    @property
    def value(self) -> int:
        return int(self)


def _host(x: Any) -> Any:
    return HostInt(x) if isinstance(x, int) and not isinstance(x, bool) else x


def max(a: Any, b: Any) -> Any:  # noqa: A001
    """``T.max(a, b)``: the larger of two values; a Python int when both are Python ints
    (usable in shapes), else an expression. All targets."""
    return _host(a if a >= b else b) if _is_py(a, b) else E.maximum(a, b)


def min(a: Any, b: Any) -> Any:  # noqa: A001
    """``T.min(a, b)``: the smaller of two values; a Python int when both are Python ints
    (usable in shapes), else an expression. All targets."""
    return _host(a if a <= b else b) if _is_py(a, b) else E.minimum(a, b)


def ceildiv(a: Any, b: Any) -> Any:
    """``T.ceildiv(a, b)``: ``a / b`` rounded up (for positive ``b``), the usual block count
    ``T.ceildiv(N, block_N)``; a Python int for int arguments. All targets."""
    if _is_py(a, b) and isinstance(a, int) and isinstance(b, int):
        return HostInt(-(-a // b))
    return (E.as_expr(a) + b - 1) // b


def floordiv(a: Any, b: Any) -> Any:
    """``T.floordiv(a, b)``: integer division rounded toward minus infinity (``a // b``).
    All targets."""
    return a // b


def floormod(a: Any, b: Any) -> Any:
    """``T.floormod(a, b)``: the remainder of ``T.floordiv``, with the sign of ``b``
    (``a % b``). All targets."""
    return a % b


def truncdiv(a: Any, b: Any) -> Any:
    """``T.truncdiv(a, b)``: integer division rounded toward zero (C's ``a / b``). All targets."""
    return E.binary("truncdiv", a, b)


def truncmod(a: Any, b: Any) -> Any:
    """``T.truncmod(a, b)``: the remainder of ``T.truncdiv``, with the sign of ``a`` (C's
    ``a % b``). All targets."""
    return E.binary("truncmod", a, b)


def _intrinsic(name: str) -> Any:
    def f(*args: Any) -> E.Expr:
        if args and not isinstance(args[0], float):
            first = args[0].as_load() if isinstance(args[0], Buffer) else E.as_expr(args[0])
            if not first.dtype.is_float:
                raise DTypeError(f"T.{name} takes a floating-point value, got {first.dtype}",
                                 hint=f"convert it first: T.{name}(T.Cast(\"float32\", x))")
        return E.call(name, *args)

    f.__name__ = name
    f.__doc__ = f"``T.{name}``: elementwise {name}."
    return f


exp, exp2, log, log2, log10 = (_intrinsic(n) for n in ("exp", "exp2", "log", "log2", "log10"))
sqrt, rsqrt, tanh, sigmoid = (_intrinsic(n) for n in ("sqrt", "rsqrt", "tanh", "sigmoid"))
floor, ceil, round, trunc = (_intrinsic(n) for n in ("floor", "ceil", "round", "trunc"))  # noqa: A001
sin, cos, erf, log1p, expm1 = (_intrinsic(n) for n in ("sin", "cos", "erf", "log1p", "expm1"))
pow, fmod, isnan, isinf = (_intrinsic(n) for n in ("pow", "fmod", "isnan", "isinf"))  # noqa: A001
exp10, tan = _intrinsic("exp10"), _intrinsic("tan")


def abs(x: Any) -> Any:  # noqa: A001
    """``T.abs(x)``: the absolute value (elementwise; a Python number stays one). All targets."""
    if _is_py(x):
        return x if x >= 0 else -x
    return E.call("abs", x)


def infinity(dtype: Any) -> E.Expr:
    """``T.infinity(dtype)``: positive infinity as a constant of the floating ``dtype``.
    All targets."""
    return E.const(math.inf, semantic.check_dtype(dtype, "T.infinity"))


def ninf(dtype: Any) -> E.Expr:
    """``T.ninf(dtype)``: negative infinity as a constant of the floating ``dtype`` (the
    usual initial value of a running max). All targets."""
    return E.const(-math.inf, semantic.check_dtype(dtype, "T.ninf"))


def max_value(dtype: Any) -> E.Expr:
    """``T.max_value(dtype)``: the largest finite value of ``dtype`` as a constant. All targets."""
    d = semantic.check_dtype(dtype, "T.max_value")
    import numpy as np

    info = np.iinfo(d.np) if d.is_int else np.finfo(d.np)
    return E.const(info.max.item() if hasattr(info.max, "item") else info.max, d)


def min_value(dtype: Any) -> E.Expr:
    """``T.min_value(dtype)``: the smallest (most negative) finite value of ``dtype`` as a
    constant. All targets."""
    d = semantic.check_dtype(dtype, "T.min_value")
    import numpy as np

    info = np.iinfo(d.np) if d.is_int else np.finfo(d.np)
    return E.const(info.min.item() if hasattr(info.min, "item") else info.min, d)


def Cast(dtype: Any, value: Any) -> E.Expr:
    """``T.Cast(dtype, value)``: ``value`` converted to ``dtype`` (dtype first; ``T.cast``
    takes it second). All targets. Example: ``T.Cast("float32", A[i])``."""
    return E.cast(semantic.check_dtype(dtype, "T.Cast"), value)


def cast(value: Any, dtype: Any) -> E.Expr:
    """``T.cast(value, dtype)`` (TileLang's order; ``T.Cast`` takes the dtype first)."""
    if isinstance(value, str) and not isinstance(dtype, str):  # T.cast(dtype, value) also reads
        value, dtype = dtype, value
    return E.cast(semantic.check_dtype(dtype, "T.cast"), value)


def reinterpret(value: Any, dtype: Any) -> E.Expr:
    """``T.reinterpret(value, dtype)``: the bits of ``value`` read as ``dtype`` (same width)."""
    if isinstance(value, str) and not isinstance(dtype, str):  # T.reinterpret(dtype, value)
        value, dtype = dtype, value
    d = semantic.check_dtype(dtype, "T.reinterpret")
    e = E.as_expr(value)
    if e.dtype.bits != d.bits or e.dtype.is_bool or d.is_bool:
        raise DTypeError(f"T.reinterpret: {e.dtype} ({e.dtype.bits} bits) cannot be read as {d} "
                         f"({d.bits} bits); both must be numbers of the same width",
                         hint="use T.cast to convert the value instead")
    if e.dtype == d:
        return e
    return E.Builtin("bitcast", (e,), d)


def isfinite(x: Any) -> E.Expr:
    """True where ``x`` is neither NaN nor infinite."""
    return E.binary("and", E.unary("not", E.call("isnan", x)), E.unary("not", E.call("isinf", x)))


def __ldg(x: Any) -> Any:
    """A load through the read-only data cache: the same value as ``x``."""
    if not isinstance(x, E.BufferLoad):
        raise KernelTypeError(f"T.__ldg takes an element of a buffer, got {semantic.describe(x)}")
    return x


def _fold_bool(op: str, buffer: Any, what: str) -> E.Expr:
    if isinstance(buffer, Buffer):
        buffer = buffer.region()
    if not isinstance(buffer, BufferRegion):
        raise KernelTypeError(f"{what} takes a buffer or a region, got {semantic.describe(buffer)}")
    import itertools

    out: Any = None
    for idx in itertools.product(*(range(int(e)) for e in buffer.extents)):
        load = buffer.buffer[tuple(s + i for s, i in zip(buffer.starts, idx))]
        out = E.cast(dt.bool_, load) if out is None else E.binary(op, out, load)
    return out


def any_of(buffer: Any) -> E.Expr:
    """True when some element of ``buffer`` (a small local buffer or region) is true."""
    return _fold_bool("or", buffer, "T.any_of")


def all_of(buffer: Any) -> E.Expr:
    """True when every element of ``buffer`` (a small local buffer or region) is true."""
    return _fold_bool("and", buffer, "T.all_of")


def Select(cond: Any, then: Any, else_: Any) -> E.Expr:
    """``T.Select(cond, then, else_)``: ``then`` where ``cond`` holds, else ``else_``
    (elementwise, like ``T.if_then_else``). All targets."""
    return E.select(cond, then, else_)


def And(a: Any, b: Any) -> E.Expr:
    """``T.And(a, b)``: logical and of two boolean expressions. All targets."""
    return E.binary("and", a, b)


def Or(a: Any, b: Any) -> E.Expr:
    """``T.Or(a, b)``: logical or of two boolean expressions. All targets."""
    return E.binary("or", a, b)


def Not(a: Any) -> E.Expr:
    """``T.Not(a)``: logical negation of a boolean expression. All targets."""
    return E.unary("not", a)


def clamp(dst: Any, min_val: Any, max_val: Any) -> Any:
    """``T.clamp(x, min_val, max_val)``: ``x`` limited to ``[min_val, max_val]`` (``max_val``
    when ``min_val > max_val``, as ``torch.clamp``; NaN propagates). All targets."""
    return min(max(dst, min_val), max_val)
