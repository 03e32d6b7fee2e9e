"""What an NPU statement touches, for the passes and models that order or price it: the pipe a
statement runs on (:func:`pipe_of`), the buffers and regions it reads and writes
(:func:`accesses`, :func:`region_accesses`), the UB elements the scalar unit reads
(:func:`scalar_reads`) and whether two regions can overlap (:func:`disjoint_regions`).
InsertSync, cross-core sync, the scheduler's tasks, the cost model and the emulator's trace ask
this one module.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir import vecops
from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import BufferLoad, Const
from tegula.ir.npu import Mma, VecOp
from tegula.ir.stmt import BufferStore, Copy, Fill, For, LetStmt, Reduce, Stmt
from tegula.ir.visitor import post_order_visit, substitute
from tegula.arith.simplify import simplify


def scalar_ub_access(s: Stmt) -> bool:
    """True for the scalar unit's load (``x = ub[i]``) or store (``ub[i] = x``) of UB elements,
    which run on pipe S and need flags against the vector and copy pipes."""
    if isinstance(s, BufferStore):
        return s.buffer.scope == "ub" or any(b.scope == "ub" for b in _ub_loads(s.value))
    if isinstance(s, LetStmt):
        return any(b.scope == "ub" for b in _ub_loads(s.value))
    return False


def _ub_loads(e: Any) -> list:
    found: dict = {}
    post_order_visit(e, lambda n: found.setdefault(n.buffer, 1)
                     if isinstance(n, BufferLoad) and n.buffer.scope == "ub" else None)
    return list(found)


def pipe_of(s: Stmt, m: Any) -> str:
    """The pipe that runs tile operation ``s`` on machine ``m``."""
    if isinstance(s, (BufferStore, LetStmt)):
        return "S"
    if isinstance(s, Copy):
        p = m.path(s.src.buffer.scope, s.dst.buffer.scope)
        return p.pipe if p is not None else "MTE2"
    if isinstance(s, Mma) or (isinstance(s, Fill) and s.dst.buffer.scope == "l0c"):
        return "M"
    return "V"


def accesses(s: Stmt) -> list:
    """(buffer, writes) pairs of tile operation ``s``."""
    return [(r.buffer, w) for r, w in region_accesses(s)]


def region_accesses(s: Stmt) -> list:
    """(region, writes) pairs of tile operation ``s``."""
    return _raw_accesses(s)


def _raw_accesses(s: Stmt) -> list:
    if isinstance(s, (BufferStore, LetStmt)):  # the scalar unit's UB loads and stores, whole tiles
        reads = [(b.region(), False) for b in _ub_loads(s.value)]
        return reads + ([(s.buffer.region(), True)] if isinstance(s, BufferStore) and s.buffer.scope == "ub" else [])
    if isinstance(s, For):  # a T.Parallel nest: the buffers it loads and stores, whole
        out: dict = {}
        post_order_visit(s.body, lambda n: out.setdefault((n.buffer, isinstance(n, BufferStore)), 1)
                         if isinstance(n, (BufferLoad, BufferStore)) and n.buffer.scope != "local.var"
                         else None)
        return [(b.region(), w) for b, w in out]
    if isinstance(s, Copy):
        return [(s.src, False), (s.dst, True)]
    if isinstance(s, Mma):
        out = [(s.A, False), (s.B, False), (s.C, True)]
        return out if s.init is True else out + [(s.C, False)]
    if isinstance(s, VecOp):
        out = [(x, False) for x in s.srcs if isinstance(x, BufferRegion)] + [(s.dst, True)]
        out += [(b.region(), False) for b in scalar_reads(s)]   # T.tile.mul(x, x, m_ub[i])
        return out + [(s.dst, False)] if vecops.row(s.op).reads_dst else out
    if isinstance(s, Reduce):
        return [(s.src, False), (s.dst, True)] + ([] if s.clear else [(s.dst, False)])
    if isinstance(s, Fill):
        return [(s.dst, True)]
    return []


def scalar_reads(s: Any) -> list:
    """The on-chip buffers the scalar operands of vector op ``s`` load elements of."""
    found: dict = {}
    for x in s.srcs:
        if not isinstance(x, BufferRegion):
            post_order_visit(x, lambda n: found.setdefault(n.buffer, 1)
                             if isinstance(n, BufferLoad) and n.buffer.scope not in ("global", "local.var")
                             else None)
    return list(found)


def _offsets(a: Any, b: Any, lets: dict, shift: Optional[dict] = None) -> list:
    """Per dimension of regions ``a`` and ``b`` of one buffer: (start of b - start of a as an int
    or None when not constant, extent of a, extent of b); ``shift`` substitutes into b's starts
    (the next iteration). Empty when the regions cannot be compared."""

    if a is None or b is None or len(a.ranges) != len(b.ranges):
        return []

    def inline(e: Any) -> Any:
        for _ in range(8):
            e2 = substitute(e, lets)
            if e2 is e:
                break
            e = e2
        return e
    out = []
    for (sa, ea), (sb, eb) in zip(a.ranges, b.ranges):
        if not (isinstance(ea, int) and isinstance(eb, int)):
            out.append((None, ea, eb))
            continue
        sb = inline(sb)
        d = simplify((substitute(sb, shift) if shift else sb) - inline(sa))
        out.append((int(d.value) if isinstance(d, Const) else None, ea, eb))
    return out


def disjoint_regions(a: Any, b: Any, lets: dict, shift: Optional[dict] = None) -> bool:
    """True when regions ``a`` and ``b`` (``b`` shifted by ``shift``) never overlap: in some
    dimension one starts at least the other's extent after the other (affine starts; ``lets``
    gives the values of let-bound variables)."""
    return any(d is not None and (d >= ea or -d >= eb) for d, ea, eb in _offsets(a, b, lets, shift))


def covers(w: Any, a: Any, lets: dict) -> bool:
    """True when region ``w`` contains region ``a`` (both of one buffer)."""
    offs = _offsets(w, a, lets)
    return bool(offs) and all(d is not None and 0 <= d and d + ea2 <= ew for d, ew, ea2 in offs)


def disjoint_across_iterations(a: Any, b: Any, var: Any, step: int, lets: dict) -> bool:
    """True when region ``a`` of one iteration of the loop over ``var`` and region ``b`` of the
    next never overlap: some dimension's start moves by at least the extent."""
    return disjoint_regions(a, b, lets, {var: var + step})
