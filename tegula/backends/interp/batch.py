"""Blocks of a launch side by side: the interpreter runs up to ``config.settings.interp_batch``
blocks of a grid at once, along a leading batch axis, where that cannot change what the launch
computes.

Blocks run one after another in launch order (the interpreter's definition). Running a batch of
them side by side, statement by statement, gives the same memory when no block can see what
another block of the batch did. The rule, checked before a launch (:func:`refusal`):

1. it makes no ``T.print``, and atomics only into global buffers that it neither reads nor
   stores into, one kind (add, max or min) per buffer: a batch's atomics are applied when the
   batch ends, block after block in launch order, each block's in the order it made them, so
   every element sees the same sequence of updates as block by block;
2. no global buffer it writes is also read by it (no block reads another block's writes; and a
   batch can be run again block by block from the same memory);
3. it binds no ``T.make_tensor`` and stores into no ``T.alloc_var`` inside a ``T.Parallel`` loop;
4. it compiles in the batched form: a serial loop whose start, a ``T.Parallel`` loop whose range,
   or a tile whose extents differ per block, a ``break``, a store the same for every block into
   global memory, ... leave the launch block by block;

and after each batch: 5. no element of global memory was written by two blocks of the batch
(otherwise the last block in launch order must win: the batch runs again block by block).
A user error raised inside a batch (an out-of-bounds index, say: any
:class:`~tegula.errors.TegulaError`) runs that batch again block by block, so the error, the
element it names and the kernel line are those of the block-by-block run. A batch that fails
(an error, or check 5) first puts back the global elements it wrote, so the rerun starts from
the memory the batch started from: after an error, global memory holds exactly what the blocks
before the failing one wrote. The batched compilation declines what the batched form cannot
express with :data:`DECLINED` errors (the launch runs block by block); any other exception while
compiling or running a batch is a bug of the batched rules and surfaces as an
:class:`~tegula.errors.InternalError`.

How: the kernel body is rewritten (:func:`batched_body`) into one ``T.Parallel`` loop over a
lane ``t`` per block of the batch, the block indices computed from ``t`` and the batch's first
block; every shared, fragment and local buffer gets a leading dimension indexed by ``t``. Element
code then runs with the rules of ``T.Parallel`` nests (block-dependent branches and loop counts
become lane masks); tile operations take their batched rules (:mod:`.batch_tileops`), which read
and write one tile per block; global stores and tile writes record the elements each block
wrote, for check 5.
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from tegula import config
from tegula.errors import InternalError, ScopeError, TegulaError, UnsupportedError
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.effects import effects
from tegula.ir.stmt import (Atomic, BufferStore, Copy, CumSum, Evaluate, Fill, For, Gemm,
                            IfThenElse, Kernel, LetStmt, Print, Reduce, SeqStmt, Stmt, TileOp, While)
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.closure import MASK, compile_stmt, np_scalar, poison
from tegula.backends.interp.context import dim_value
from tegula.backends.memo import new_memo

# blocks run side by side / one by one since the process started (tests and benchmarks read it)
BLOCKS = {"batched": 0, "single": 0}

# bytes of stacked shared / fragment / local memory a batch may hold, and the fewest blocks worth
# a batch: side by side pays where a block's numpy calls are small (their fixed cost dominates);
# blocks of large tiles are already compute-bound, and run one after another
_BUDGET = 2 << 20
_MIN_BATCH = 8


@dataclass
class BatchInfo:
    """What the batched compilation of a kernel body knows: the block lane, the batch size,
    the stacked buffers and the env slot of the list of global writes."""

    lane: Var
    size: int
    stacked: frozenset   # ids of the buffers with a leading batch dimension
    writes: int          # env slot: list of (buffer slot, flat indices, block of each, old values)
    atomics: int         # env slot: list of (buffer slot, kind, flat indices, values, blocks)


# what the batched compilation raises for a kernel its form cannot express (rule 4): a construct
# it has no batched rule for (UnsupportedError: a per-block loop start, tile extents differing
# per block, a global store the same for every block, ...) or one that cannot sit inside the
# T.Parallel loop over the blocks (ScopeError: a break, a tile op nested in a parallel loop)
DECLINED = (UnsupportedError, ScopeError)

_HINT = "set TEGULA_INTERP_BATCH=1 to run the blocks one by one meanwhile"

# the statements the batched form has rules for (others, an NPU scope say, run block by block)
_KNOWN = (SeqStmt, Evaluate, For, While, IfThenElse, BufferStore, LetStmt, Copy, Gemm, Reduce,
          CumSum, Fill, Atomic, Print)


def refusal(k: Kernel) -> Optional[str]:
    """Why the blocks of ``k`` must run one after another (rules 1-3 of the module docstring),
    or None when they may run side by side."""
    reads: set = set()
    writes: set = set()
    kinds: dict = {}   # atomic destination -> its atomics' kinds
    why: list = []

    def region_read(r: Any) -> None:
        if isinstance(r, BufferRegion) and r.buffer.is_global:
            reads.add(r.buffer)

    def region_write(r: Any) -> None:
        if r.buffer.is_global:
            writes.add(r.buffer)

    def visit(n: Any) -> None:
        if isinstance(n, Stmt) and not isinstance(n, _KNOWN):
            why.append(f"it holds a {type(n).__name__}")
        elif isinstance(n, Print):
            why.append("it prints")
        elif isinstance(n, TileOp):   # what it reads and writes: its declaration (ir/effects.py)
            eff = effects(n)
            for r in eff.reads:
                region_read(r)
            for r in eff.writes:
                if not eff.atomic:
                    region_write(r)
                elif not r.buffer.is_global:
                    why.append(f"it makes atomics into '{r.buffer.name}', not global memory")
                else:
                    kinds.setdefault(r.buffer, set()).add(n.kind)
        elif isinstance(n, LetStmt) and getattr(n.var, "buffer", None) is not None:
            why.append("it binds a T.make_tensor")
        elif isinstance(n, BufferLoad) and n.buffer.is_global:
            reads.add(n.buffer)
        elif isinstance(n, BufferStore) and n.buffer.is_global:
            writes.add(n.buffer)
        elif isinstance(n, For) and n.kind == "parallel":
            def var_store(m: Any) -> None:
                if isinstance(m, BufferStore) and m.buffer.is_var:
                    why.append(f"it stores into '{m.buffer.name}' inside a T.Parallel loop")
            post_order_visit(n.body, var_store)
    post_order_visit(k.body, visit)
    if why:
        return why[0]
    both = sorted(b.name for b in reads & (writes | set(kinds)))
    if both:
        return f"it reads global buffer '{both[0]}', which it writes"
    for b, ks in kinds.items():
        if b in writes:
            return f"it stores into '{b.name}', which it updates atomically"
        if len(ks) > 1:
            return f"it makes atomics of {len(ks)} kinds into '{b.name}'"
    return None


class _Stack(Mutator):
    """Gives the buffers of ``stacked`` a leading dimension indexed by ``lane``."""

    def __init__(self, stacked: dict, lane: Var):
        super().__init__(stacked)
        self.lane = lane

    def visit_BufferLoad(self, e: BufferLoad) -> Any:
        new = self.generic_visit(e)
        if e.buffer in self.buffer_map:
            return dataclasses.replace(new, indices=(self.lane,) + tuple(new.indices))
        return new

    def visit_BufferStore(self, s: BufferStore) -> Any:
        new = self.generic_visit(s)
        if s.buffer in self.buffer_map:
            return dataclasses.replace(new, indices=(self.lane,) + tuple(new.indices))
        return new

    def visit_BufferRegion(self, r: BufferRegion) -> Any:
        new = self.generic_visit(r)
        if r.buffer in self.buffer_map:
            return dataclasses.replace(new, ranges=((self.lane, 1),) + tuple(new.ranges))
        return new


def stacked_buffers(k: Kernel, size: int) -> dict:
    """The kernel's shared, fragment and local buffers, each with a leading dimension of
    ``size`` (``T.alloc_var`` scalars stay: the batch's lane holds one value per block)."""
    return {b: Buffer(b.name, (size,) + tuple(b.shape), b.dtype, b.scope, span=b.span)
            for b in k.allocs if not b.is_var}


def batched_body(k: Kernel, size: int, first: Var, stacked: dict, lane: Var, align: int) -> For:
    """``k.body`` for ``size`` blocks side by side: one ``T.Parallel`` loop over ``lane``, the
    block indices computed from ``first + lane`` in launch order (the last grid dimension
    fastest), the ``stacked`` buffers indexed by ``lane`` first. Batches start at multiples of
    ``align``: a block index that cannot change inside such a batch (its grid dimension is 1, or
    the dimensions after it hold a multiple of ``align`` blocks) is computed from ``first``
    alone, one value for the batch, as block by block."""
    body = _Stack(stacked, lane).visit(k.body)
    lets = []
    inner: Any = 1   # product of the grid dimensions after the current one
    for n, (v, g) in enumerate(reversed(list(zip(k.block_vars, k.grid)))):
        fixed = (isinstance(g, int) and g == 1) or (isinstance(inner, int) and inner % align == 0)
        idx = first if fixed else first + lane
        if not (isinstance(inner, int) and inner == 1):
            idx = idx // inner
        if n < len(k.block_vars) - 1:
            idx = idx % g
        lets.append(LetStmt(v, idx if idx.dtype == v.dtype else E.cast(v.dtype, idx)))
        inner = g * inner if not (isinstance(inner, int) and inner == 1) else g
    stmts = tuple(reversed(lets)) + (body.stmts if isinstance(body, SeqStmt) else (body,))
    return For(lane, E.const(0), size, SeqStmt(stmts), "parallel", span=k.span)


def block_mask(env: list, size: int) -> Optional[np.ndarray]:
    """The active blocks of a batch (a bool array of ``size``), or None when all are; at block
    level the lane mask varies only along the batch axis."""
    m = env[MASK]
    if m is None:
        return None
    m = np.asarray(m)
    if m.ndim == 0:
        return None if m else np.zeros(size, bool)
    flat = m.reshape(m.shape[0], -1)[:, 0]
    return flat if flat.shape[0] == size else np.broadcast_to(flat[:1], (size,))


def per_block(v: Any, size: int) -> np.ndarray:
    """A value computed at block level (a scalar or one entry per block) as ``size`` entries."""
    a = np.asarray(v)
    if a.size == size:
        return a.reshape(size)
    return np.broadcast_to(a.reshape(-1)[:1], (size,))


def disjoint(records: list, size: int) -> bool:
    """Whether no element of global memory was written by two blocks (check 5). Each record
    lists its elements block after block (``blocks`` never decreases)."""
    if not records or size < 2:
        return True
    by_buf: dict = {}
    for slot, flat, blocks, _ in records:
        by_buf.setdefault(slot, []).append((np.ravel(flat), np.ravel(blocks)))
    for parts in by_buf.values():
        lo = np.full(size, np.iinfo(np.int64).max)
        hi = np.full(size, -1, np.int64)
        for flat, blocks in parts:
            if not flat.size:
                continue
            cut = np.flatnonzero(np.diff(blocks)) + 1
            first = np.concatenate(([0], cut))
            who = blocks[first]
            lo[who] = np.minimum(lo[who], np.minimum.reduceat(flat, first))
            hi[who] = np.maximum(hi[who], np.maximum.reduceat(flat, first))
        used = np.flatnonzero(hi >= 0)
        if used.size < 2:
            continue
        order = used[np.argsort(lo[used], kind="stable")]
        if np.all(hi[order[:-1]] < lo[order[1:]]):
            continue  # each block wrote inside a range of its own
        flat = np.concatenate([f for f, _ in parts]).astype(np.int64)
        blocks = np.concatenate([b for _, b in parts]).astype(np.int64)
        base, span = int(lo[used].min()), int(hi[used].max() - lo[used].min()) + 1
        if span <= max(64 * flat.size, 1 << 24):
            # each element remembers its last writer; an element two blocks wrote shows the other
            # one at that block's write (np.empty: only the pages written are ever touched)
            owner = np.empty(span, np.int32)
            owner[flat - base] = blocks
            if np.any(owner[flat - base] != blocks):
                return False
            continue
        key = np.sort(flat * size + blocks)
        elems, who = key // size, key % size
        if np.any((elems[1:] == elems[:-1]) & (who[1:] != who[:-1])):
            return False
    return True


def recorded_write(a: np.ndarray, ix: tuple, values: Any) -> tuple[np.ndarray, np.ndarray]:
    """Store ``values`` at the index arrays ``ix`` (all of one shape, ``values`` too) of global
    array ``a``; returns (the flat indices, the values they held before) for the batch's record."""
    flat = ix[0] if len(ix) == 1 else np.ravel_multi_index(ix, a.shape)
    if a.flags.c_contiguous:  # flat take and put: as cheap as one store by index arrays
        av = a.reshape(-1)
        old = av.take(flat)
        av[flat] = values
    else:
        old = a[ix]
        a[ix] = values
    return flat, old


def restore(env: list, records: list) -> None:
    """Put back the global elements a batch wrote (``records`` of (buffer slot, flat indices,
    blocks, the values they held before)), latest first, so each element gets its value from
    before the batch."""
    for slot, flat, _, old in reversed(records):
        a = env[slot]
        a[np.unravel_index(np.ravel(flat), a.shape)] = np.ravel(old)


_UFUNCS = {"add": np.add, "max": np.maximum, "min": np.minimum}


def apply_atomics(env: list, records: list) -> None:
    """Make a batch's atomics: per buffer, block after block (stable: each block's updates in
    the order it made them), one update per entry as ``ufunc.at`` does."""
    by_buf: dict = {}
    for slot, kind, flat, vals, blocks in records:
        by_buf.setdefault((slot, kind), []).append((flat, vals, blocks))
    for (slot, kind), parts in by_buf.items():
        a = env[slot]
        flat = np.concatenate([np.ravel(f) for f, _, _ in parts])
        vals = np.concatenate([np.ravel(v) for _, v, _ in parts])
        blocks = np.concatenate([np.ravel(b) for _, _, b in parts])
        # a stable sort of small integers is a radix sort
        order = np.argsort(blocks.astype(np.uint8 if blocks.max() < 256 else np.uint16), kind="stable")
        if a.flags.c_contiguous:
            _UFUNCS[kind].at(a.reshape(-1), flat[order], vals[order])
        else:
            _UFUNCS[kind].at(a, np.unravel_index(flat[order], a.shape), vals[order])


class Plan:
    """How one ``Kernel`` launch runs its blocks: side by side where :func:`refusal` allows and
    the batched body compiles, else (and for any batch that failed a check) one by one."""

    def __init__(self, k: Kernel, ctx: Any, allocs: list):
        self.kernel = k
        self.ctx = ctx
        self.var_allocs = [a for a, b in zip(allocs, k.allocs) if b.is_var]
        self.first = Var("batch_first")
        self.lane = Var("batch_lane")
        self.first_slot = ctx.slot(self.first)
        self._keys = (_WritesKey(), _WritesKey())  # kept alive: slots are keyed by id
        self.writes_slot = ctx.slot(self._keys[0])
        self.atomics_slot = ctx.slot(self._keys[1])
        self.failed = False     # a batch failed: blocks run one by one from then on
        self.progs: dict = {}   # (blocks, alignment of batches) -> (body, stacked allocs) or None
        per = 0
        for b in k.allocs:
            if not b.is_var:
                n = b.dtype.itemsize
                for d in b.shape:
                    n *= d if isinstance(d, int) else 1
                per += n
        self.max_size = max(1, _BUDGET // max(per, 1))

    @staticmethod
    def of(k: Kernel, ctx: Any, allocs: list) -> Optional["Plan"]:
        return None if refusal(k) is not None else Plan(k, ctx, allocs)

    def size(self) -> int:
        """Blocks per batch (1: one after another)."""
        n = min(config.settings.interp_batch, self.max_size)
        return n if n >= min(_MIN_BATCH, config.settings.interp_batch) else 1

    def _compiled(self, n: int, align: int) -> Any:
        if (n, align) in self.progs:
            return self.progs[n, align]
        stacked = stacked_buffers(self.kernel, n)
        info = BatchInfo(self.lane, n, frozenset(id(b) for b in stacked.values()), self.writes_slot,
                         self.atomics_slot)
        ctx = self.ctx.child(in_parallel=False, loop_ok=False, masked=False, flags={},
                             threads=self.kernel.num_threads, batch=info,
                             memo=new_memo(self.ctx.memo.lane_sig) if self.ctx.memo else None)
        try:
            loop = batched_body(self.kernel, n, self.first, stacked, self.lane, align)
            body = compile_stmt(loop, ctx)
        except DECLINED:  # what the batched form cannot do runs block by block
            self.progs[n, align] = None
            return None
        except Exception as err:  # noqa: BLE001 (a bug of the batched rules: say so)
            raise InternalError(f"compiling the kernel's blocks side by side failed with "
                                f"{type(err).__name__}: {err}", self.kernel.span, hint=_HINT) from err
        allocs = []
        for old, b in stacked.items():
            slot = ctx.slot(b)
            shape = [dim_value(d, ctx) for d in b.shape]
            allocs.append((slot, shape, b.dtype.np, poison(old.dtype)))
        self.progs[n, align] = (body, allocs)
        return self.progs[n, align]

    def launch(self, env: list, dims: list, run_block: Callable[[list, tuple], None]) -> None:
        """Run every block of the grid ``dims``, in batches where allowed."""
        total = 1
        for d in dims:
            total *= d
        size = self.size()
        blocks = itertools.product(*(range(d) for d in dims))
        if size < 2 or total < 2:
            BLOCKS["single"] += total
            for bidx in blocks:
                run_block(env, bidx)
            return
        first = 0
        while first < total:
            chunk = list(itertools.islice(blocks, size))
            prog = None if self.failed else self._compiled(len(chunk), size)
            if prog is not None and self._run(env, prog, first, len(chunk)):
                BLOCKS["batched"] += len(chunk)
            else:
                # a batch that failed a check runs again block by block, and so does the rest
                # of the launch and later launches (the check would most likely fail again)
                self.failed = prog is not None or self.failed
                BLOCKS["single"] += len(chunk)
                for bidx in chunk:
                    run_block(env, bidx)
            first += len(chunk)

    def _run(self, env: list, prog: Any, first: int, n: int) -> bool:
        body, allocs = prog
        if len(env) < self.ctx.slots.size:  # slots handed out by the batched compilation
            env.extend([None] * (self.ctx.slots.size - len(env)))
        env[self.first_slot] = np_scalar(self.first.dtype, first)
        env[self.writes_slot] = []
        env[self.atomics_slot] = []
        for slot, shape, npd, fill in allocs:
            a = np.empty([f(env) for f in shape], npd)
            a.fill(fill)
            env[slot] = a
        for slot, shape, npd, fill in self.var_allocs:
            a = np.empty([f(env) for f in shape], npd)
            a.fill(fill(env))
            env[slot] = a
        env[MASK] = None
        try:
            body(env)
        except TegulaError:  # a user error: the batch runs again block by block, which reports it
            restore(env, env[self.writes_slot])
            return False
        except Exception as err:  # noqa: BLE001 (a bug of the batched rules: say so)
            restore(env, env[self.writes_slot])
            raise InternalError(f"running blocks {first}..{first + n - 1} of the kernel side by side "
                                f"failed with {type(err).__name__}: {err}", self.kernel.span, hint=_HINT) from err
        finally:
            env[MASK] = None
        ok = disjoint(env[self.writes_slot], n)
        if ok:
            apply_atomics(env, env[self.atomics_slot])
        else:
            restore(env, env[self.writes_slot])
        env[self.writes_slot] = env[self.atomics_slot] = None
        return ok


class _WritesKey:
    """The key of the env slot holding a batch's global writes."""


def unbatched_global_store(s: Any) -> UnsupportedError:
    """A store into global memory the same for every block of a batch (rule 4)."""
    return UnsupportedError(f"a store into '{s.buffer.name}' the same for every block", s.span)
