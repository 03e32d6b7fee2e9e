"""Whether a loop's iterations can hand shared memory from one thread to another.

A loop nest that writes shared buffers only by element stores, reads none of the buffers it
writes and calls nothing that touches shared memory hands nothing between threads when no
element is written by two threads: each thread writes its own elements, whatever the
iteration. ``InsertBarriers`` then takes the loop as one access with no barrier inside, where
buffer granularity put one in every iteration (a thread-level GEMM's ``stmatrix`` epilogue::

    for i in T.unroll(4):                      for i in T.unroll(4):
        for j in T.unroll(4):                      for j in T.unroll(4):
            for e in T.unroll(8):                      for e in T.unroll(8):
                C_s[f(tx, i, j, e)] = ...                  C_s[f(tx, i, j, e)] = ...
                T.sync_threads()               T.sync_threads()
    ... = C_s[g(tx, k)]                        ... = C_s[g(tx, k)]

128 barriers per block before, one after).

The proof enumerates: every thread index of the block and every iteration of the loops around
each store (constant bounds, at most :data:`MAX_POINTS` points), the store's index computed with
numpy through the operator table. Index terms that name neither the thread index nor those loops
(block indices, outer loops) must be the same sum in every store of a buffer: they shift all its
elements alike. Anything else (loads in the index, a while loop, a barrier, a builtin writing
shared memory) keeps the barriers where they were.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tegula.ir.evaluate import HostEvalError, array_fn
from tegula.ir.expr import Const, Expr, Var
from tegula.ir.linear import linear
from tegula.ir.stmt import BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt
from tegula.ir.visitor import collect_vars, substitute

MAX_POINTS = 1 << 17  # thread indices x iterations enumerated per store at most

_SYNCS = ("sync_threads", "tl::named_barrier_sync")


class _Unproven(Exception):
    pass


def iterations_disjoint(loop: For, tid: Var, threads: int, lets: dict, accesses: Any) -> bool:
    """Whether no element of a shared buffer that ``loop`` writes is written by two threads, and
    the loop reads none of them (``lets``: values of the lets around it; ``accesses(node)``: the
    shared buffers a node reads and writes, as InsertBarriers counts them)."""
    sites: list = []
    reads: set = set()
    local = dict(lets)
    try:
        _collect(loop, [], sites, reads, local, accesses)
        if not sites or reads & {b for b, _, _ in sites}:
            return False
        by_buffer: dict = {}
        for buf, idx, loops in sites:
            by_buffer.setdefault(buf, []).append((idx, loops))
        return all(_one_writer(stores, tid, threads, local) for stores in by_buffer.values())
    except _Unproven:
        return False


def _collect(s: Stmt, loops: list, sites: list, reads: set, lets: dict, accesses: Any) -> None:
    if isinstance(s, SeqStmt):
        for x in s.stmts:
            _collect(x, loops, sites, reads, lets, accesses)
    elif isinstance(s, For):
        if not (isinstance(s.start, Const) and isinstance(s.extent, int) and s.step == 1):
            raise _Unproven
        _collect(s.body, loops + [(s.var, int(s.start.value), s.extent)], sites, reads, lets, accesses)
    elif isinstance(s, LetStmt):
        lets[s.var] = s.value
        reads |= accesses(s.value)[0]
    elif isinstance(s, IfThenElse):  # a subset of the threads or iterations: still disjoint
        reads |= accesses(s.cond)[0]
        _collect(s.then, loops, sites, reads, lets, accesses)
        if s.else_ is not None:
            _collect(s.else_, loops, sites, reads, lets, accesses)
    elif isinstance(s, BufferStore):
        for e in (s.value, *s.indices):
            r, w = accesses(e)
            if w:
                raise _Unproven
            reads |= r
        if s.buffer.is_shared:
            sites.append((s.buffer, s.indices, loops))
    elif isinstance(s, Evaluate):
        r, w = accesses(s)
        if w or getattr(s.value, "name", None) in _SYNCS:
            raise _Unproven
        reads |= r
    else:
        raise _Unproven


def _one_writer(stores: list, tid: Var, threads: int, lets: dict) -> bool:
    """Whether the stores of one buffer never write one element from two threads."""
    shift: Optional[list] = None
    elems: list = []
    owners: list = []
    for idx, loops in stores:
        names = [tid] + [v for v, _, _ in loops]
        sizes = [threads] + [n for _, _, n in loops]
        if int(np.prod(sizes)) > MAX_POINTS:
            return False
        grids = np.meshgrid(*[np.arange(0, threads)] + [np.arange(a, a + n) for _, a, n in loops],
                            indexing="ij")
        env = {id(v): g.astype(v.dtype.np) for v, g in zip(names, grids)}
        enumerated = {id(v) for v in names}
        parts, uniform = [], []
        for e in idx:
            varying, fixed = _split(_expand(e, lets), enumerated)
            parts.append(np.broadcast_to(varying(env), grids[0].shape).ravel())
            uniform.append(fixed)
        if shift is None:
            shift = uniform
        elif uniform != shift:  # block-uniform offsets that differ between the stores
            return False
        elems.append(np.stack(parts, axis=1))
        owners.append(grids[0].ravel())
    keys, inverse = np.unique(np.concatenate(elems), axis=0, return_inverse=True)
    tids = np.concatenate(owners)
    lo = np.full(len(keys), threads, np.int64)
    hi = np.full(len(keys), -1, np.int64)
    np.minimum.at(lo, inverse.ravel(), tids)
    np.maximum.at(hi, inverse.ravel(), tids)
    return bool((lo == hi).all())


def _expand(e: Expr, lets: dict) -> Expr:
    for _ in range(16):
        used = [v for v in collect_vars(e) if v in lets]
        if not used:
            return e
        e = substitute(e, {v: lets[v] for v in used})
    raise _Unproven


def _split(e: Expr, enumerated: set) -> tuple:
    """``e`` as (a numpy function of the enumerated vars, the key of the terms naming none)."""
    terms, const = linear(e)
    fns, fixed = [], []
    for key, (term, c) in terms.items():
        ids = {id(v) for v in collect_vars(term)}
        if not ids & enumerated:
            fixed.append((key, c))
        elif ids <= enumerated:
            fns.append((_np(term), c))
        else:  # a term mixing the thread or loop index with a block-uniform value
            raise _Unproven

    def value(env: dict) -> Any:
        out: Any = np.int64(const)
        for f, c in fns:
            out = out + np.int64(c) * f(env).astype(np.int64)
        return out

    return value, sorted(fixed, key=repr)


def _np(e: Any) -> Any:
    """``e`` as a function of the env of enumerated values (integer index arithmetic only)."""
    try:
        return array_fn(e, lambda v: lambda env, k=id(v): env[k])
    except HostEvalError:
        raise _Unproven from None
