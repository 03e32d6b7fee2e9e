"""What the tile-op lowering rules share: the layout plan, the thread index, the register and
shared-memory buffers that replace fragments and shared tiles, and element access helpers.

After lowering, a fragment ``F`` is a per-thread register array ``F`` of ``layout.local_size``
elements (scope ``local``), and a shared tile is a flat shared array whose element offsets come
from its shared layout (row-major or swizzled). Global buffers keep their shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Sequence

from tegula.errors import ScopeError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import LOCAL, SHARED_DYN, Buffer, BufferRegion
from tegula.ir.expr import Builtin, BufferLoad, Expr, Var
from tegula.ir.stmt import BufferStore, Evaluate, For, IfThenElse, Stmt, seq
from tegula.ir.visitor import Mutator, uses_var
from tegula.layout.fragment import Fragment, Replicated, RowsOf, MmaLayout, RowLayout, unflatten
from tegula.layout.shared import RowMajor

if TYPE_CHECKING:  # the layouts the lowering reads (a type only: layout inference imports lowerings)
    from tegula.backends.cuda.passes.layout_inference import LayoutPlan


def sync() -> Stmt:
    return Evaluate(Builtin("sync_threads", (), dt.bool_))


def call(name: str, *args: Any, ret: dt.DType = dt.bool_, template: tuple = ()) -> Builtin:
    attrs = (("template", tuple(template)),) if template else ()
    return Builtin(name, tuple(E.as_expr(a) if not isinstance(a, E.Expr) else a for a in args), ret, attrs)


def addr(load: BufferLoad, ctype: Optional[str] = None) -> Builtin:
    attrs = (("ctype", ctype),) if ctype else ()
    return Builtin("address_of", (load,), dt.int64, attrs)


@dataclass
class Ctx:
    plan: LayoutPlan
    tid: Var
    threads: int
    regs: dict = field(default_factory=dict)      # fragment Buffer -> register Buffer
    smem: dict = field(default_factory=dict)      # shared Buffer -> (flat Buffer, layout)
    scratch: dict = field(default_factory=dict)   # fragment Buffer -> (flat shared Buffer, RowMajor)
    allocs: list = field(default_factory=list)
    smem_layouts: dict = field(default_factory=dict)  # shared Buffer -> chosen layout
    ranges: dict = field(default_factory=dict)        # Var -> inclusive (lo, hi), for guards
    block_vars: tuple = ()                            # the kernel's block indices
    tma_maps: list = field(default_factory=list)      # TmaMap of each tensor map the kernel uses
    smem_align: dict = field(default_factory=dict)    # flat shared Buffer -> alignment beyond 128 B
    smem_private: list = field(default_factory=list)  # shared scratch one tile op writes, then reads
    counter: int = 0
    hopper: bool = False                              # the arch has TMA, mbarrier tx counts, wgmma
    tma_only: frozenset = frozenset()                 # shared tiles only TMA writes and only gemms read
    wgmma_opts: frozenset = frozenset()               # inside "wgmma_async": what its gemm leaves out

    def unroll(self, base: str, extent: int, body_fn: Any, kind: str = "unroll") -> Stmt:
        """``for v in unroll(extent): body_fn(v)`` with ``v``'s range known to bound analysis."""
        if extent == 1:
            return body_fn(E.const(0))
        v = Var(self.fresh(base))
        self.bind_range(v, 0, extent - 1)
        return For(v, E.const(0), extent, body_fn(v), kind)

    def in_bounds(self, buf: Buffer, idx: Sequence[Expr]) -> Optional[Expr]:
        return in_bounds(buf, idx, self.ranges)

    def bind_range(self, v: Var, lo: int, hi: int) -> None:
        self.ranges[v] = (lo, hi)

    def fresh(self, base: str) -> str:
        self.counter += 1
        return f"{base}_{self.counter}"

    # -- buffers --------------------------------------------------------------------------------
    def reg(self, frag: Buffer) -> Buffer:
        r = self.regs.get(frag)
        if r is None:
            lay = self.plan.of(frag)
            r = Buffer(frag.name, (lay.local_size,), frag.dtype, LOCAL, span=frag.span)
            self.regs[frag] = r
            self.allocs.append(r)
        return r

    def layout(self, frag: Buffer) -> Fragment:
        return self.plan.of(frag)

    def shared(self, buf: Buffer) -> tuple[Buffer, Any]:
        got = self.smem.get(buf)
        if got is None:
            shape = tuple(int(d) for d in buf.shape)
            lay = self.smem_layouts.get(buf) or RowMajor(shape)
            n = 1
            for d in shape:
                n *= d
            n = getattr(lay, "size", n)  # a user's layout may leave gaps
            flat = Buffer(buf.name, (n,), buf.dtype, SHARED_DYN, span=buf.span)
            got = (flat, lay)
            self.smem[buf] = got
            self.allocs.append(flat)
        return got

    def registers(self, base: str, n: int, dtype: dt.DType) -> Buffer:
        """A fresh per-thread register array of ``n`` elements, allocated in the kernel."""
        r = Buffer(self.fresh(base), (n,), dtype, LOCAL)
        self.allocs.append(r)
        return r

    def scratch_of(self, frag: Buffer) -> Buffer:
        """A shared copy of a fragment (row-major), for accesses its layout cannot serve."""
        got = self.scratch.get(frag)
        if got is None:
            n = 1
            for d in frag.shape:
                n *= int(d)
            flat = Buffer(self.fresh(frag.name + "_stage"), (n,), frag.dtype, SHARED_DYN,
                          span=frag.span)
            self.scratch[frag] = flat
            self.allocs.append(flat)
            got = flat
        return got

    # -- element access -------------------------------------------------------------------------
    def load(self, buf: Buffer, idx: Sequence[Any], k: Any = None, staged: bool = False) -> Expr:
        """The element ``buf[idx]``; for a fragment, register ``k`` (or its staged copy)."""
        idx = tuple(E.as_expr(i) for i in idx)
        if buf.is_shared:
            flat, lay = self.shared(buf)
            return BufferLoad(flat, (lay.offset(idx),))
        if buf.is_fragment:
            if staged or k is None:
                return BufferLoad(self.scratch_of(buf), (_flat(idx, buf.shape),))
            return BufferLoad(self.reg(buf), (E.as_expr(k),))
        return BufferLoad(buf, idx)

    def store(self, buf: Buffer, idx: Sequence[Any], value: Expr, k: Any = None,
              staged: bool = False) -> Stmt:
        idx = tuple(E.as_expr(i) for i in idx)
        value = E.cast(buf.dtype, value)
        if buf.is_shared:
            flat, lay = self.shared(buf)
            return BufferStore(flat, (lay.offset(idx),), value)
        if buf.is_fragment:
            if staged or k is None:
                return BufferStore(self.scratch_of(buf), (_flat(idx, buf.shape),), value)
            return BufferStore(self.reg(buf), (E.as_expr(k),), value)
        return BufferStore(buf, idx, value)

    # -- staging fragments through shared memory -----------------------------------------------
    def stage_out(self, frag: Buffer) -> Stmt:
        """Every thread writes its registers of ``frag`` to the fragment's shared copy."""
        lay = self.layout(frag)
        return self.unroll("k", lay.local_size, lambda k: guard_primary(
            lay, self.tid, k, self.store(frag, lay.coords(self.tid, k), self.load(frag, (), k), staged=True)))

    def stage_in(self, frag: Buffer) -> Stmt:
        """Every thread reloads its registers of ``frag`` from the shared copy."""
        lay = self.layout(frag)
        return self.unroll("k", lay.local_size, lambda k: self.store(
            frag, (), self.load(frag, lay.coords(self.tid, k), staged=True), k=k))

    def staged(self, body: Stmt, reads: Sequence[Buffer] = (), writes: Sequence[Buffer] = (),
               fence_after: bool = False) -> Stmt:
        """``body`` reaching fragments through their shared copies (``load``/``store`` with
        ``staged=True``), with the staging and its barriers around it: the registers of
        ``reads`` go to their copies first (then a barrier), and after ``body`` (a barrier,
        then) ``writes`` reload their registers from their copies, with one more barrier when
        ``fence_after`` (the copies are free for the next op). A fragment ``body`` writes only
        part of must be in ``reads`` too. The one place lowering stages fragments."""
        outs = list(dict.fromkeys(reads))
        ins = list(dict.fromkeys(writes))
        pre = [self.stage_out(b) for b in outs] + ([sync()] if outs else [])
        post = ([sync()] + [self.stage_in(b) for b in ins] + ([sync()] if fence_after else [])) \
            if ins else []
        return seq(*pre, body, *post)


def require_rows(ctx: Ctx, buf: Buffer, nbytes: int, op: str, span: Any) -> None:
    """``op`` (at ``span``) reads ``nbytes``-byte rows of shared tile ``buf`` as single accesses
    (``ldmatrix``): a layout that splits them is a LayoutError naming the layout's line too."""
    lay = ctx.shared(buf)[1]
    run = getattr(lay, "chunk", None)
    if run is None or run * buf.dtype.itemsize >= nbytes:
        return
    given = (getattr(ctx, "layout_spans", None) or {}).get(buf)
    where = f" at {given.short()}" if given is not None else ""
    from tegula.errors import LayoutError

    raise LayoutError(f"layout conflict: {op} reads {nbytes}-byte rows of '{buf.name}', and the layout "
                      f"given to it{where} ({lay.describe()}) keeps only {run * buf.dtype.itemsize} "
                      "consecutive bytes together", span,
                      hint=f"a layout that moves whole {nbytes}-byte chunks (make_swizzled_layout) "
                           "keeps them")


def _flat(idx: Sequence[Expr], shape: Sequence[Any]) -> Expr:
    from tegula.layout.fragment import flatten

    return flatten(idx, shape)


def primary(lay: Fragment, t: Expr, k: Any) -> Optional[Expr]:
    """Condition under which thread ``t`` is the one owner of register ``k`` (None: always)."""
    if isinstance(lay, Replicated):
        return E.compare("eq", t, 0)
    if isinstance(lay, RowsOf):
        p = lay.parent
        if isinstance(p, MmaLayout):
            cond = E.compare("eq", t % 4, 0)
            if p.wn > 1:
                cond = E.binary("and", cond, E.compare("eq", p.row_warp_slot(t), 0))
            return cond
        if isinstance(p, RowLayout) and p.tpr > 1:
            return E.compare("eq", t % p.tpr, 0)
    own = getattr(lay, "primary", None)  # a user's T.Fragment with replicate > 1
    return own(t) if own is not None else None


def guard_primary(lay: Fragment, t: Expr, k: Any, stmt: Stmt) -> Stmt:
    cond = primary(lay, t, k)
    return stmt if cond is None else IfThenElse(cond, stmt)


def in_bounds(buf: Buffer, idx: Sequence[Expr], ranges: Optional[dict] = None) -> Optional[Expr]:
    """``0 <= idx < shape`` for every dim that may be out of range (None when provably inside)."""
    from tegula.arith.bound import bound

    cond: Optional[Expr] = None
    for i, d in zip(idx, buf.shape):
        b = bound(i, ranges)
        lo_ok = b is not None and b[0] is not None and b[0] >= 0
        hi_ok = b is not None and isinstance(d, int) and b[1] is not None and b[1] < d
        parts = []
        if not lo_ok:
            parts.append(E.compare("ge", i, 0))
        if not hi_ok:
            parts.append(E.compare("lt", i, d))
        for p in parts:
            cond = p if cond is None else E.binary("and", cond, p)
    return cond


def region_index(r: BufferRegion, tile_idx: Sequence[Expr]) -> tuple[Expr, ...]:
    """Buffer indices of element ``tile_idx`` (over the non-unit extents) of region ``r``."""
    out = []
    it = iter(tile_idx)
    for s, e in r.ranges:
        if isinstance(e, int) and e == 1:
            out.append(s)
        else:
            out.append(s + next(it))
    rest = list(it)
    if rest:
        raise UnsupportedError("region rank mismatch in lowering")
    return tuple(out)


def strided(ctx: Ctx, r: BufferRegion, fn: Any, every_thread: bool = False) -> Stmt:
    """Run ``fn(buffer_index)`` over the elements of region ``r``, dealt round-robin to the
    threads (``every_thread``: each thread runs all of them, serially)."""
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


def block_expr(ctx: Ctx, e: Expr) -> Expr:
    """A block-level expression (outside T.Parallel) in thread-level form: shared loads go
    through the layout; fragments must hold one element."""

    class X(Mutator):
        def visit_BufferLoad(m, n: BufferLoad) -> Expr:
            idx = tuple(m.visit(i) for i in n.indices)
            if n.buffer.is_shared:
                return ctx.load(n.buffer, idx)
            if n.buffer.is_fragment:
                lay = ctx.layout(n.buffer)
                if lay.local_size == 1:
                    return ctx.load(n.buffer, (), 0)
                if isinstance(lay, Replicated):  # every thread holds it: register = flat index
                    return ctx.load(n.buffer, (), _flat(idx, n.buffer.shape))
                raise ScopeError(f"fragment '{n.buffer.name}' is read element by element outside "
                                 "T.Parallel; its elements are spread across threads", n.span,
                                 hint="read it inside a T.Parallel loop, or copy it to shared memory first")
            return BufferLoad(n.buffer, idx, span=n.span)

    return X().visit(e)


def whole(r: BufferRegion) -> bool:
    from tegula.arith.simplify import const_int

    return all(const_int(s) == 0 and e == d for (s, e), d in zip(r.ranges, r.buffer.shape))


def varies(ctx: Ctx, *es: Any) -> bool:
    """Whether any of ``es`` can differ between threads: depends on the thread index of
    thread-level code (``T.get_thread_binding``; ``ctx.varying`` holds it and the lets derived
    from it) or reads a register written from one (``ctx.variance``, :mod:`tegula.transform.thread_variance`)."""
    vs = getattr(ctx, "varying", None)
    if vs and any(isinstance(e, E.Expr) and uses_var(e, vs) for e in es):
        return True
    var = getattr(ctx, "variance", None)
    return var is not None and var.varies(*(e for e in es if isinstance(e, E.Expr)))


def per_thread(ctx: Ctx, *es: Any) -> bool:
    """Whether a block-level store or atomic touching ``es`` is made by every thread (in
    thread-level code, when it depends on the thread index or sits under control flow that does)."""
    return getattr(ctx, "divergent", False) or varies(ctx, *es)
