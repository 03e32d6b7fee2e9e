"""Pure per-lane subexpressions computed once per distinct value of the scalars they depend on.

Both closure backends evaluate index arithmetic for every lane each time a statement runs: the
interpreter over the lanes of a ``T.Parallel`` nest, the emulator over the threads of a block.
Much of it depends only on lane constants (the nest's index arrays, the thread index) and on a
few integer scalars that repeat (block indices, loop counters): ``(by * 64 + m) // 64 % 64`` is
the same array for all 36 k-steps of a block, ``(k_iter * 32 + k) // 384`` the same for every
block at one ``k_iter``, ``tx % 16 * 64`` the same everywhere. :class:`Memo` wraps the largest
such subexpressions: the closure keeps the arrays it computed, keyed by the values of those
scalars, and returns the kept array when they recur.

An expression qualifies when it reads no memory (no loads, no builtins) and every variable in it
is a *lane constant* (its value is the same array whenever the expression runs), an integer or
bool scalar (its value is part of the key), or a let-bound variable whose value qualifies (its
dependencies are the key's). Float scalars never key (``-0.0 == 0.0``). Only array values are
kept (scalars cost less to compute than to look up); kept arrays are read-only, so a consumer
that wrote into one would fail loudly instead of changing later results. The values are the
ones the closure computes, so results stay bit for bit what they were.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Optional

import numpy as np

from tegula.ir.expr import BinOp, Call, Cast, Compare, Const, Select, UnaryOp, Var

# node classes worth keeping (leaves are cheaper to read than to look up)
_COMPOUND = (BinOp, Compare, UnaryOp, Cast, Call, Select)
_ROOM = 64            # kept arrays per table before it starts over
_TRIAL = 64           # misses after which an expression that rarely hits stops keeping
_MAX_ELEMS = 1 << 15  # larger arrays are not kept (their arithmetic outweighs the bookkeeping)

_KEPT: dict = {}   # id -> (weak reference, facts) of every array a table keeps


def _forget(k: int, r: Any) -> None:
    if _KEPT.get(k, (None,))[0] is r:
        del _KEPT[k]


def _keep(v: np.ndarray) -> np.ndarray:
    v.flags.writeable = False
    k = id(v)
    _KEPT[k] = (weakref.ref(v, lambda r, k=k: _forget(k, r)), {})
    return v


def _drop(table: dict) -> None:
    """Empty ``table``, forgetting what was remembered of its arrays."""
    for v in table.values():
        _KEPT.pop(id(v), None)
    table.clear()


def _facts(v: np.ndarray) -> Optional[dict]:
    """What is remembered of ``v`` when a table keeps it (its values never change), else None."""
    got = _KEPT.get(id(v))
    return got[1] if got is not None and got[0]() is v else None


def value_range(v: np.ndarray) -> tuple:
    """``(v.min(), v.max())`` of a non-empty array, remembered for arrays a table keeps, so
    bounds checks of kept indices cost a lookup."""
    f = _facts(v)
    if f is None:
        return v.min(), v.max()
    r = f.get("range")
    if r is None:
        r = f["range"] = (v.min(), v.max())
    return r


def outside(v: np.ndarray, n: int) -> tuple:
    """``(lanes of v outside [0, n), v clipped into it)``, remembered for kept arrays."""
    f = _facts(v)
    r = None if f is None else f.get(n)
    if r is None:
        r = ((v < 0) | (v >= n), np.clip(v, 0, n - 1))
        if f is not None:
            for x in r:
                x.flags.writeable = False
            f[n] = r
    return r


def _children(e: Any) -> Optional[tuple]:
    if isinstance(e, (BinOp, Compare)):
        return (e.a, e.b)
    if isinstance(e, UnaryOp):
        return (e.a,)
    if isinstance(e, Cast):
        return (e.value,)
    if isinstance(e, Call):
        return tuple(e.args)
    if isinstance(e, Select):
        return (e.cond, e.then, e.else_)
    return None


class Memo:
    """What one kernel's compilation knows about which variables an expression depends on.

    ``lane_sig(var, ctx)`` gives a hashable description of a variable whose value is the same
    array at every run there (the backend's: fixed ``T.Parallel`` index arrays, the thread
    index), or None. ``let_deps``: for a let-bound per-lane variable, what its value depends on
    (None: it does not qualify). Expressions of the same tree, lane arrays and key variables share
    one table (``tables``), so a subexpression that a statement computes three times is computed
    once."""

    def __init__(self, lane_sig: Callable[[Var, Any], Any]) -> None:
        self.lane_sig = lane_sig
        self.let_deps: dict = {}
        self.tables: dict = {}    # tree key -> [table, misses, hits]
        self._trees: dict = {}    # a node's description over its children's tree keys -> its tree key
        # while one expression compiles (depth > 0): id -> (node, tree key, key variables) of the
        # subexpressions compiled so far, so that a node's walk stops at its compiled children
        self._done: dict = {}
        self.depth = 0

    def deps(self, e: Any, ctx: Any, compiled: bool = False) -> Optional[tuple]:
        """``(key variables, tree key)`` of ``e``: the key variables as a sorted tuple of
        ``(slot, var)``, the tree key a hashable description of the tree and its lane arrays;
        None when ``e`` does not qualify (module docstring). ``compiled``: ``e`` was just
        compiled as part of the expression compiling now, and its parent's walk will stop at
        it (each node of an expression is walked once: compile time linear in its size)."""
        found: dict = {}
        tree = self._walk(e, ctx, found)
        if compiled:
            self._done[id(e)] = (e, tree, found)
        return None if tree is None else (tuple(sorted(found.items(), key=lambda x: x[0])), tree)

    def _walk(self, e: Any, ctx: Any, found: dict) -> Any:
        if isinstance(e, (int, float, bool)):
            return ("py", type(e).__name__, repr(e))
        if isinstance(e, Const):
            return ("c", e.dtype.name, repr(e.value))
        if isinstance(e, Var):
            k = id(e)
            sig = self.lane_sig(e, ctx)
            if sig is not None:
                return ("lane", k, sig)
            if k in self.let_deps:
                d = self.let_deps[k]
                if d is None:
                    return None
                found.update(d[0])
                return ("let", d[1])
            if k in ctx.vec_vars or not (e.dtype.is_int or e.dtype.is_bool):
                return None
            s = ctx.slots.get(e)
            if s is None:
                return None
            found[s] = e
            return ("var", k)
        got = self._done.get(id(e))
        if got is not None and got[0] is e:
            if got[1] is not None:
                found.update(got[2])
            return got[1]
        kids = _children(e)
        if kids is None:
            return None
        out = [type(e).__name__, getattr(e, "op", None) or getattr(e, "name", None),
               getattr(getattr(e, "to", None), "name", None)]
        for x in kids:
            t = self._walk(x, ctx, found)
            if t is None:
                return None
            out.append(t)
        # a small int per distinct tree: a parent's key holds its children's, not their trees
        return self._trees.setdefault(tuple(out), len(self._trees))

    def wrap(self, fn: Callable, deps: tuple) -> Callable:
        """``fn`` keeping its array results per value of the key variables' slots, in the table
        of its tree."""
        key, tree = deps
        slots = [s for s, _ in key]
        rec = self.tables.setdefault((tree, tuple(slots)), [{}, 0, 0])
        table = rec[0]

        if not slots:
            def once(env: list) -> Any:
                v = table.get(())
                if v is None:
                    v = fn(env)
                    if isinstance(v, np.ndarray) and v.size <= _MAX_ELEMS:
                        table[()] = _keep(v)
                return v
            return once
        one = slots[0] if len(slots) == 1 else -1

        def by_key(env: list) -> Any:
            if rec[1] < 0:
                return fn(env)
            k = env[one] if one >= 0 else tuple([env[s] for s in slots])
            try:
                v = table.get(k)
            except TypeError:  # an array where a scalar keys (a 0-d array, blocks side by side)
                return fn(env)
            if v is not None:
                rec[2] += 1
                return v
            v = fn(env)
            if not isinstance(v, np.ndarray) or v.size > _MAX_ELEMS:
                return v
            rec[1] += 1
            if rec[1] >= _TRIAL and 4 * rec[2] < rec[1]:
                rec[1] = -1   # keys that rarely recur: compute every time from now on
                _drop(table)
                return v
            if len(table) >= _ROOM:
                _drop(table)
            table[k] = _keep(v)
            return v
        return by_key


KEEP = True   # False: compile without a Memo (the tests compare both ways)


def new_memo(lane_sig: Callable[[Var, Any], Any]) -> Optional[Memo]:
    """A :class:`Memo` for one compilation (None when ``KEEP`` is off)."""
    return Memo(lane_sig) if KEEP else None


def compile_kept(rule: Callable, e: Any, ctx: Any) -> Any:
    """Compile ``e`` by ``rule`` under ``ctx.memo`` (a :class:`Memo`, or None): qualifying
    per-lane subexpressions come out wrapped by :meth:`Memo.wrap`."""
    memo = getattr(ctx, "memo", None)
    if memo is None:
        return rule(e, ctx)
    memo.depth += 1
    try:
        ce = rule(e, ctx)
        if isinstance(e, _COMPOUND):
            deps = memo.deps(e, ctx, compiled=True)
            if deps is not None and ce.vec:
                ce.fn = memo.wrap(ce.fn, deps)
    finally:
        memo.depth -= 1
        if not memo.depth:
            memo._done.clear()  # the next expression may see the same nodes in another context
    return ce
