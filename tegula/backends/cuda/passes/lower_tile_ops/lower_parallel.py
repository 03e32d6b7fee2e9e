"""Lowering ``T.Parallel`` loops to per-thread code.

Each thread runs the iterations its registers hold: the loop is driven by the layout of a
fragment it indexes with all its variables (in order), unrolled over that thread's registers.
Other fragments it indexes the same way in the same layout, by the rows of it, or by its packed
columns (``X[i, j // c]`` in :class:`~tegula.layout.fragment.ColsDivided`), are read
from registers too; every other fragment access goes through the fragment's shared copy
(:meth:`~.lowering_context.Ctx.staged`). Loops over no fragment deal their iterations to the
threads round-robin; loops with a runtime extent become a block-strided serial loop. A loop
driven by a layout that replicates elements (several threads hold each) and that stores into
shared or global memory runs each iteration on one replica only, its fragment writes through the
shared copies, so that memory is written once.

The statements of the body lower by class (:data:`_BODY`); tile ops allowed inside a parallel
body (element atomics) by their ``cuda.lane`` rule in :mod:`tegula.ir.tile_rules`.

Before/after (one parallel loop over an accumulator in the mma layout)::

    for i, j in T.Parallel(128, 128):              for k in T.unroll(128):
        C_local[i, j] = T.max(C_local[i, j], 0)        C_local[k] = T.max(C_local[k], 0.0)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional

from tegula.errors import UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad, Expr, Var
from tegula.ir.stmt import (Break, BufferStore, Continue, Evaluate, For, IfThenElse, LetStmt,
                            SeqStmt, Stmt, TileOp, While, parallel_nest, seq)
from tegula.ir.tile_rules import TILE_RULES
from tegula.ir.visitor import Mutator, post_order_visit, substitute
from tegula.layout.fragment import ColsDivided, FlatLayout, Fragment, unflatten
from tegula.backends.cuda.passes.layout_inference import fragment_accesses, loop_pattern, packed_cols
from tegula.backends.cuda.passes.lower_tile_ops.context import Ctx, primary


def _frag_accesses(body: Stmt) -> list[tuple[Buffer, tuple, bool]]:
    return [(b, idx, w) for b, idx, w, _ in fragment_accesses(body)]


def lower_parallel(ctx: Ctx, loop: For) -> Stmt:
    """Per-thread code of the ``T.Parallel`` nest starting at ``loop``."""
    vars_, exts, body = parallel_nest(loop)
    if not all(isinstance(e, int) for e in exts):
        return _dynamic_parallel(ctx, vars_, exts, body)
    acc = _frag_accesses(body)
    drive: Optional[Fragment] = None
    for b, idx, _ in acc:
        if loop_pattern(vars_, b, idx) == "full" and tuple(b.shape) == tuple(exts):
            drive = ctx.layout(b)
            break
    # which fragments can use registers directly, and how
    direct: dict = {}
    for b, idx, _ in acc:
        lay = ctx.layout(b)
        pat = loop_pattern(vars_, b, idx)
        if drive is not None and pat == "full" and lay.same(drive) and tuple(b.shape) == tuple(exts):
            direct.setdefault(b, "full")
        elif drive is not None and pat == "rows" and drive.rows() is not None and lay.same(drive.rows()):
            direct.setdefault(b, "rows")
        elif drive is not None and pat == "cols" and _packed_along(lay, drive, packed_cols(vars_, idx)):
            direct.setdefault(b, ("cols", packed_cols(vars_, idx)))
        elif lay.local_size == 1 and all(isinstance(i, E.Const) for i in idx):
            direct.setdefault(b, "scalar")
        else:
            direct[b] = None
    # A layout that replicates elements gives each iteration to several threads: those may all
    # compute registers, but only one of them writes shared or global memory. Then the
    # iterations run on that one replica, and the fragments they write go through their shared
    # copies so that every replica's registers get the values.
    writer = primary(drive, ctx.tid, 0) if drive is not None and _writes_memory(body) else None
    if writer is not None:
        for b, _, w in acc:
            if w:
                direct[b] = None
    staged = [b for b, how in direct.items() if how is None]
    written = list(dict.fromkeys(b for b, _, w in acc if w and b in staged))
    n = 1
    for e in exts:
        n *= e
    if drive is None:
        drive = FlatLayout(tuple(exts), ctx.threads, 1) if n % ctx.threads == 0 else None

    def body_at(coords: tuple, k: Any) -> Stmt:
        vmap = dict(zip(vars_, coords))
        out = ThreadBody(ctx, vmap, k, direct, drive).lower(body)
        return IfThenElse(writer, out) if writer is not None else out

    if drive is not None:
        main = ctx.unroll("k", drive.local_size, lambda k: body_at(drive.coords(ctx.tid, k), k))
    else:  # not divisible: strided with a guard
        per = -(-n // ctx.threads)

        def one(i: Any) -> Stmt:
            flat = i * ctx.threads + ctx.tid
            return IfThenElse(E.compare("lt", flat, n), body_at(unflatten(flat, exts), None))

        main = ctx.unroll("i", per, one)
    return ctx.staged(main, reads=staged, writes=written, fence_after=True)


def _writes_memory(body: Stmt) -> bool:
    """Whether ``body`` stores into shared or global memory or updates it atomically."""
    found = []

    def see(n: Any) -> None:
        if isinstance(n, BufferStore) and (n.buffer.is_shared or n.buffer.is_global):
            found.append(n)
        elif isinstance(n, TileOp):
            found.append(n)

    post_order_visit(body, see)
    return bool(found)


def _packed_along(lay: Fragment, drive: Fragment, c: Optional[int]) -> bool:
    """``lay`` holds, in register ``k // c``, the packed element of ``drive``'s register ``k``."""
    cols = ColsDivided.of(drive, c) if c else None
    return cols is not None and lay.same(cols)


def _dynamic_parallel(ctx: Ctx, vars_: list[Var], exts: list[Any], body: Stmt) -> Stmt:
    """A parallel loop with a runtime extent: a block-strided loop over the flat index space."""
    acc = _frag_accesses(body)
    staged = list(dict.fromkeys(b for b, _, _ in acc))
    written = list(dict.fromkeys(b for b, _, w in acc if w))
    n: Any = 1
    for e in exts:
        n = n * e
    i = Var(ctx.fresh("i"))
    flat = i * ctx.threads + ctx.tid
    coords = unflatten(flat, exts)
    direct = {b: None for b in staged}
    inner = ThreadBody(ctx, dict(zip(vars_, coords)), None, direct, None).lower(body)
    loop = For(i, E.const(0), (n + ctx.threads - 1) // ctx.threads,
               IfThenElse(E.compare("lt", flat, n), inner), "serial")
    return ctx.staged(loop, reads=staged, writes=written, fence_after=True)


class ThreadBody:
    """Lowers the body of a parallel loop for one iteration of one thread: ``vmap`` maps the
    loop variables to this iteration's coordinates, ``k`` is the register index it drives
    (None when strided), ``direct`` says how each fragment is reached."""

    def __init__(self, ctx: Ctx, vmap: dict, k: Any, direct: dict, drive: Optional[Fragment]):
        self.ctx, self.vmap, self.k, self.direct, self.drive = ctx, vmap, k, direct, drive

    def reg_index(self, b: Buffer, idx: tuple) -> Optional[Any]:
        how = self.direct.get(b)
        if how == "full":
            return self.k
        if how == "rows":
            return self.drive.row_local(self.k)  # type: ignore[union-attr]
        if how == "scalar":
            return 0
        if isinstance(how, tuple) and how[0] == "cols":
            return self.k // how[1]
        return None

    def lower(self, s: Stmt) -> Stmt:
        rule = _BODY.get(type(s))
        if rule is not None:
            return rule(self, s)
        if isinstance(s, TileOp):
            return TILE_RULES.require(s, "cuda.lane",
                                      hint="this tile operation cannot be used inside T.Parallel")(self, s)
        raise UnsupportedError(f"unimplemented op {type(s).__name__} inside T.Parallel for target cuda", s.span)

    def expr(self, e: Expr) -> Expr:
        ctx, me = self.ctx, self
        e = substitute(e, self.vmap) if self.vmap else e

        class X(Mutator):
            def visit_BufferLoad(m, n: BufferLoad) -> Expr:
                idx = tuple(m.visit(i) for i in n.indices)
                b = n.buffer
                if b.is_fragment:
                    k = me.reg_index(b, n.indices) if me.k is not None else None
                    return ctx.load(b, idx, k=k, staged=k is None)
                if b.is_shared:
                    return ctx.load(b, idx)
                return BufferLoad(b, idx, span=n.span)

        return X().visit(e)


def _seq(tb: ThreadBody, s: SeqStmt) -> Stmt:
    return seq(*[tb.lower(x) for x in s.stmts])


def _store(tb: ThreadBody, s: BufferStore) -> Stmt:
    ctx, b = tb.ctx, s.buffer
    idx = tuple(tb.expr(i) for i in s.indices)
    v = tb.expr(s.value)
    if b.is_fragment:
        k = tb.reg_index(b, s.indices) if tb.k is not None else None
        return ctx.store(b, idx, v, k=k, staged=k is None)
    if b.is_local:
        return BufferStore(b, idx, v, span=s.span)
    return dataclasses.replace(ctx.store(b, idx, v), span=s.span)  # keep the user's line


def _let(tb: ThreadBody, s: LetStmt) -> Stmt:
    return LetStmt(s.var, tb.expr(s.value), span=s.span)


def _if(tb: ThreadBody, s: IfThenElse) -> Stmt:
    return IfThenElse(tb.expr(s.cond), tb.lower(s.then),
                      tb.lower(s.else_) if s.else_ is not None else None, span=s.span)


def _for(tb: ThreadBody, s: For) -> Stmt:
    if s.kind == "parallel":
        raise UnsupportedError("nested T.Parallel under a serial loop is not supported on CUDA", s.span)
    return For(s.var, tb.expr(s.start), s.extent, tb.lower(s.body),
               s.kind if s.kind != "pipelined" else "serial", s.step, span=s.span)


def _while(tb: ThreadBody, s: While) -> Stmt:
    return While(tb.expr(s.cond), tb.lower(s.body), span=s.span)


def _same(tb: ThreadBody, s: Stmt) -> Stmt:
    return s


def _evaluate(tb: ThreadBody, s: Evaluate) -> Stmt:
    """A call made for its effect (``T.device_assert``, ...): its operands at this iteration."""
    return Evaluate(tb.expr(s.value), span=s.span)


_BODY: dict[type, Callable[[ThreadBody, Any], Stmt]] = {
    SeqStmt: _seq, BufferStore: _store, LetStmt: _let, IfThenElse: _if, For: _for,
    While: _while, Break: _same, Continue: _same, Evaluate: _evaluate,
}
