"""Lower tile operations and ``T.Parallel`` loops to per-thread code.

Input: a tile-level kernel and its layouts (those its layout map names, as InferLayouts or
``T.annotate_layout`` wrote them; inferred here for the rest). Output: a thread-level kernel (the IR codegen
reads): fragments are register arrays, shared tiles flat arrays addressed through their shared
layouts, and every statement is what one thread (``tx = T.get_thread_binding()``) executes.

Block-level code (outside tile ops and parallel loops) runs in every thread alike; its stores to
global or shared memory and its atomics are done by thread 0 alone. Barriers are not placed here
(see ``insert_barriers``), except inside the staging sequences a rule emits.

Before/after (one parallel loop over an accumulator in the mma layout)::

    for i, j in T.Parallel(128, 128):              for k in T.unroll(128):
        C_local[i, j] = T.max(C_local[i, j], 0)        C_local[k] = T.max(C_local[k], 0.0)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tegula.errors import ScopeError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Builtin, BufferLoad, Expr, Var
from tegula.ir.stmt import (AttrStmt, Atomic, Break, Continue, BufferStore, Copy, CumSum,
                            Evaluate, Fill, For, Gemm, IfThenElse, Kernel, LetStmt, Print,
                            PrimFunc, Reduce, SeqStmt, Stmt, While, parallel_nest, seq)
from tegula.ir.visitor import Mutator, substitute
from tegula.layout.fragment import FlatLayout, Fragment, unflatten
from tegula.backends.cuda.passes.layout_inference import (choose_shared_layouts, fragment_accesses,
                                                          infer_layouts, loop_pattern)
from tegula.backends.cuda.passes.lower_copy import lower_copy
from tegula.backends.cuda.passes.lower_gemm import lower_gemm
from tegula.backends.cuda.passes.lower_reduce import lower_cumsum, lower_reduce
from tegula.backends.cuda.passes.lowering_context import (SHARED, Ctx, addr, call, guard_primary,
                                                          region_index, sync, whole)


def lower_tile_ops(func: PrimFunc) -> PrimFunc:
    """Lower every kernel of ``func`` to thread-level IR."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            return lower_kernel(k)

    return M().visit(func)


def lower_kernel(k: Kernel) -> Kernel:
    plan = infer_layouts(k)
    tid = Var("tx")
    ctx = Ctx(plan, tid, k.num_threads)
    ctx.smem_layouts = choose_shared_layouts(k)
    ctx.bind_range(tid, 0, k.num_threads - 1)
    ctx.block_vars = tuple(k.block_vars)
    for v, g in zip(k.block_vars, k.grid):
        if isinstance(g, int):
            ctx.bind_range(v, 0, g - 1)
    body = _Block(ctx).lower(k.body)
    keep = [b for b in k.allocs if b.scope in ("local", "local.var")]
    for b in k.allocs:  # make sure every tile has its storage even if unused
        if b.scope == "local.fragment":
            ctx.reg(b)
        elif b.scope in SHARED:
            ctx.shared(b)
    allocs = tuple(keep + ctx.allocs)
    ann = dict(k.annotations)
    ann["layouts"] = {b.name: plan.fragments[b].describe() for b in plan.fragments}
    ann["shared_layouts"] = {b.name: lay.describe() for b, lay in ((b, ctx.shared(b)[1]) for b in k.allocs if b.scope in SHARED)}
    ann["shared_shapes"] = {b.name: tuple(b.shape) for b in k.allocs if b.scope in SHARED}
    ann.pop("layout_map", None)
    return Kernel(k.grid, k.threads, k.block_vars, allocs, body, dict(k.alloc_inits), ann,
                  thread_var=tid, span=k.span)


class _Block:
    """Lowers block-level statements (what every thread runs alike)."""

    def __init__(self, ctx: Ctx):
        self.ctx = ctx

    def lower(self, s: Stmt) -> Stmt:
        method = getattr(self, f"s_{type(s).__name__}", None)
        if method is None:
            raise UnsupportedError(f"unimplemented op {type(s).__name__} for target cuda", s.span)
        return method(s)

    def s_SeqStmt(self, s: SeqStmt) -> Stmt:
        return seq(*[self.lower(x) for x in s.stmts])

    def s_Copy(self, s: Copy) -> Stmt:
        return _spanned(lower_copy(self.ctx, s), s)

    def s_Gemm(self, s: Gemm) -> Stmt:
        return _spanned(lower_gemm(self.ctx, s), s)

    def s_Reduce(self, s: Reduce) -> Stmt:
        return _spanned(lower_reduce(self.ctx, s), s)

    def s_CumSum(self, s: CumSum) -> Stmt:
        return _spanned(lower_cumsum(self.ctx, s), s)

    def s_Fill(self, s: Fill) -> Stmt:
        return _spanned(self._fill(s), s)

    def _fill(self, s: Fill) -> Stmt:
        ctx, d = self.ctx, s.dst
        if d.buffer.scope == "local.fragment" and whole(d):
            lay = ctx.layout(d.buffer)
            return ctx.unroll("k", lay.local_size, lambda k: ctx.store(d.buffer, (), s.value, k=k))
        if d.buffer.scope in ("local", "local.var"):
            return _strided(ctx, d, lambda idx: ctx.store(d.buffer, idx, s.value), every_thread=True)
        staged = d.buffer.scope == "local.fragment"
        pre = [ctx.stage_out(d.buffer), sync()] if staged else []
        post = [sync(), ctx.stage_in(d.buffer)] if staged else []

        def put(idx: tuple) -> Stmt:
            st = ctx.store(d.buffer, idx, s.value, staged=staged)
            cond = ctx.in_bounds(d.buffer, idx) if d.buffer.scope == "global" else None
            return IfThenElse(cond, st) if cond is not None else st

        return seq(*pre, _strided(ctx, d, put), *post)

    def s_Atomic(self, s: Atomic) -> Stmt:
        return _spanned(self._atomic(s), s)

    def _atomic(self, s: Atomic) -> Stmt:
        ctx = self.ctx
        if isinstance(s.value, E.Expr):
            idx = tuple(st for st, _ in s.dst.ranges)
            return IfThenElse(E.compare("eq", ctx.tid, 0), _atomic(ctx, s.kind, s.dst.buffer, idx, s.value))
        v = s.value
        if v.buffer.scope == "local.fragment" and whole(v):
            lay = ctx.layout(v.buffer)

            def one(k: Any) -> Stmt:
                tile = tuple(i for i, (_, e) in zip(lay.coords(ctx.tid, k), v.ranges)
                             if not (isinstance(e, int) and e == 1))
                didx = region_index(s.dst, tile)
                st = _atomic(ctx, s.kind, s.dst.buffer, didx, ctx.load(v.buffer, (), k))
                cond = ctx.in_bounds(s.dst.buffer, didx) if s.dst.buffer.scope == "global" else None
                st = IfThenElse(cond, st) if cond is not None else st
                return guard_primary(lay, ctx.tid, k, st)

            return ctx.unroll("k", lay.local_size, one)
        staged = v.buffer.scope == "local.fragment"
        pre = [ctx.stage_out(v.buffer), sync()] if staged else []

        def put(idx: tuple) -> Stmt:
            tile = tuple(i - st for i, (st, e) in zip(idx, v.ranges) if not (isinstance(e, int) and e == 1))
            didx = region_index(s.dst, tile)
            st = _atomic(ctx, s.kind, s.dst.buffer, didx, ctx.load(v.buffer, idx, staged=staged))
            cond = ctx.in_bounds(s.dst.buffer, didx) if s.dst.buffer.scope == "global" else None
            return IfThenElse(cond, st) if cond is not None else st

        return seq(*pre, _strided(ctx, v, put))

    def s_Print(self, s: Print) -> Stmt:
        if not isinstance(s.obj, E.Expr):
            raise UnsupportedError("T.print of a tile is not supported on CUDA yet; print elements in a loop", s.span)
        v = self.expr(s.obj)
        t = v.dtype
        conv = "%g" if t.is_float else ("%lld" if t.bits == 64 and t.kind == "int" else
                                        "%llu" if t.bits == 64 else "%u" if t.kind == "uint" else "%d")
        prefix = f"{s.msg} " if s.msg else ""
        # like the interpreter: the message, the block index and the value, from one thread a block
        fmt = prefix + "block (%d, %d, %d): " + conv + "\n"
        blocks = list(self.ctx.block_vars) + [E.const(0)] * (3 - len(self.ctx.block_vars))
        return IfThenElse(E.compare("eq", self.ctx.tid, 0),
                          Evaluate(Builtin("printf", (*blocks, v), dt.bool_, (("fmt", fmt),))))

    def s_For(self, s: For) -> Stmt:
        if s.kind == "parallel":
            return _spanned(lower_parallel(self.ctx, s), s)
        if isinstance(s.extent, int):
            self.ctx.bind_range(s.var, 0, max(0, s.extent - 1)) if isinstance(s.start, E.Const) and s.start.value == 0 and s.step == 1 else None
        kind = "serial" if s.kind in ("pipelined", "serial") else s.kind
        return For(s.var, self.expr(s.start), s.extent, self.lower(s.body), kind, s.step,
                   {k: v for k, v in s.annotations.items() if k not in ("num_stages", "order", "stage", "group")},
                   span=s.span)

    def s_While(self, s: While) -> Stmt:
        return While(self.expr(s.cond), self.lower(s.body), span=s.span)

    def s_IfThenElse(self, s: IfThenElse) -> Stmt:
        return IfThenElse(self.expr(s.cond), self.lower(s.then),
                          self.lower(s.else_) if s.else_ is not None else None, span=s.span)

    def s_LetStmt(self, s: LetStmt) -> Stmt:
        from tegula.arith.bound import bound

        b = bound(s.value, self.ctx.ranges) if s.value.dtype.is_int else None
        self.ctx.ranges.pop(s.var, None)  # never keep the range of an earlier copy of the let
        if b is not None:
            self.ctx.bind_range(s.var, *b)  # so guards on it can be proven away
        return LetStmt(s.var, self.expr(s.value), span=s.span)

    def s_Break(self, s: Break) -> Stmt:
        return s

    def s_Continue(self, s: Continue) -> Stmt:
        return s

    def s_Evaluate(self, s: Evaluate) -> Stmt:
        return s

    def s_AttrStmt(self, s: AttrStmt) -> Stmt:
        return AttrStmt(s.key, s.value, self.lower(s.body), span=s.span)

    def s_BufferStore(self, s: BufferStore) -> Stmt:
        ctx, b = self.ctx, s.buffer
        value = self.expr(s.value)
        if b.scope in ("local", "local.var"):
            return BufferStore(b, tuple(self.expr(i) for i in s.indices), value, span=s.span)
        if b.scope == "local.fragment":  # a one-element fragment written at block level
            lay = ctx.layout(b)
            return ctx.unroll("k", lay.local_size, lambda k: ctx.store(b, (), value, k=k))
        st = ctx.store(b, tuple(self.expr(i) for i in s.indices), value)
        return IfThenElse(E.compare("eq", ctx.tid, 0), st, span=s.span)

    def expr(self, e: Expr) -> Expr:
        """Block-level expressions: shared loads go through the layout; fragments must be scalars."""
        ctx = self.ctx

        class X(Mutator):
            def visit_BufferLoad(m, n: BufferLoad) -> Expr:
                idx = tuple(m.visit(i) for i in n.indices)
                if n.buffer.scope in SHARED:
                    return ctx.load(n.buffer, idx)
                if n.buffer.scope == "local.fragment":
                    lay = ctx.layout(n.buffer)
                    if lay.local_size == 1:
                        return ctx.load(n.buffer, (), 0)
                    raise ScopeError(f"fragment '{n.buffer.name}' is read element by element outside "
                                     "T.Parallel; its elements are spread across threads", n.span,
                                     hint="read it inside a T.Parallel loop, or copy it to shared memory first")
                return BufferLoad(n.buffer, idx, span=n.span)

        return X().visit(e)


def _spanned(s: Stmt, src: Stmt) -> Stmt:
    """Mark the code one tile op became, with the op's span (for `// file:line` and barriers)."""
    name = "T.Parallel" if isinstance(src, For) else f"T.{type(src).__name__.lower()}"
    return AttrStmt("tile_op", name, s, span=src.span)


def _strided(ctx: Ctx, r: Any, fn: Any, every_thread: bool = False) -> Stmt:
    """Run ``fn(buffer_index)`` over the elements of region ``r``, dealt round-robin to threads."""
    tile = [int(e) for e in r.extents]
    n = 1
    for e in tile:
        n *= e
    if every_thread:
        i = Var(ctx.fresh("e"))
        idx = tuple(st + x for (st, _), x in zip(r.ranges, unflatten(i, tile)))
        return For(i, E.const(0), n, fn(idx), "serial")
    per = -(-n // ctx.threads)

    def one(i: Any) -> Stmt:
        flat = i * ctx.threads + ctx.tid
        idx = tuple(st + x for (st, _), x in zip(r.ranges, unflatten(flat, tile)))
        st = fn(idx)
        return IfThenElse(E.compare("lt", flat, n), st) if n % ctx.threads else st

    return ctx.unroll("i", per, one)


_ATOMIC_FN = {"add": "tl::atomic_add", "max": "tl::atomic_max", "min": "tl::atomic_min"}


def _atomic(ctx: Ctx, kind: str, buf: Buffer, idx: tuple, value: Expr) -> Stmt:
    target = ctx.load(buf, idx)
    return Evaluate(call(_ATOMIC_FN[kind], addr(target), E.cast(buf.dtype, value)))


# ---------------------------------------------------------------------------------------------
# T.Parallel
# ---------------------------------------------------------------------------------------------

def _frag_accesses(body: Stmt) -> list[tuple[Buffer, tuple, bool]]:
    return [(b, idx, w) for b, idx, w, _ in fragment_accesses(body)]


def lower_parallel(ctx: Ctx, loop: For) -> Stmt:
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
        elif lay.local_size == 1 and all(isinstance(i, E.Const) for i in idx):
            direct.setdefault(b, "scalar")
        else:
            direct[b] = None
    staged = {b for b, how in direct.items() if how is None}
    written = {b for b, _, w in acc if w and b in staged}
    n = 1
    for e in exts:
        n *= e
    if drive is None:
        drive = FlatLayout(tuple(exts), ctx.threads, 1) if n % ctx.threads == 0 else None
    pre = [x for b in staged for x in (ctx.stage_out(b),)]
    if pre:
        pre.append(sync())
    post: list[Stmt] = []
    if written:
        post = [sync()] + [ctx.stage_in(b) for b in written] + [sync()]

    def body_at(coords: tuple, k: Any) -> Stmt:
        vmap = dict(zip(vars_, coords))
        return _ThreadBody(ctx, vmap, k, direct, drive).lower(body)

    if drive is not None:
        main = ctx.unroll("k", drive.local_size, lambda k: body_at(drive.coords(ctx.tid, k), k))
    else:  # not divisible: strided with a guard
        per = -(-n // ctx.threads)

        def one(i: Any) -> Stmt:
            flat = i * ctx.threads + ctx.tid
            return IfThenElse(E.compare("lt", flat, n), body_at(unflatten(flat, exts), None))

        main = ctx.unroll("i", per, one)
    return seq(*pre, main, *post)


def _dynamic_parallel(ctx: Ctx, vars_: list[Var], exts: list[Any], body: Stmt) -> Stmt:
    """A parallel loop with a runtime extent: a block-strided loop over the flat index space."""
    acc = _frag_accesses(body)
    staged = {b for b, _, _ in acc}
    written = {b for b, _, w in acc if w}
    n: Any = 1
    for e in exts:
        n = n * e
    i = Var(ctx.fresh("i"))
    flat = i * ctx.threads + ctx.tid
    coords = unflatten(flat, exts)
    direct = {b: None for b in staged}
    inner = _ThreadBody(ctx, dict(zip(vars_, coords)), None, direct, None).lower(body)
    loop = For(i, E.const(0), (n + ctx.threads - 1) // ctx.threads,
               IfThenElse(E.compare("lt", flat, n), inner), "serial")
    pre = [ctx.stage_out(b) for b in staged] + ([sync()] if staged else [])
    post = ([sync()] + [ctx.stage_in(b) for b in written] + [sync()]) if written else []
    return seq(*pre, loop, *post)


class _ThreadBody:
    """Lowers the body of a parallel loop for one iteration of one thread."""

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
        return None

    def lower(self, s: Stmt) -> Stmt:
        ctx = self.ctx
        if isinstance(s, SeqStmt):
            return seq(*[self.lower(x) for x in s.stmts])
        if isinstance(s, BufferStore):
            b = s.buffer
            idx = tuple(self.expr(i) for i in s.indices)
            v = self.expr(s.value)
            if b.scope == "local.fragment":
                k = self.reg_index(b, s.indices) if self.k is not None else None
                return ctx.store(b, idx, v, k=k, staged=k is None)
            if b.scope in ("local", "local.var"):
                return BufferStore(b, idx, v, span=s.span)
            return dataclasses.replace(ctx.store(b, idx, v), span=s.span)  # keep the user's line
        if isinstance(s, LetStmt):
            return LetStmt(s.var, self.expr(s.value), span=s.span)
        if isinstance(s, IfThenElse):
            return IfThenElse(self.expr(s.cond), self.lower(s.then),
                              self.lower(s.else_) if s.else_ is not None else None, span=s.span)
        if isinstance(s, For):
            if s.kind == "parallel":
                raise UnsupportedError("nested T.Parallel under a serial loop is not supported on CUDA", s.span)
            return For(s.var, self.expr(s.start), s.extent, self.lower(s.body), s.kind if s.kind != "pipelined" else "serial",
                       s.step, span=s.span)
        if isinstance(s, While):
            return While(self.expr(s.cond), self.lower(s.body), span=s.span)
        if isinstance(s, Atomic):
            idx = tuple(self.expr(st) for st, _ in s.dst.ranges)
            val = self.expr(s.value) if isinstance(s.value, E.Expr) else None
            if val is None:
                raise UnsupportedError("tile atomics inside T.Parallel", s.span)
            st = _atomic(ctx, s.kind, s.dst.buffer, idx, val)
            if self.drive is not None and self.k is not None:
                st = guard_primary(self.drive, ctx.tid, self.k, st)
            return st
        if isinstance(s, (Break, Continue, Evaluate)):
            return s
        raise UnsupportedError(f"unimplemented op {type(s).__name__} inside T.Parallel for target cuda", s.span)

    def expr(self, e: Expr) -> Expr:
        ctx, me = self.ctx, self
        e = substitute(e, self.vmap) if self.vmap else e

        class X(Mutator):
            def visit_BufferLoad(m, n: BufferLoad) -> Expr:
                idx = tuple(m.visit(i) for i in n.indices)
                b = n.buffer
                if b.scope == "local.fragment":
                    k = me.reg_index(b, n.indices) if me.k is not None else None
                    return ctx.load(b, idx, k=k, staged=k is None)
                if b.scope in SHARED:
                    return ctx.load(b, idx)
                return BufferLoad(b, idx, span=n.span)

        return X().visit(e)

