"""Plan shared memory: give each shared buffer of a kernel a byte offset, letting buffers whose
lifetimes do not overlap share bytes.

Lifetimes come from :mod:`.smem_liveness` (program order, loops as a whole, a pipeline's
asynchronous copies landing inside its loop). Two buffers may share bytes when their lifetimes
are disjoint and every thread passes a barrier between the last use of the one and the first use
of the other, so no thread can still be reading the old contents when another writes the new
ones (for two buffers inside one loop, also between the later one and the next iteration's use
of the earlier one). Where the two uses are in different top-level statements and no barrier
separates them, the planner puts one in front of the later statement, as merging the buffers
needs it. Runs after barrier insertion, which therefore never has to reason about aliasing.
Buffers are placed first-fit in order of first use, larger first; a buffer no statement touches
takes no bytes of its own, and mbarriers (shared ``uint64`` tiles) never share theirs. The result goes to
``Kernel.annotations["smem_offsets"]`` (with ``"smem_bytes"``, the total), which codegen and
the emulator follow. ``tl.disable_shared_memory_reuse`` gives every buffer bytes of its own.

Before/after (Q_s used in the loop, O_s only after it; a barrier goes in between)::

    for k in T.serial(n):                          for k in T.serial(n):
        ... Q_s ...                                    ... Q_s ...
    O_s[tx] = acc[0]                               T.sync_threads()
                                                   O_s[tx] = acc[0]
    (Q_s: 0, O_s: 16384; 32768 B)                  (Q_s: 0, O_s: 0; 16384 B)
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir.annotations import SMEM_BYTES, SMEM_OFFSETS
from tegula.errors import UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir.stmt import Kernel, PrimFunc, SeqStmt
from tegula.ir.visitor import Mutator
from tegula.backends.cuda.analysis.shared_access import barrier
from tegula.backends.cuda.machine import SMEM_ALIGN, align
from tegula.backends.cuda.analysis.smem_liveness import Liveness, liveness

def _is_mbarrier(b: Any) -> bool:
    """Shared ``uint64`` tiles hold mbarriers (``T.alloc_barrier``, TMA stage barriers)."""
    return b.dtype == dt.uint64


def _handoff(live: Liveness, a: Any, b: Any) -> Optional[set]:
    """How ``b`` may take over bytes of ``a``: an empty set when barriers already separate them,
    the top-level statement to put a barrier in front of (a one-element set), or None."""
    if a not in live.first or b not in live.first or live.overlap(a, b):
        return None
    if _is_mbarrier(a) or _is_mbarrier(b):  # mbarrier memory is not repurposed (PTX: mbarrier.inval first)
        return None
    early, late = (a, b) if live.last[a] < live.first[b] else (b, a)
    x, y = live.last[early], live.first[late]
    if not live.back_edge_barrier(early, late):
        return None
    if live.barrier_between(x, y):
        return set()
    if live.top[x] < live.top[y]:
        return {live.top[y]}
    return None


def plan_kernel(k: Kernel, reuse: bool = True, add_barriers: bool = True) -> tuple[dict, set]:
    """Offsets of ``k``'s shared buffers and the top-level statements that need a barrier in
    front of them for the sharing these offsets imply."""
    shared = [b for b in k.allocs if b.is_shared]
    live = liveness(k)
    placed: list[tuple[int, int, Any]] = []  # (offset, size, buffer)
    offsets: dict = {}
    fences: set = set()
    order = sorted(shared, key=lambda b: (live.first.get(b, -1), -b.nbytes()))
    aligns = k.annotations.get("smem_align") or {}  # buffers that need more than SMEM_ALIGN
    for b in order:
        if reuse and b not in live.first:  # never touched (a tile of a branch not taken): no bytes
            offsets[b] = 0
            continue
        size = align(b.nbytes())
        a = max(SMEM_ALIGN, aligns.get(b, SMEM_ALIGN))
        how = {id(o): (_handoff(live, o, b) if reuse else None) for _, _, o in placed}
        if not add_barriers:
            how = {i: (None if h else h) for i, h in how.items()}
        blocked = sorted((off, off + sz) for off, sz, o in placed if how[id(o)] is None)
        off = 0
        for lo, hi in blocked:
            if off + size <= lo:
                break
            off = max(off, align(hi, a))
        offsets[b] = off
        for o_off, o_size, o in placed:
            if how[id(o)] and o_off < off + size and off < o_off + o_size:
                fences |= how[id(o)]
        placed.append((off, size, b))
    return offsets, fences


def smem_layout(k: Kernel) -> tuple[dict[int, int], int]:
    """Byte offset of each shared buffer (``id(buffer)`` -> offset) and the total: the planned
    offsets of ``annotations["smem_offsets"]``, else packed in order at ``SMEM_ALIGN``. What
    codegen carves the dynamic shared memory into, and the emulator's pool."""
    offsets = SMEM_OFFSETS.get(k.annotations) or {}
    out: dict[int, int] = {}
    total = 0
    cursor = 0
    for b in k.allocs:
        if not b.is_shared:
            continue
        if not b.is_static:
            raise UnsupportedError(f"shared buffer '{b.name}' has a dynamic shape {b.shape}", span=b.span)
        if b in offsets:
            off = int(offsets[b])
        else:
            off = align(cursor)
            cursor = off + b.nbytes()
        out[id(b)] = off
        total = max(total, off + b.nbytes())
    return out, total


def plan_shared_memory(func: PrimFunc, no_reuse: Any = None, no_barriers: Any = None) -> PrimFunc:
    """Plan the shared memory of every kernel of ``func`` (``no_reuse``: bytes of its own for
    every buffer; ``no_barriers``: share only where barriers already separate, adding none)."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            offsets, fences = plan_kernel(k, reuse=not no_reuse, add_barriers=not no_barriers)
            body = k.body
            if fences:
                stmts = list(body.stmts) if isinstance(body, SeqStmt) else [body]
                out = []
                for i, st in enumerate(stmts):
                    if i in fences:
                        out.append(barrier())
                    out.append(st)
                body = SeqStmt(tuple(out))
            ann = dict(k.annotations)
            ann[SMEM_OFFSETS.name] = offsets
            ann[SMEM_BYTES.name] = max((o + b.nbytes() for b, o in offsets.items()), default=0)
            return Kernel(k.grid, k.threads, k.block_vars, k.allocs, body, dict(k.alloc_inits), ann,
                          thread_var=k.thread_var, span=k.span)

    return M().visit(func)
