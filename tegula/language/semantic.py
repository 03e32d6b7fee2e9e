"""What tile operations mean: operand forms, shape and dtype rules, in one place.

Each tile op's builder is its ``check`` rule in :mod:`tegula.ir.tile_rules` (the ``T.*``
primitives call it through the registry).

The AST parser only walks Python; the functions here turn user operands (buffers, slice regions,
start elements) into :class:`BufferRegion` s and check shapes, scopes and dtypes. Every
failure is a typed tegula error; the parser attaches the user's source line to it.
"""
from __future__ import annotations

import difflib
from typing import Any, Optional, Union

from tegula.arith.simplify import simplify
from tegula.errors import (DTypeError, KernelTypeError, OutOfBoundsError, RaceError, ScopeError,
                           ShapeError, UnsupportedError)
from tegula.ir import dtype as dt
from tegula.ir.buffer import FRAGMENT, LOCAL, SHARED, Buffer, BufferRegion, Dim
from tegula.ir.expr import BufferLoad, Const, Expr, as_expr, const
from tegula.ir.combiners import COMBINERS
from tegula.ir.visitor import post_order_visit
from tegula.ir.stmt import Atomic, Copy, CumSum, Fill, Gemm, Reduce
from tegula.ir.tile_rules import tile_rule

Operand = Union[Buffer, BufferRegion, BufferLoad]
GEMM_POLICIES = ("Square", "FullRow", "FullCol")


def describe(x: Any) -> str:
    if isinstance(x, Buffer):
        return f"buffer '{x.name}'"
    if isinstance(x, BufferRegion):
        return f"a region of '{x.buffer.name}'"
    if isinstance(x, BufferLoad):
        return f"an element of '{x.buffer.name}'"
    return f"{type(x).__name__} {x!r}"


def shape_str(shape: tuple) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def to_region(x: Any, what: str, like: Optional[BufferRegion] = None) -> BufferRegion:
    """A tile operand as a region; an element ``A[i, j]`` takes its extents from ``like``. A
    region of a tile (shared, fragment, local) that lies outside it is an OutOfBoundsError."""
    if isinstance(x, BufferRegion):
        return check_region_in_bounds(x, what)
    if isinstance(x, Buffer):
        return x.region()
    if isinstance(x, BufferLoad):
        if like is None:
            raise KernelTypeError(
                f"{what}: {describe(x)} gives only where the tile starts; the other operand must give "
                "its extents (a buffer or a slice region)")
        return check_region_in_bounds(_region_from_start(x, like.tile_shape(), what), what)
    raise KernelTypeError(f"{what}: expected a buffer, a region A[a:b, ...] or an element A[i, j], "
                          f"got {describe(x)}")


def _index_range(i: Any) -> Optional[tuple]:
    """Inclusive ``(lo, hi)`` of an index over the ranges of the enclosing loops and block
    indices (None when unknown)."""
    from tegula.arith.bound import bound
    from tegula.language.builder import active

    b = active()
    r = bound(as_expr(i), b.ranges if b is not None else None)
    return None if r is None or r[0] is None or r[1] is None else (int(r[0]), int(r[1]))


def region_text(r: BufferRegion) -> str:
    """``S[16:48, 0]``: the region as the user wrote it (where its bounds are constants)."""
    parts = []
    for st, ext in r.ranges:
        st, ext = simplify(as_expr(st)), simplify(as_expr(ext))
        if isinstance(ext, Const) and ext.value == 1:
            parts.append(str(st))
        elif isinstance(st, Const) and isinstance(ext, Const):
            parts.append(f"{st.value}:{st.value + ext.value}")
        else:
            parts.append(f"{st}:{st} + {ext}")
    return f"{r.buffer.name}[{', '.join(parts)}]"


def check_region_in_bounds(r: BufferRegion, what: str) -> BufferRegion:
    """OutOfBoundsError when region ``r`` of a tile in shared, fragment or local memory leaves
    the tile for every value its start can take (constant starts, loop indices over their
    ranges): found when the kernel is built, the same on every target. Global regions may
    overhang (out-of-bounds reads give zero, writes are dropped)."""
    buf = r.buffer
    if buf.is_global or buf.is_var:
        return r
    for k, ((st, ext), dim) in enumerate(zip(r.ranges, buf.shape)):
        e = simplify(as_expr(ext))
        if not isinstance(dim, int) or not isinstance(e, Const):
            continue
        span = _index_range(st)
        if span is None:
            bad = int(e.value) > dim
        else:
            bad = span[0] + int(e.value) > dim or span[1] < 0
        if bad:
            raise OutOfBoundsError(
                f"{what}: the region {region_text(r)} reaches beyond dimension {k} of "
                f"'{buf.name}' {shape_str(tuple(buf.shape))}, which has size {dim}",
                hint=f"a {buf.scope} tile has no elements outside its shape; take a region inside "
                     f"it (indices 0 to {dim - 1} in dimension {k}), or allocate a larger tile")
    return r


def _region_from_start(load: BufferLoad, tile: tuple[Dim, ...], what: str) -> BufferRegion:
    buf = load.buffer
    if len(tile) > buf.ndim:
        raise ShapeError(f"{what}: a tile of shape {shape_str(tile)} does not fit in "
                         f"{buf.ndim}-d buffer '{buf.name}'")
    # The tile's extents fill the trailing dimensions; the leading ones take extent 1.
    extents = (1,) * (buf.ndim - len(tile)) + tuple(tile)
    return BufferRegion(buf, tuple(zip(load.indices, extents)))


def _same_extent(a: Dim, b: Dim) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    d = simplify(as_expr(a) - as_expr(b))
    if isinstance(d, Const):
        return d.value == 0
    return True  # symbolic extents that cannot be compared statically are checked at run time


def same_shape(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_same_extent(x, y) for x, y in zip(a, b))


@tile_rule(Copy, "check")
def copy(src: Any, dst: Any) -> Copy:
    if isinstance(src, BufferLoad) and isinstance(dst, BufferLoad):
        raise KernelTypeError("T.copy: both operands are single elements, so the tile size is unknown; "
                              "give at least one side as a buffer or a slice region")
    if isinstance(src, BufferLoad):
        d = to_region(dst, "T.copy destination")
        s = to_region(src, "T.copy source", like=d)
    else:
        s = to_region(src, "T.copy source")
        d = to_region(dst, "T.copy destination", like=s)
    if not same_shape(s.tile_shape(), d.tile_shape()):
        raise ShapeError(
            f"T.copy: source tile {shape_str(s.tile_shape())} of '{s.buffer.name}' does not match "
            f"destination tile {shape_str(d.tile_shape())} of '{d.buffer.name}'",
            hint="both sides must have the same extents (dimensions of extent 1 are ignored)")
    return Copy(s, d)


# (and the NPU memories: T.gemm on L1 or L0 operands into L0C, as the Ascend 950 dialect
# writes it)
_GEMM_OPERAND_SCOPES = SHARED + (FRAGMENT, LOCAL) + ("l1", "l0a", "l0b")


@tile_rule(Gemm, "check")
def gemm(A: Any, B: Any, C: Any, transpose_A: bool, transpose_B: bool, policy: Any,
         clear_accum: bool, k_pack: int, wg_wait: int) -> Gemm:
    a, b, c = (to_region(x, f"T.gemm operand {n}") for x, n in ((A, "A"), (B, "B"), (C, "C")))
    for r, n in ((a, "A"), (b, "B")):
        if r.buffer.scope not in _GEMM_OPERAND_SCOPES:
            raise ScopeError(f"T.gemm: operand {n} ('{r.buffer.name}') is in {r.buffer.scope} memory; "
                             "A and B must be in shared memory or fragments",
                             hint="copy it into a T.alloc_shared buffer first")
    if c.buffer.scope not in (FRAGMENT, LOCAL, "l0c"):
        raise ScopeError(f"T.gemm: the accumulator C ('{c.buffer.name}') is in {c.buffer.scope} memory; "
                         "it must be a fragment", hint="allocate it with T.alloc_fragment")
    sa, sb, sc = a.tile_shape(), b.tile_shape(), c.tile_shape()
    for s, r, n in ((sa, a, "A"), (sb, b, "B"), (sc, c, "C")):
        if len(s) != 2:
            raise ShapeError(f"T.gemm: operand {n} ('{r.buffer.name}') must be a 2-d tile, "
                             f"got shape {shape_str(s)}")
    M, Ka = (sa[1], sa[0]) if transpose_A else (sa[0], sa[1])
    Kb, N = (sb[1], sb[0]) if transpose_B else (sb[0], sb[1])
    if not _same_extent(Ka, Kb):
        raise ShapeError(
            f"T.gemm: the reduction dimensions differ: A ('{a.buffer.name}', shape {shape_str(sa)}"
            f"{', transposed' if transpose_A else ''}) has K={Ka} but B ('{b.buffer.name}', shape "
            f"{shape_str(sb)}{', transposed' if transpose_B else ''}) has K={Kb}",
            hint="check transpose_A / transpose_B")
    if not same_shape((M, N), sc):
        raise ShapeError(f"T.gemm: C ('{c.buffer.name}') has shape {shape_str(sc)} but op(A) @ op(B) "
                         f"is {shape_str((M, N))}")
    if a.dtype != b.dtype and not (a.dtype.bits == 8 and b.dtype.bits == 8):
        raise DTypeError(f"T.gemm: A is {a.dtype} but B is {b.dtype}; they must have the same dtype")
    if a.dtype.is_int != c.dtype.is_int:
        raise DTypeError(f"T.gemm: {a.dtype} operands need a "
                         f"{'int32' if a.dtype.is_int else 'floating-point'} accumulator, C is {c.dtype}")
    pol = getattr(policy, "name", policy)
    if pol not in GEMM_POLICIES:
        raise KernelTypeError(f"T.gemm: unknown policy {policy!r}; use T.GemmWarpPolicy.Square, "
                              "FullRow or FullCol")
    if isinstance(clear_accum, Expr):  # clear_accum=(k == 0): the Ascend 950 dialect's form
        if c.buffer.scope != "l0c":
            raise KernelTypeError("T.gemm: clear_accum must be known when the kernel is compiled",
                                  hint="clear the accumulator with T.clear before the loop")
        from tegula.ir.expr import cast

        clear: Any = cast("bool", clear_accum)
    else:
        clear = bool(clear_accum)
    return Gemm(a, b, c, bool(transpose_A), bool(transpose_B), pol, clear, int(k_pack), int(wg_wait))


def _norm_dim(dim: Any, ndim: int, what: str) -> int:
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise KernelTypeError(f"{what}: dim must be a Python int, got {dim!r}")
    if not -ndim <= dim < ndim:
        raise ShapeError(f"{what}: dim={dim} is out of range for a {ndim}-d tile")
    return dim % ndim


@tile_rule(Reduce, "check")
def reduce(kind: str, src: Any, dst: Any, dim: Any, clear: bool) -> Reduce:
    what = f"T.reduce_{kind}"
    s, d = to_region(src, f"{what} source"), to_region(dst, f"{what} destination")
    for r in (s, d):
        if r.buffer.is_global:
            raise ScopeError(f"{what}: '{r.buffer.name}' is in global memory; reductions work on "
                             "fragments or shared memory", hint="T.copy the tile into a fragment first")
    _check_kind(what, kind, s, d)
    shape = s.extents
    k = _norm_dim(dim, len(shape), what)
    want = shape[:k] + shape[k + 1:]
    got = d.extents
    keep = shape[:k] + (1,) + shape[k + 1:]
    if not (same_shape(tuple(want), tuple(got)) or same_shape(tuple(keep), tuple(got))
            or same_shape(tuple(e for e in want if e != 1), d.tile_shape())):
        raise ShapeError(f"{what}: reducing {shape_str(shape)} along dim {k} gives {shape_str(want)}, "
                         f"but the destination '{d.buffer.name}' has shape {shape_str(got)}")
    return Reduce(kind, s, d, k, bool(clear))


def _check_kind(what: str, kind: str, *regions: BufferRegion) -> None:
    """``kind`` has a row in :mod:`tegula.ir.combiners`, and the regions' dtypes suit it."""
    row = COMBINERS.get(kind)
    if row is None:
        raise KernelTypeError(f"{what}: no such reduction kind {kind!r}; known: {', '.join(COMBINERS)}")
    for r in regions:
        if row.ints and not r.dtype.is_int:
            raise DTypeError(f"{what}: '{r.buffer.name}' is {r.dtype}; bitwise reductions need "
                             "integer tiles", hint="use an int or uint dtype")


@tile_rule(CumSum, "check")
def cumsum(src: Any, dst: Any, dim: Any, reverse: bool, kind: str = "sum") -> CumSum:
    what = f"T.cum{kind}"
    s = to_region(src, f"{what} source")
    d = to_region(dst if dst is not None else src, f"{what} destination")
    if not same_shape(s.extents, d.extents):
        raise ShapeError(f"{what}: source {shape_str(s.extents)} and destination "
                         f"{shape_str(d.extents)} differ")
    _check_kind(what, kind, s, d)
    return CumSum(s, d, _norm_dim(dim, len(s.extents), what), bool(reverse), kind)


@tile_rule(Fill, "check")
def fill(dst: Any, value: Any) -> Fill:
    if isinstance(dst, BufferLoad):  # T.fill(S[0], v): the one-element region at that index
        if any(not i.dtype.is_int for i in dst.indices):
            raise KernelTypeError("T.fill: the element's indices must be integers")
        d = BufferRegion(dst.buffer, tuple((i, const(1)) for i in dst.indices))
    else:
        d = to_region(dst, "T.fill destination", like=None)
    return Fill(d, as_expr(value, like=d.dtype))


# dtypes a GPU can update atomically (the device headers have one overload each)
ATOMIC_DTYPES = ("int32", "uint32", "int64", "uint64", "float16", "bfloat16", "float32", "float64")


def _atomic_dtype(what: str, d: Any) -> None:
    if d.name not in ATOMIC_DTYPES:
        raise DTypeError(f"{what}: the destination is {d}, which cannot be updated atomically",
                         hint=f"atomics take {', '.join(ATOMIC_DTYPES)}")


@tile_rule(Atomic, "check")
def atomic(kind: str, dst: Any, value: Any) -> Atomic:
    what = f"T.atomic_{kind}"
    if isinstance(dst, (Buffer, BufferRegion, BufferLoad)):
        _atomic_dtype(what, dst.dtype)
    if isinstance(value, (Buffer, BufferRegion)):
        v = to_region(value, f"{what} value")
        d = to_region(dst, f"{what} destination", like=v)
        if not same_shape(v.tile_shape(), d.tile_shape()):
            raise ShapeError(f"{what}: value tile {shape_str(v.tile_shape())} does not match "
                             f"destination tile {shape_str(d.tile_shape())}")
        return Atomic(kind, d, v)
    if isinstance(dst, BufferLoad):
        d = BufferRegion(dst.buffer, tuple((i, 1) for i in dst.indices))
    else:
        d = to_region(dst, f"{what} destination")
    return Atomic(kind, d, as_expr(value, like=d.dtype))


def tile_shape_arg(shape: Any, what: str) -> tuple[int, ...]:
    """A static tile shape from an int or a sequence of ints (possibly constant expressions)."""
    if isinstance(shape, (int, Expr)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise KernelTypeError(f"{what}: shape must be an int or a tuple of ints, got {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, Expr):
            d = simplify(d)
            if isinstance(d, Const):
                d = d.value
        if isinstance(d, Expr) or not isinstance(d, int) or isinstance(d, bool):
            raise ShapeError(
                f"{what}: tile shapes must be compile-time constants, but dimension {d} is only known "
                "when the kernel runs", hint="use a constant tile size and guard the tail, "
                "or pass the size as a compile-time argument")
        if d <= 0:
            raise ShapeError(f"{what}: dimensions must be positive, got {shape_str(tuple(shape))}")
        out.append(int(d))
    return tuple(out)


def store_value(buf: Buffer, value: Any) -> Expr:
    """The value stored into ``buf``, converted to its dtype."""
    from tegula.ir.expr import cast

    if isinstance(value, (Buffer, BufferRegion)) and not (isinstance(value, Buffer) and value.is_var):
        raise KernelTypeError(f"cannot store {describe(value)} into one element of '{buf.name}'",
                              hint="use T.copy to move tiles")
    return cast(buf.dtype, as_expr(value, like=buf.dtype))


def index_list(buf: Buffer, key: Any) -> tuple[Expr, ...]:
    if not isinstance(key, tuple):
        key = (key,)
    if buf.is_var and len(key) == 1:
        return (const(0),)
    if any(isinstance(k, slice) for k in key):
        raise KernelTypeError(f"cannot assign to a slice of '{buf.name}'",
                              hint="use T.copy, T.fill, or a T.Parallel loop")
    if len(key) != buf.ndim:
        raise ShapeError(f"buffer '{buf.name}' has {buf.ndim} dimension(s) but is indexed with {len(key)}")
    out = []
    for k in key:
        e = as_expr(k)
        if not (e.dtype.is_int):
            raise DTypeError(f"index into '{buf.name}' must be an integer, got {e.dtype}")
        out.append(e)
    check_in_bounds(buf, out)
    return tuple(out)


def check_in_bounds(buf: Buffer, indices: Any) -> None:
    """OutOfBoundsError for an index outside its (constant) dimension: a constant, or (tiles in
    shared, fragment or local memory) an index outside it for every value of the enclosing loop
    indices. Found when the kernel is built, the same on every target."""
    for k, (i, dim) in enumerate(zip(indices, buf.shape)):
        if not isinstance(dim, int) or buf.is_var:
            continue
        v = simplify(i) if isinstance(i, Expr) else i
        v = v.value if isinstance(v, Const) else v
        if isinstance(v, int) and not 0 <= v < dim:
            raise OutOfBoundsError(f"index {v} is out of bounds for dimension {k} of '{buf.name}', "
                                   f"which has size {dim}", hint=f"valid indices are 0 to {dim - 1}")
        span = None if isinstance(v, int) or buf.is_global else _index_range(v)
        if span is not None and (span[0] >= dim or span[1] < 0):
            raise OutOfBoundsError(f"index {v} (from {span[0]} to {span[1]} over the enclosing loops) "
                                   f"is out of bounds for dimension {k} of '{buf.name}', which has "
                                   f"size {dim}", hint=f"valid indices are 0 to {dim - 1}")


def check_lane_conflicts(nest: Any) -> None:
    """RaceError when a T.Parallel nest reads a global or shared buffer it also writes at another
    index: one lane would read an element another lane writes, and on a GPU nothing orders the two
    (the interpreter's answer and the GPU's would differ)."""
    from tegula.ir.stmt import BufferStore
    from tegula.ir.structural import structural_equal
    from tegula.ir.visitor import post_order_visit

    stores: list = []
    loads: list = []

    def visit(n: Any) -> None:
        if isinstance(n, BufferStore) and (n.buffer.is_global or n.buffer.is_shared):
            stores.append(n)
        elif isinstance(n, BufferLoad) and (n.buffer.is_global or n.buffer.is_shared):
            loads.append(n)

    post_order_visit(nest, visit)
    for st in stores:
        want = [simplify(i) for i in st.indices]
        for ld in loads:
            if ld.buffer is st.buffer and not all(
                    structural_equal(a, simplify(b), map_free_vars=False) for a, b in zip(want, ld.indices)):
                raise RaceError(
                    f"this T.Parallel loop writes '{st.buffer.name}' and reads it at another index; "
                    "one iteration would read what another one writes, in no defined order",
                    getattr(ld, "span", None) or st.span,
                    hint="read from one buffer and write another (or copy it to a fragment first)")
def check_fragment_reads(e: Any) -> None:
    """Outside ``T.Parallel``, an element of a fragment is read as TileLang reads it: the
    fragment is then held whole by every thread (CUDA layout inference gives it the replicated
    layout: the kernel annotation ``replicated_fragments`` lists it), so any thread can read any
    element; a fragment too large for that is a ScopeError. All targets agree."""
    from tegula.language.builder import active

    def see(n: Any) -> None:
        if isinstance(n, BufferLoad) and n.buffer.scope == "local.fragment" and n.buffer.numel() != 1:
            size = n.buffer.numel()
            if not isinstance(size, int) or size > REPLICATED_FRAGMENT_LIMIT:
                raise ScopeError(
                    f"fragment '{n.buffer.name}' is read element by element outside T.Parallel, so "
                    f"every thread would hold all of it, and its {size} elements are more than the "
                    f"{REPLICATED_FRAGMENT_LIMIT} a thread can keep", n.span,
                    hint="read it inside `for i in T.Parallel(...)`, copy it to shared memory first, "
                    "or keep the value in a one-element fragment or T.alloc_var")
            b = active()
            if b is not None and b.kernel is not None:
                held = b.kernel.annotations.setdefault("replicated_fragments", [])
                if n.buffer not in held:
                    held.append(n.buffer)
    if isinstance(e, Expr):
        post_order_visit(e, see)


# elements a fragment read outside T.Parallel may have (each thread keeps a copy of all of them)
REPLICATED_FRAGMENT_LIMIT = 1024


def check_dtype(x: Any, what: str) -> dt.DType:
    try:
        d = dt.as_dtype(x)
    except (TypeError, ValueError) as e:
        close = difflib.get_close_matches(x, [d.name for d in dt.ALL_DTYPES], n=1) \
            if isinstance(x, str) else []
        raise DTypeError(f"{what}: {e}", hint=f"did you mean '{close[0]}'?" if close else None) from None
    if d.bits < 8:
        raise UnsupportedError(f"{what}: packed {d.bits}-bit dtype {d.name} is not supported yet "
                               "(tensors, buffers, casts and constants of it)",
                               hint="hold the packed values as uint8 / int8 and unpack them with "
                               "shifts and masks")
    return d


def real_shape_regions(what: str, src: Any, dst: Any, dim: Any, real_shape: Any) -> tuple:
    """``T.reduce_*(src, dst, dim, real_shape=[m, n])`` (TileLang-Ascend's slice-buffer reduce):
    the reduction reads only the leading ``m x n`` corner of the 2-d tile ``src`` (an extent of 0
    means the whole dimension) and writes its ``m`` (``dim=-1``) or ``n`` (``dim=0``) results to
    the leading elements of ``dst``, which may keep its physical ``[cols]`` / ``[1, cols]`` shape.
    Returns the ``(src, dst)`` regions of that plain reduction."""
    if not isinstance(real_shape, (list, tuple)) or len(real_shape) != 2:
        raise KernelTypeError(f"{what}: real_shape must be a list of two extents, got {real_shape!r}",
                              hint="write real_shape=[rows, cols] (0 keeps a dimension whole)")
    s = to_region(src, f"{what} source")
    d = to_region(dst, f"{what} destination")
    ext = list(s.extents)
    if len(ext) < 2 or any(not (isinstance(e, int) and e == 1) for e in ext[:-2]):
        raise ShapeError(f"{what}: real_shape describes a 2-d tile; '{s.buffer.name}' has extents "
                         f"{shape_str(tuple(ext))}")
    new = []
    for axis, (v, e) in enumerate(zip(real_shape, ext[-2:])):
        v = v.value if isinstance(v, Const) else v
        if isinstance(v, bool) or not isinstance(v, int) or v < 0 or (isinstance(e, int) and v > e):
            raise ShapeError(f"{what}: real_shape[{axis}] = {v!r} must be an int from 0 to the tile's "
                             f"extent {e}")
        new.append(e if v == 0 else v)
    rank = len(ext)
    k = dim + rank if isinstance(dim, int) and dim < 0 else dim
    if k not in (rank - 2, rank - 1):
        raise ShapeError(f"{what}: with real_shape, dim must be one of the two tile axes, got {dim}")
    s2 = BufferRegion(s.buffer, s.ranges[:-2] + tuple((st, n) for (st, _), n in zip(s.ranges[-2:], new)),
                      span=s.span)
    length = new[0] if k == rank - 1 else new[1]
    got = d.tile_shape()
    keep = tuple(new[:1] + [1]) if k == rank - 1 else (1, new[1])
    if same_shape(d.extents, keep) or same_shape(got, (length,) if length != 1 else ()):
        return s2, d
    if len(got) != 1 or (isinstance(got[0], int) and isinstance(length, int) and got[0] < length):
        raise ShapeError(f"{what}: reducing the {shape_str(tuple(new))} corner of '{s.buffer.name}' "
                         f"along dim {dim} gives {length} values, which the destination '{d.buffer.name}' "
                         f"{shape_str(d.extents)} does not hold")
    axis = next(i for i, e in enumerate(d.extents) if not (isinstance(e, int) and e == 1))
    rng = list(d.ranges)
    rng[axis] = (rng[axis][0], length)
    return s2, BufferRegion(d.buffer, tuple(rng), span=d.span)
