"""Builders of mbarrier and TMA statements, and which copies the copy engine (TMA) can do: shared by
TmaPipeline, WarpSpecialize, TmaStores and the TMA lowering.
"""
from __future__ import annotations

from typing import Any

from tegula.arith.simplify import const_int
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Builtin, BufferLoad
from tegula.ir.stmt import Copy, Evaluate, IfThenElse, Stmt

# element types a tensor map can describe, and the most elements of one box dimension
TMA_DTYPES = ("float16", "bfloat16", "float32", "int8", "uint8", "int32", "float8_e4m3", "float8_e5m2")
MAX_BOX = 256


def call_stmt(name: str, *args: Any, template: tuple = ()) -> Stmt:
    """``T.evaluate(name<template>(args))``."""
    attrs = (("template", template),) if template else ()
    return Evaluate(Builtin(name, tuple(E.as_expr(a) for a in args), dt.bool_, attrs))


def barrier_addr(bars: Buffer, stage: E.Expr) -> Builtin:
    """``&bars[stage]`` as the mbarrier builtins take it."""
    return Builtin("address_of", (BufferLoad(bars, (stage,)),), dt.int64, (("ctype", "uint64_t"),))


def one_thread(s: Stmt) -> Stmt:
    """``s`` run by thread 0 alone."""
    return IfThenElse(E.compare("eq", Builtin("thread_idx", (), dt.int32), 0), s)


def tma_copy_ok(c: Copy) -> bool:
    """True when the copy engine can do ``c`` (a global -> shared copy into one whole 2-d tile of
    its shared buffer, leading dimensions such as stages indexed)."""
    return c.src.buffer.is_global and tma_box_ok(c, c.src, c.dst)


def tma_store_ok(c: Copy) -> bool:
    """True when the copy engine can store ``c`` (one whole 2-d shared tile -> a box of a global
    tensor; the box may run past the tensor's edge, where the copy engine drops the elements)."""
    return c.dst.buffer.is_global and c.src.buffer.is_shared and tma_box_ok(c, c.dst, c.src)


def tma_box_ok(c: Copy, glob: Any, tile: Any) -> bool:
    """True when region ``glob`` of a global tensor and the whole 2-d tile ``tile`` of a shared
    buffer (leading dimensions such as stages indexed) are one box of a tensor map: a static
    global shape of at most 5 dimensions with 16-byte aligned row strides, the same dtype, at most
    256 elements per box dimension, the tile's columns the tensor's innermost dimension."""
    g, t = glob.buffer, tile.buffer
    if g.data is not None:  # T.make_tensor: no tensor map for an address computed in the kernel
        return False
    if g.dtype != t.dtype or g.dtype.name not in TMA_DTYPES or not 1 <= g.ndim <= 5:
        return False
    if not all(isinstance(d, int) for d in g.shape) or not all(isinstance(d, int) for d in t.shape):
        return False
    if c.annotations.get("disable_tma"):  # T.copy(..., disable_tma=True)
        return False
    if len(t.shape) < 2 or any(not (isinstance(e, int) and e == 1) for e in tile.extents[:-2]):
        return False
    if any(const_int(s) != 0 or e != d for (s, e), d in zip(tile.ranges[-2:], t.shape[-2:])):
        return False
    eb = g.dtype.itemsize
    stride = eb
    for d in reversed(g.shape[1:]):
        stride *= int(d)
        if stride % 16:
            return False
    ext = glob.extents
    if not all(isinstance(e, int) and 1 <= e <= MAX_BOX for e in ext[:-1]):
        return False
    rows, cols = (int(x) for x in t.shape[-2:])
    big = [int(e) for e in ext if not (isinstance(e, int) and e == 1)]
    # the tile's columns are the source's innermost dimension; its rows one outer dimension
    return ext[-1] == cols and big == [rows, cols] and (cols * eb) % 16 == 0


def tile_numel(extents: Any) -> int:
    """Elements of a tile of ``extents`` (0 when one is not a constant)."""
    n = 1
    for e in extents:
        n *= int(e) if isinstance(e, int) else 0
    return n
