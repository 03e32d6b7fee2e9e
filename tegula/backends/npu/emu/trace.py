"""The scalar unit of each core: runs the kernel's control flow and issues instructions.

For one block and one core, :func:`issue` walks the lowered kernel, evaluating loop bounds,
lets, conditions and region starts (scalar code; the cores' control flow never depends on tile
data), and returns the core's instruction stream in program order: one :class:`Instr` per tile
operation (with its pipe, the bytes it reads and writes, and a function that does its work on
the memories when the simulator executes it) and per flag or barrier.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from tegula.errors import OutOfBoundsError, UnsupportedError
from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import Const, Expr
from tegula.ir.npu import (BarrierAll, CoreScope, Mma, PipeBarrier, SetCrossFlag, SetFlag, VecOp,
                           WaitCrossFlag, WaitFlag)
from tegula.ir.stmt import (BufferStore, Copy, Fill, For, IfThenElse, LetStmt, Reduce, SeqStmt,
                            Stmt, While)
from tegula.ir import vecops
from tegula.ir.tile_rules import TILE_RULES, add_aspect, tile_rule
from tegula.backends.closure import MASK, compile_expr, compile_stmt
from tegula.backends.interp.context import Ctx
from tegula.backends.interp.tileops import apply_copy_flags
from tegula.backends.npu import semantics
from tegula.backends.npu.layout import ND
from tegula.backends.npu.access import pipe_of, region_accesses, scalar_reads
from tegula.backends.npu.passes.plan_memory import buffer_bytes


@dataclass
class Instr:
    """One instruction of one core. ``kind``: "op", "set", "wait", "barrier", "all", "xset",
    "xwait". ``reads`` / ``writes``: (memory key, byte lo, byte hi, buffer name)."""

    kind: str
    pipe: str
    node: Any
    run: Optional[Callable[[], None]] = None
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)
    event: tuple = ()
    flag: int = 0
    mode: int = 2
    issue_clock: Any = None

    def where(self) -> str:
        sp = getattr(self.node, "span", None)
        return f"{sp.file}:{sp.line}" if sp is not None else "<unknown line>"

    def what(self) -> str:
        from tegula.ir.printer import script

        return script(self.node).strip().splitlines()[0] if self.node is not None else self.kind


class Memory:
    """Where a buffer lives for one core: its memory array (bytes) and element view."""

    def __init__(self, core_mem: dict, globals_: dict, offsets: dict, layouts: dict):
        self.core_mem = core_mem     # scope -> np.uint8 array
        self.globals = globals_      # buffer -> numpy array (kernel arguments)
        self.offsets = offsets
        self.layouts = layouts

    def key(self, buf: Any, core: int) -> tuple:
        return ("GM", buf.name) if buf.scope == "global" else (core, buf.scope)

    def elems(self, buf: Any) -> np.ndarray:
        """The buffer's storage as a flat element array (a view of its memory)."""
        if buf.scope == "global":
            return self.globals[buf].reshape(-1)
        lay = self.layouts.get(buf, ND)
        off = self.offsets[buf]
        n = lay.numel(tuple(buf.shape)) * buf.dtype.itemsize
        return self.core_mem[buf.scope][off:off + n].view(buf.dtype.np)


class Issuer:
    """Walks the kernel for one core; see the module docstring."""

    def __init__(self, kernel: Any, ctx: Ctx, machine: Any):
        self.k = kernel
        self.ctx = ctx
        self.m = machine
        self.layouts = kernel.annotations.get("layouts", {})
        self.offsets = kernel.annotations.get("offsets", {})
        self._fns: dict = {}

    def fn(self, e: Any) -> Callable[[list], Any]:
        f = self._fns.get(id(e))
        if f is None:
            f = self._fns[id(e)] = compile_expr(e, self.ctx).fn
        return f

    def val(self, e: Any, env: list) -> Any:
        if isinstance(e, int):
            return e
        if isinstance(e, Const):
            return e.value
        try:
            r = self.fn(e)(env)
        except (TypeError, ValueError, AttributeError):
            r = None
        if isinstance(r, _Pending) or r is None:
            pending = [v for v in _vars(e) if isinstance(env[self.ctx.slot(v)], _Pending)]
            tiles = _onchip_loads(e)
            if not pending and tiles:
                raise UnsupportedError(
                    f"the scalar unit reads an element of on-chip tile '{tiles[0].buffer.name}' to decide "
                    "a loop bound, a condition, a tile region or a tile-op operand; the Ascend emulator "
                    "issues a core's instructions before they run, so it cannot model control flow "
                    "that depends on tile data", _span(e),
                    hint="run the kernel on target='cpu' (the interpreter runs such control flow)")
            if not pending:
                return self.fn(e)(env)
            p = env[self.ctx.slot(pending[0])]
            raise UnsupportedError(
                f"'{pending[0].name}' holds an element the scalar unit reads from on-chip tile "
                f"'{p.buffer}' at line {p.line}; the Ascend emulator issues a core's instructions "
                "before they run, so such a value can feed scalar stores to on-chip tiles but not "
                "loop bounds, conditions, tile regions or tile-op operands", _span(e))
        return r

    def issue(self, env: list, core: int, mem: Memory) -> list:
        self.env, self.core, self.mem = env, core, mem
        self.kind = "C" if core == 0 else "V"
        self.out: list = []
        self.cells: dict = {}  # slot -> [value]: lets the scalar unit computes from tile data
        self.stmt(self.k.body)
        return self.out

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        try:
            self._stmt(s)
        except UnsupportedError as e:  # located at the innermost statement when it has no place yet
            raise e.with_span(getattr(s, "span", None))

    def _stmt(self, s: Stmt) -> None:
        env = self.env
        if isinstance(s, SeqStmt):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, CoreScope):
            if s.kind == self.kind:
                self.stmt(s.body)
        elif isinstance(s, LetStmt) and _onchip_loads(s.value):
            if all(self._mine(n.buffer) for n in _onchip_loads(s.value)):
                self.out.append(self.scalar_let(s))
            else:  # scalar code outside a scope: a tile of the other core kind is not here
                n = _onchip_loads(s.value)[0]
                env[self.ctx.slot(s.var)] = _Pending(n.buffer.name, s.span.line if s.span is not None else 0)
        elif isinstance(s, LetStmt):
            env[self.ctx.slot(s.var)] = self.val(s.value, env)
        elif isinstance(s, For) and s.kind == "parallel":
            self.out.append(self.parallel(s))
        elif isinstance(s, For):
            slot = self.ctx.slot(s.var)
            b, n = int(self.val(s.start, env)), int(self.val(s.extent, env))
            for v in range(b, b + n * s.step, s.step):
                env[slot] = s.var.dtype.np.type(v)
                self.stmt(s.body)
        elif isinstance(s, IfThenElse):
            if bool(self.val(s.cond, env)):
                self.stmt(s.then)
            elif s.else_ is not None:
                self.stmt(s.else_)
        elif isinstance(s, While):
            while bool(self.val(s.cond, env)):
                self.stmt(s.body)
        elif isinstance(s, BufferStore) and s.buffer.scope == "local.var":
            env[self.ctx.slot(s.buffer)][0] = self.val(s.value, env)
        elif isinstance(s, BufferStore) and s.buffer.scope != "global":
            if self._mine(s.buffer) and all(self._mine(n.buffer) for n in _onchip_loads(s.value)):
                self.out.append(self.scalar_store(s))
        elif type(s) in _SYNC:
            self.out.append(_SYNC[type(s)](self, s))
        elif TILE_RULES.get(type(s), EMU) is not None:
            self.out.append(self.tile_op(s))
        else:
            raise UnsupportedError(f"the Ascend emulator cannot run {type(s).__name__}", s.span)

    # -- the scalar unit's loads and stores of on-chip tiles (GetValue / SetValue) --------------
    def _mine(self, buf: Any) -> bool:
        """True when on-chip ``buf`` is in this core's memories (UB: a vector core's; L1, L0: the
        cube core's)."""
        return buf.scope in self.mem.core_mem
    def _scalar_env(self, exprs: list, reads: list, what: Any) -> Callable[[], list]:
        """A function giving, when the instruction runs, the env its expressions see: the
        scalars of the moment it was issued, the values earlier scalar loads produced, and the
        on-chip tiles they load from bound to their memory (whose bytes go to ``reads``)."""
        snap = list(self.env)
        cells = dict(self.cells)
        bufs: dict = {}
        for e in exprs:
            for n in _onchip_loads(e):
                bufs[n.buffer] = 1
        for b in bufs:
            lo = self.offsets[b]
            reads.append((self.mem.key(b, self.core), lo, lo + buffer_bytes(b, self.layouts), b.name))
        mem = self.mem

        def env() -> list:
            e2 = list(snap)
            for slot, cell in cells.items():
                e2[slot] = cell[0]
            for b in bufs:
                e2[self.ctx.slot(b)] = mem.elems(b).reshape(self._shape(b))
            return e2
        return env

    def scalar_let(self, s: LetStmt) -> Instr:
        """``x = ub[i]``: the scalar unit reads a tile element on pipe S when it runs."""
        reads: list = []
        env = self._scalar_env([s.value], reads, s)
        fn = self.fn(s.value)
        slot = self.ctx.slot(s.var)
        cell: list = [None]
        self.cells[slot] = cell
        loads = _onchip_loads(s.value)
        self.env[slot] = _Pending(loads[0].buffer.name, s.span.line if s.span is not None else 0)

        def run() -> None:
            cell[0] = fn(env())
        return Instr("op", "S", s, run, reads, [])

    def scalar_store(self, s: BufferStore) -> Instr:
        """``ub[i] = x``: the scalar unit writes a tile element on pipe S when it runs."""
        reads: list = []
        env = self._scalar_env([s.value, *s.indices], reads, s)
        b = s.buffer
        vf, idx = self.fn(s.value), [self.fn(i) for i in s.indices]
        lo = self.offsets[b]
        writes = [(self.mem.key(b, self.core), lo, lo + buffer_bytes(b, self.layouts), b.name)]
        mem = self.mem

        def run() -> None:
            e2 = env()
            at = tuple(int(f(e2)) for f in idx)
            mem.elems(b).reshape(self._shape(b))[at] = vf(e2)
        return Instr("op", "S", s, run, reads, writes)

    # -- tile operations -----------------------------------------------------------------------
    def parallel(self, s: For) -> Instr:
        """A T.Parallel nest over UB buffers: one vector instruction, run by the interpreter's
        rule on views of the buffers' bytes, with the scalars of the moment it was issued."""
        fn = self._fns.get(id(s))
        if fn is None:
            fn = self._fns[id(s)] = compile_stmt(s, self.ctx.child(in_parallel=False, loop_ok=False,
                                                                    masked=False, flags={}))
        snap = list(self.env)
        reads: list = []
        writes: list = []
        boxes = self._parallel_boxes(s)
        for r, write in region_accesses(s):
            b = r.buffer
            shape = self._shape(b)
            snap[self.ctx.slot(b)] = self.mem.elems(b).reshape(shape)
            lo, hi = self._box_bytes(b, shape, boxes.get((b, write)))
            (writes if write else reads).append((self.mem.key(b, self.core), lo, hi, b.name))

        def run() -> None:
            snap[MASK] = None
            fn(snap)
        return Instr("op", "V", s, run, reads, writes)

    def _shape(self, buf: Any) -> tuple:
        return tuple(int(d) if isinstance(d, int) else int(self.val(d, self.env)) for d in buf.shape)

    def _parallel_boxes(self, s: For) -> dict:
        """(buffer, write) -> (lowest, highest) index per dimension that the T.Parallel nest
        ``s`` touches, its loop variables ranging over their extents and every other scalar at
        its value now; a buffer whose indices cannot be evaluated that way is left out (then
        its whole storage counts as touched)."""
        env = list(self.env)
        loops, body, ndim = [], s, 0
        while isinstance(body, For) and body.kind == "parallel":
            loops.append(body)
            body = body.body
        ndim = len(loops)
        for d, lp in enumerate(loops):
            b0, n = int(self.val(lp.start, env)), int(self.val(lp.extent, env))
            if n <= 0:
                return {}
            env[self.ctx.slot(lp.var)] = np.arange(b0, b0 + n).reshape((1,) * d + (n,) + (1,) * (ndim - d - 1))
        boxes: dict = {}
        bad: set = set()

        def visit(n: Any) -> None:
            from tegula.ir.expr import BufferLoad

            if not isinstance(n, (BufferLoad, BufferStore)) or n.buffer.scope == "local.var":
                return
            key = (n.buffer, isinstance(n, BufferStore))
            if key in bad:
                return
            try:
                lows, highs = [], []
                for e in n.indices:
                    v = np.asarray(self.val(e, env))
                    lows.append(int(v.min()))
                    highs.append(int(v.max()))
            except Exception:  # an index the scalar rules cannot evaluate over arrays
                bad.add(key)
                boxes.pop(key, None)
                return
            old = boxes.get(key)
            if old is not None:
                lows = [min(a, b) for a, b in zip(old[0], lows)]
                highs = [max(a, b) for a, b in zip(old[1], highs)]
            boxes[key] = (lows, highs)
        from tegula.ir.visitor import post_order_visit

        post_order_visit(body, visit)
        return boxes

    def _box_bytes(self, buf: Any, shape: tuple, box: Optional[tuple]) -> tuple:
        """The byte range (in its memory) of the elements of ``buf`` in ``box`` (whole when None)."""
        item = buf.dtype.itemsize
        if buf.scope == "global":
            total = int(np.prod(shape)) * item
            if box is None or len(box[0]) != len(shape):
                return 0, total
            strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
            lo = sum(max(0, min(a, n - 1)) * st for a, n, st in zip(box[0], shape, strides))
            hi = sum(max(0, min(a, n - 1)) * st for a, n, st in zip(box[1], shape, strides))
            return int(lo) * item, (int(hi) + 1) * item
        base = self.offsets[buf]
        if box is None or len(box[0]) != len(shape) or \
                any(a < 0 or b >= n for a, b, n in zip(box[0], box[1], shape)):
            return base, base + buffer_bytes(buf, self.layouts)
        imap = self.layouts.get(buf, ND).index_map(shape)
        idx = imap[tuple(slice(a, b + 1) for a, b in zip(*box))]
        return base + int(idx.min()) * item, base + (int(idx.max()) + 1) * item

    def region(self, r: BufferRegion, node: Any) -> tuple:
        """(index array of the region's elements in the buffer's storage, valid mask or None,
        byte range) with starts evaluated now."""
        buf = r.buffer
        st = [int(self.val(a, self.env)) for a in r.starts]
        ex = [int(self.val(e, self.env)) for e in r.extents]
        shape = tuple(int(d) if isinstance(d, int) else int(self.val(d, self.env)) for d in buf.shape)
        if buf.scope == "global":
            strides = np.cumprod((1,) + shape[::-1])[:-1][::-1]
            grids = np.meshgrid(*[np.arange(s, s + e) for s, e in zip(st, ex)], indexing="ij")
            valid = np.ones(grids[0].shape, bool) if grids else np.ones((), bool)
            flat = np.zeros(valid.shape, np.int64)
            for g, n, stv in zip(grids, shape, strides):
                valid &= (g >= 0) & (g < n)
                flat += np.clip(g, 0, n - 1) * stv
            return flat, None if valid.all() else valid, _bytes(flat, valid, buf)
        for s0, e0, n in zip(st, ex, shape):
            if s0 < 0 or s0 + e0 > n:
                raise OutOfBoundsError(f"region of '{buf.name}' starting at {st} with extents {ex} "
                                       f"is out of bounds of its shape {shape}", node.span)
        imap = self.layouts.get(buf, ND).index_map(shape)
        idx = imap[tuple(slice(s0, s0 + e0) for s0, e0 in zip(st, ex))]
        base = self.offsets[buf]
        return idx, None, (base + int(idx.min()) * buf.dtype.itemsize,
                           base + (int(idx.max()) + 1) * buf.dtype.itemsize)

    def scalar_at_run(self, e: Any, bufs: list, reads: list) -> Callable[[], Any]:
        """A scalar operand that loads elements of on-chip buffers (``m_ub[i]``): evaluated when
        the instruction runs, on the memories of that moment (the scalars of the moment it was
        issued), its buffers counted as read."""
        fn = self.fn(e)
        snap = list(self.env)
        for b in bufs:
            lo = self.offsets[b]
            reads.append((self.mem.key(b, self.core), lo, lo + buffer_bytes(b, self.layouts), b.name))
        mem = self.mem

        def value() -> Any:
            for b in bufs:
                snap[self.ctx.slot(b)] = mem.elems(b).reshape(tuple(b.shape))
            return fn(snap)
        return value

    def tile_op(self, s: Stmt) -> Instr:
        pipe = pipe_of(s, self.m)
        mem, core = self.mem, self.core
        reads: list = []
        writes: list = []

        def operand(r: BufferRegion, write: bool) -> Callable:
            idx, valid, (lo, hi) = self.region(r, s)
            (writes if write else reads).append((mem.key(r.buffer, core), lo, hi, r.buffer.name))
            tile = tuple(e for e in idx.shape)
            buf = r.buffer

            def get() -> np.ndarray:
                v = mem.elems(buf)[idx]
                if valid is not None:
                    v = np.where(valid, v, v.dtype.type(0))
                return v.reshape(tile)

            def put(x: np.ndarray) -> None:
                x = np.asarray(x).reshape(idx.shape).astype(buf.dtype.np)
                if valid is None:
                    mem.elems(buf)[idx] = x
                else:
                    mem.elems(buf)[idx[valid]] = x[valid]
            return get, put

        run = TILE_RULES.get(type(s), EMU)(self, s, operand, reads, writes)
        return Instr("op", pipe, s, run, reads, writes)


# -- what each instruction does (the emulator's rule per node) -----------------------------------
#
# A tile op's ``npu.emu`` rule gets the issuer, the node, ``operand(region, write) -> (get, put)``
# (which also records the bytes it touches) and the reads / writes lists, and returns the
# function that does its work when the simulator executes it.

EMU = add_aspect("npu.emu", "ascend-emu")


@tile_rule(Copy, EMU)
def _copy(iss: Issuer, s: Copy, operand: Callable, reads: list, writes: list) -> Callable:
    get, _ = operand(s.src, False)
    _, put = operand(s.dst, True)
    narrow = s.dst.buffer.dtype.is_float and s.dst.buffer.dtype.bits < 32
    flagged = bool(s.annotations.get("relu") or s.annotations.get("transpose_tile"))

    def run() -> None:
        x = get()
        if flagged:  # enable_relu / transpose (T.copy's flags): the interpreter's rule
            x = apply_copy_flags(x, s.annotations)
        put(x.astype(np.float32) if narrow and x.dtype != s.dst.buffer.dtype.np else x)
    return run


@tile_rule(Mma, EMU)
def _mma(iss: Issuer, s: Mma, operand: Callable, reads: list, writes: list) -> Callable:
    ga, _ = operand(s.A, False)
    gb, _ = operand(s.B, False)
    gc, pc = operand(s.C, True)
    init = s.init if isinstance(s.init, bool) else bool(iss.val(s.init, iss.env))
    if not init:
        reads.append(writes[-1])

    def run() -> None:
        pc(semantics.mma(ga(), gb(), gc(), s.transpose_A, s.transpose_B, init))
    return run


@tile_rule(VecOp, EMU)
def _vec(iss: Issuer, s: VecOp, operand: Callable, reads: list, writes: list) -> Callable:
    loads = scalar_reads(s)
    srcs = [operand(x, False)[0] if isinstance(x, BufferRegion) else
            iss.scalar_at_run(x, loads, reads) if loads else iss.val(x, iss.env) for x in s.srcs]
    gd, pd = operand(s.dst, True)
    if vecops.row(s.op).reads_dst:
        reads.append(writes[-1])

    def run() -> None:
        pd(semantics.vec(s.op, gd(), [x() if callable(x) else x for x in srcs], s.attrs, s.span))
    return run


_REDUCE = {"sum": np.sum, "max": np.max, "min": np.min,
           "abssum": lambda x, axis: np.sum(np.abs(x), axis=axis),
           "absmax": lambda x, axis: np.max(np.abs(x), axis=axis)}
_COMBINE = {"sum": np.add, "abssum": np.add, "max": np.maximum, "min": np.minimum, "absmax": np.maximum}


@tile_rule(Reduce, EMU)
def _reduce(iss: Issuer, s: Reduce, operand: Callable, reads: list, writes: list) -> Callable:
    gs, _ = operand(s.src, False)
    gd, pd = operand(s.dst, True)
    if not s.clear:
        reads.append(writes[-1])
    red, comb = _REDUCE[s.kind], _COMBINE[s.kind]

    def run() -> None:
        x = gs().astype(np.float32)
        r = red(x, axis=s.dim)
        if not s.clear:
            r = comb(r, gd().reshape(r.shape).astype(np.float32))
        pd(r)
    return run


@tile_rule(Fill, EMU)
def _fill(iss: Issuer, s: Fill, operand: Callable, reads: list, writes: list) -> Callable:
    gd, pd = operand(s.dst, True)
    v = iss.val(s.value, iss.env)

    def run() -> None:
        pd(np.full(gd().shape, v, np.float32))
    return run


# flags and barriers: the instruction each is
_SYNC: dict = {
    SetFlag: lambda iss, s: Instr("set", s.src, s, event=(s.src, s.dst), flag=int(iss.val(s.id, iss.env))),
    WaitFlag: lambda iss, s: Instr("wait", s.dst, s, event=(s.src, s.dst), flag=int(iss.val(s.id, iss.env))),
    PipeBarrier: lambda iss, s: Instr("barrier", s.pipe, s),
    BarrierAll: lambda iss, s: Instr("all", "S", s),
    SetCrossFlag: lambda iss, s: Instr("xset", s.pipe, s, flag=int(iss.val(s.flag, iss.env)), mode=s.mode),
    WaitCrossFlag: lambda iss, s: Instr("xwait", "S", s, flag=int(iss.val(s.flag, iss.env))),
}


class _Pending:
    """What the issuer holds for a scalar the scalar unit will load from a tile when it runs."""

    def __init__(self, buffer: str, line: int):
        self.buffer, self.line = buffer, line


def _onchip_loads(e: Any) -> list:
    """The loads of on-chip tile elements (UB, L1, ...) in expression ``e``."""
    from tegula.ir.expr import BufferLoad
    from tegula.ir.visitor import post_order_visit

    out: list = []
    post_order_visit(e, lambda n: out.append(n) if isinstance(n, BufferLoad)
                     and n.buffer.scope not in ("global", "local.var") else None)
    return out


def _vars(e: Any) -> list:
    from tegula.ir.expr import Var
    from tegula.ir.visitor import post_order_visit

    out: list = []
    post_order_visit(e, lambda n: out.append(n) if isinstance(n, Var) else None)
    return out


def _span(e: Any) -> Any:
    from tegula.ir.expr import Var

    return None if isinstance(e, Var) else getattr(e, "span", None)  # a Var's span is its definition


def _bytes(flat: np.ndarray, valid: np.ndarray, buf: Any) -> tuple:
    f = flat[valid] if valid is not None and valid.size else flat
    if f.size == 0:
        return (0, 0)
    return (int(f.min()) * buf.dtype.itemsize, (int(f.max()) + 1) * buf.dtype.itemsize)


__all__ = ["Instr", "Issuer", "Memory", "Expr"]
