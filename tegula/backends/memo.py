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

from typing import Any, Callable, Optional

import numpy as np

from tegula.ir.expr import BinOp, Call, Cast, Compare, Const, Select, UnaryOp, Var

# node classes worth keeping (leaves are cheaper to read than to look up)
_COMPOUND = (BinOp, Compare, UnaryOp, Cast, Call, Select)
_ROOM = 256   # kept arrays per expression before its table starts over
_TRIAL = 64   # misses after which an expression that rarely hits stops keeping


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

    ``lane_const(var, ctx)`` says whether a variable's value is the same array at every run
    there (the backend's: fixed ``T.Parallel`` index arrays, the thread index). ``let_deps``: for
    a let-bound per-lane variable, the key variables of its value (None: it does not qualify)."""

    def __init__(self, lane_const: Callable[[Var, Any], bool]) -> None:
        self.lane_const = lane_const
        self.let_deps: dict = {}
        self.parent: Any = None   # key of the innermost expression being compiled (or None)

    def deps(self, e: Any, ctx: Any) -> Optional[tuple]:
        """The key variables of ``e`` (a sorted tuple of ``(slot, var)``), or None when ``e``
        does not qualify (module docstring)."""
        found: dict = {}
        return tuple(sorted(found.items())) if self._walk(e, ctx, found) else None

    def _walk(self, e: Any, ctx: Any, found: dict) -> bool:
        if isinstance(e, (int, float, bool, Const)):
            return True
        if isinstance(e, Var):
            k = id(e)
            if self.lane_const(e, ctx):
                return True
            if k in self.let_deps:
                d = self.let_deps[k]
                if d is None:
                    return False
                found.update(d)
                return True
            if k in ctx.vec_vars or not (e.dtype.is_int or e.dtype.is_bool):
                return False
            s = ctx.slots.get(e)
            if s is None:
                return False
            found[s] = e
            return True
        kids = _children(e)
        if kids is None:
            return False
        return all(self._walk(x, ctx, found) for x in kids)

    def wrap(self, fn: Callable, key: tuple) -> Callable:
        """``fn`` keeping its array results per value of the key variables' slots."""
        slots = [s for s, _ in key]

        def keep(v: Any) -> Any:
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
            return v

        if not slots:
            box: list = []

            def once(env: list) -> Any:
                if not box:
                    v = fn(env)
                    if not isinstance(v, np.ndarray):
                        return v
                    box.append(keep(v))
                return box[0]
            return once
        table: dict = {}
        seen = [0, 0]   # misses, hits: keys that never recur are not worth keeping
        one = slots[0] if len(slots) == 1 else -1

        def by_key(env: list) -> Any:
            if seen[0] < 0:
                return fn(env)
            k = env[one] if one >= 0 else tuple([env[s] for s in slots])
            v = table.get(k)
            if v is not None:
                seen[1] += 1
                return v
            v = fn(env)
            if not isinstance(v, np.ndarray):
                return v
            seen[0] += 1
            if seen[0] >= _TRIAL and 4 * seen[1] < seen[0]:
                seen[0] = -1   # mostly misses: compute every time from now on
                table.clear()
                return v
            if len(table) >= _ROOM:
                table.clear()
            table[k] = keep(v)
            return v
        return by_key


def compile_kept(rule: Callable, e: Any, ctx: Any) -> Any:
    """Compile ``e`` by ``rule`` under ``ctx.memo`` (a :class:`Memo`, or None): the largest
    qualifying per-lane subexpressions come out wrapped by :meth:`Memo.wrap`."""
    memo = getattr(ctx, "memo", None)
    if memo is None:
        return rule(e, ctx)
    key = memo.deps(e, ctx) if isinstance(e, _COMPOUND) else None
    outer = memo.parent
    memo.parent = key
    try:
        ce = rule(e, ctx)
    finally:
        memo.parent = outer
    if key is not None and ce.vec and key != outer:
        ce.fn = memo.wrap(ce.fn, key)
    return ce
